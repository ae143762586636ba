import Foundation
import LifecycleClient
import LifecycleKit

/// `lifecycled post [--queue DIR] [--believed STATE] [--ran HOOK,HOOK…] INSTANCE EVENT [NAME=VALUE …]`.
struct PostCommand {
    static let usage = """
        usage: lifecycled post [options] INSTANCE EVENT [NAME=VALUE ...]

        Sends EVENT to INSTANCE (POST /v1/instances/INSTANCE/events) and prints its record as
        JSON. NAME=VALUE parameters take the types the instance's model declares
        (isTesting=true is a boolean); when the service cannot be asked, those of the built-in
        model declaring EVENT, else the value's look (true/false, an integer, a number, else a
        string).

        exit status: 0 recorded; 3 the event was unexpected (recorded and counted: its record is
        printed); 1 refused (the problem on standard error) or the service unreachable; 2 a bad
        command line. With --queue, an unreachable service is 0 and prints "queued".

        options:
          --queue DIR         queue the event in the reporter journal in DIR first, then deliver
                              the queue (this event last) at once; if the service cannot be
                              reached, the event stays queued for `lifecycled flush --queue DIR`
          --believed STATE    the state the app's code believes it is in afterwards (believedState)
          --ran HOOK,HOOK...  the hooks the app's code ran, in order (ranHooks); --ran= for none

        """ + ServerOptions.help + "\n"

    let server: ServerOptions
    let queue: String?
    let instance: String
    let event: String
    let words: [String]
    let believedState: String?
    let ranHooks: [String]?

    init(_ arguments: [String], environment: [String: String]) throws {
        let parsed = try Arguments(arguments, command: "post", valued: ServerOptions.flags.union(["--queue", "--believed", "--ran"]), switches: [])
        server = try ServerOptions(parsed, environment: environment, command: "post")
        queue = try parsed.single("--queue", command: "post")
        believedState = try parsed.single("--believed", command: "post")
        ranHooks = try parsed.single("--ran", command: "post").map { $0.isEmpty ? [] : $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        guard parsed.positional.count >= 2 else {
            throw UsageError("needs INSTANCE and EVENT (\(parsed.positional.count) given); see lifecycled post --help")
        }
        instance = parsed.positional[0]
        event = parsed.positional[1]
        words = Array(parsed.positional.dropFirst(2))
        if queue?.isEmpty == true { throw UsageError("--queue needs a directory; see lifecycled post --help") }
        if ranHooks?.contains("") == true { throw UsageError("--ran has an empty hook name; see lifecycled post --help") }
    }

    func run() async throws -> Int32 {
        let client = ClientCommand.client(server, timeout: queue == nil ? 30 : 5)
        let parameters = try ParameterTyping(event: event, definition: await definition(client)).parameters(words)
        guard let queue else {
            let record: Record
            do {
                record = try await client.postEvent(event, to: instance, parameters: parameters, believedState: believedState, ranHooks: ranHooks)
            } catch let error as LifecycleClientError {
                guard let problem = error.problem else { throw error }
                return try Self.report(.problem(status: problem.status, problem))
            }
            return try Self.report(.record(status: 200, record))
        }
        let item = BatchItem.event(event, to: instance, parameters: parameters, believedState: believedState, ranHooks: ranHooks)
        return try await QueuedPost(directory: queue, client: client).post(item)
    }

    /// The instance's model as the service has it, to type parameters by; `nil` when it cannot
    /// be had. Whatever stops the look-up (an unreachable service, no such instance yet, a
    /// token reads refuse) is for the post itself to report; typing falls back to the
    /// built-in models and the look of each value.
    private func definition(_ client: LifecycleClient) async -> ModelDefinition? {
        guard !words.isEmpty else { return nil }
        do {
            let model = try await client.instance(instance).model
            return try await client.model(model).definition
        } catch {
            return nil
        }
    }

    /// Prints what the item was answered; its exit status.
    static func report(_ result: BatchResult) throws -> Int32 {
        switch result {
        case .record(_, let record):
            Output.line(try Output.json(record))
            return record.outcome == .unexpected ? ClientCommand.Status.unexpected : ClientCommand.Status.success
        case .problem(_, let problem):
            if let record = problem.record {
                Output.line(try Output.json(record))
                return ClientCommand.Status.unexpected
            }
            Output.error("lifecycled post: \(String(decoding: problem.body, as: UTF8.self))")
            return ClientCommand.Status.failure
        case .instance:
            throw LifecycleClientError.badResponse("an event was answered with an instance")
        }
    }
}
