import Foundation
import LifecycleClient
import LifecycleKit

/// `lifecycled tail [--instance ID …] [--outcome O …] [--divergent] [--after SEQ] [--json]`.
struct TailCommand {
    static let usage = """
        usage: lifecycled tail [options]

        Prints every record as it is committed (GET /v1/stream), one line each, until stopped
        (SIGINT, SIGTERM). The stream resumes by itself where it left off when the service
        restarts or the connection drops, so no record is printed twice or skipped; standard
        error says so once when the service cannot be reached.

        A line: SEQUENCE INSTANCE vVERSION KIND NAME FROM -> TO OUTCOME [HOOK, ...], then, for
        a record whose reported belief or hooks differ from the model, "divergent" and what
        diverged: "believed=STATE actual=STATE" (the state the app's code believed beside the
        model's), "missing=[HOOK, ...]" and "extra=[HOOK, ...]" (hooks the model runs that the
        app did not, and the reverse), or "hookOrder ran=[HOOK, ...]" (the same hooks in
        another order); a gap (inputs the app's reporter dropped) says how many:
        "gap dropped=N". What a device sent
        is shown as it is but for control characters, escaped so that a record stays one line
        and cannot move the cursor: \\n, \\r, \\t, a backslash as \\\\, any other as \\u{1B} (its
        code point in hexadecimal; C0, DEL, C1, U+2028, U+2029 and the bidi controls).

        exit status: 1 refused (a bad token: the problem on standard error); 2 a bad command line.

        options:
          --instance ID       only this instance's records (repeatable: any of them)
          --outcome O         only records of this outcome: transitioned, stayed, ignored or
                              unexpected (repeatable: any of them)
          --divergent         only records with a divergence
          --after SEQ         start after this sequence number (0: every stored record first);
                              default: from now on
          --json              print each record as the service stored it, its JSON (one line:
                              its strings escape every control character as \\uXXXX)

        """ + ServerOptions.help + "\n"

    let server: ServerOptions
    let instances: [String]
    let outcomes: [Outcome]
    let divergent: Bool
    let after: Int64?
    let json: Bool

    init(_ arguments: [String], environment: [String: String]) throws {
        let parsed = try Arguments(
            arguments, command: "tail", valued: ServerOptions.flags.union(["--instance", "--outcome", "--after"]), switches: ["--divergent", "--json"]
        )
        server = try ServerOptions(parsed, environment: environment, command: "tail")
        guard parsed.positional.isEmpty else { throw UsageError("unexpected argument \(parsed.positional[0]); see lifecycled tail --help") }
        instances = parsed.all("--instance")
        outcomes = try parsed.all("--outcome").map { (text: String) throws(UsageError) -> Outcome in
            guard let outcome = Outcome(rawValue: text) else {
                throw UsageError("invalid value \"\(text)\" for --outcome: transitioned, stayed, ignored or unexpected")
            }
            return outcome
        }
        divergent = parsed.has("--divergent")
        json = parsed.has("--json")
        after = try parsed.single("--after", command: "tail").map { (text: String) throws(UsageError) -> Int64 in
            guard let sequence = Int64(text), sequence >= 0 else { throw UsageError("invalid value \"\(text)\" for --after: a sequence number (0 or more)") }
            return sequence
        }
    }

    func run() async throws -> Int32 {
        // A stream is silent between records: the timeout is the heartbeat's bound, not an answer's.
        let client = ClientCommand.client(server, timeout: 45)
        let records = client.records(filter: RecordFilter(instances: instances, outcomes: outcomes, divergent: divergent), after: after)
        for try await event in records {
            switch event {
            case .record(let record): Output.line(json ? try Output.json(record) : Self.line(record))
            case .gap(let gap): Output.error("lifecycled tail: records up to \(gap.droppedThrough) were dropped by retention before they could be shown")
            case .reset(let reset): Output.error("lifecycled tail: the service's newest record is \(reset.newest), behind this stream: going on from there")
            case .interrupted(let interruption) where interruption.attempt == 1:
                // Once an outage: the next lines are records again, once the service answers.
                Output.error("lifecycled tail: \(interruption.reason); trying again until it answers")
            case .created(let change), .deleted(let change):
                // A deletion and a new creation between one instance's records tell two lives apart.
                Output.line(json ? try Output.json(change) : Self.line(change))
            case .interrupted: break
            }
        }
        return ClientCommand.Status.success
    }

    /// The readable line of an instance's creation or deletion: `SEQUENCE INSTANCE vVERSION created|deleted MODEL STATE`.
    static func line(_ change: InstanceChange) -> String {
        Readable.escaped("\(change.sequence) \(change.instance) v\(change.version) \(change.kind) \(change.model) \(change.state)")
    }

    /// The readable line of a record: one line, whatever the device sent (``Readable``).
    static func line(_ record: Record) -> String {
        var line = "\(record.sequence) \(record.instance ?? "-") v\(record.version) \(record.kind.rawValue)"
        if record.name != record.kind.rawValue { line += " \(record.name)" }
        if let dropped = record.dropped { line += " dropped=\(dropped)" }
        if !record.parameters.isEmpty {
            line += " " + record.parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        }
        line += " \(record.from) -> \(record.to) \(record.outcome.rawValue) [\(record.hooks.joined(separator: ", "))]"
        if let divergence = record.divergence {
            // What diverged, on the record's line: a grep for the record finds the reason too.
            line += " divergent"
            if let state = divergence.state { line += " believed=\(state.believed) actual=\(state.actual)" }
            if let hooks = divergence.hooks {
                if !hooks.missing.isEmpty { line += " missing=[\(hooks.missing.joined(separator: ", "))]" }
                if !hooks.extra.isEmpty { line += " extra=[\(hooks.extra.joined(separator: ", "))]" }
                if hooks.orderOnly { line += " hookOrder ran=[\(hooks.ran.joined(separator: ", "))]" }
            }
        }
        return Readable.escaped(line)
    }
}
