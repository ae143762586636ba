import Foundation
import LifecycleClient

/// `lifecycled flush --queue DIR`.
struct FlushCommand {
    static let usage = """
        usage: lifecycled flush [options] --queue DIR

        Delivers every item `lifecycled post --queue DIR` left queued, in order, through
        POST /v1/batch, and prints how many were delivered. An item the service answered is
        delivered, refused or not (its refusal on standard error); each keeps the idempotency
        key it was given when queued, so an item whose answer was lost (a kill, a dropped
        connection) is replayed, never stored twice.

        exit status: 0 the queue is empty; 1 the service cannot be reached (or answers 5xx/429),
        refuses the token (401, 403), or a batch's answer cannot be written to the journal (a full disk: said at once, the
        batch sent again with its keys next time), and the rest stays queued; 2 a bad command line,
        or a DIR that does not exist (it is not created).

        options:
          --queue DIR         the reporter journal's folder (as given to post --queue)
          --max-items N       keep at most N undelivered items (default 10000), as post --queue
          --max-bytes N       keep at most N bytes of undelivered items (default 8388608)

        """ + ServerOptions.help + "\n"

    let server: ServerOptions
    let queue: QueueOptions

    init(_ arguments: [String], environment: [String: String]) throws {
        let parsed = try Arguments(arguments, command: "flush", valued: ServerOptions.flags.union(QueueOptions.flags), switches: [])
        server = try ServerOptions(parsed, environment: environment, command: "flush")
        guard let queue = try QueueOptions(parsed, command: "flush") else {
            throw UsageError("needs --queue DIR; see lifecycled flush --help")
        }
        guard parsed.positional.isEmpty else { throw UsageError("unexpected argument \(parsed.positional[0]); see lifecycled flush --help") }
        // A mistyped folder would otherwise be created empty and "flushed": exit 0, the real queue untouched.
        switch queue.found {
        case .nothing: throw UsageError("no queue folder \(queue.directory): nothing was queued there (post --queue creates it); see lifecycled flush --help")
        case .file: throw UsageError("\(queue.isAFile); see lifecycled flush --help")
        case .folder: break
        }
        self.queue = queue
    }

    func run() async throws -> Int32 {
        let outcome = try await QueuedPost(queue: queue, client: ClientCommand.client(server, timeout: 10)).flush()
        Output.line(String(outcome.delivered))
        if let failure = outcome.failure {
            Output.error("lifecycled flush: \(ClientCommand.describe(failure)); \(Output.counted(outcome.pending, "item")) kept in \(queue.directory)")
            return ClientCommand.Status.failure
        }
        return ClientCommand.Status.success
    }
}
