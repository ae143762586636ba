import Foundation
import LifecycleClient
import LifecycleKit

/// The commands that talk to a running service instead of being it (`post`, `action`,
/// `relaunch`, `create`, `flush`, `tail`, `check`), for shell scripts and QA rigs. Each is a
/// function from its arguments to an exit status; `main.swift` runs the one named.
enum ClientCommand: String, CaseIterable {
    case post, action, relaunch, create, flush, tail, check

    /// Exit statuses, the same for every command.
    enum Status {
        static let success: Int32 = 0
        /// Refused, not conforming, unreachable (and, for `flush`, items kept).
        static let failure: Int32 = 1
        /// A bad command line, as for the service's flags.
        static let usage: Int32 = 2
        /// `post`: the event was unexpected (recorded and printed all the same).
        static let unexpected: Int32 = 3
    }

    var usage: String {
        switch self {
        case .post: PostCommand.usage(.event)
        case .action: PostCommand.usage(.action)
        case .relaunch: PostCommand.usage(.relaunch)
        case .create: PostCommand.usage(.create)
        case .flush: FlushCommand.usage
        case .tail: TailCommand.usage
        case .check: CheckCommand.usage
        }
    }

    /// Runs the command; its exit status.
    func run(_ arguments: [String], environment: [String: String]) async -> Int32 {
        do {
            switch self {
            case .post: return try await PostCommand(.event, arguments, environment: environment).run()
            case .action: return try await PostCommand(.action, arguments, environment: environment).run()
            case .relaunch: return try await PostCommand(.relaunch, arguments, environment: environment).run()
            case .create: return try await PostCommand(.create, arguments, environment: environment).run()
            case .flush: return try await FlushCommand(arguments, environment: environment).run()
            case .tail: return try await TailCommand(arguments, environment: environment).run()
            case .check: return try await CheckCommand(arguments, environment: environment).run()
            }
        } catch let outcome as Arguments.ParseOutcome {
            switch outcome {
            case .helpRequested:
                Output.line(usage, terminator: "")
                return Status.success
            case .usage(let error):
                Output.error("lifecycled \(rawValue): \(error)")
                return Status.usage
            }
        } catch let error as UsageError {
            Output.error("lifecycled \(rawValue): \(error)")
            return Status.usage
        } catch {
            Output.error("lifecycled \(rawValue): \(Self.describe(error))")
            return Status.failure
        }
    }

    /// A client error in one line: a problem as the service worded it.
    static func describe(_ error: any Error) -> String {
        switch error as? LifecycleClientError {
        case .problem(let problem)?: return String(decoding: problem.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        case .unreachable(let reason)?: return "cannot reach the service: \(reason)"
        default: return String(describing: error)
        }
    }

    /// The client every command uses.
    static func client(_ options: ServerOptions, timeout: TimeInterval = 30) -> LifecycleClient {
        LifecycleClient(configuration: .init(server: options.server, token: options.token, timeout: timeout))
    }
}

/// Text a device sent, made safe to print on one line of a terminal: every control character
/// (C0, DEL, C1, U+2028 and U+2029, and the bidi controls that reorder what follows) is written
/// as an escape, `\n`, `\r` and `\t` as those, any other as `\u{1B}` (its hexadecimal code
/// point), and a backslash as `\\`, so an escape in the text cannot pass for one of these.
enum Readable {
    static func escaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case "\\": escaped += "\\\\"
            case _ where isControl(scalar): escaped += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Whether a terminal may act on `scalar` rather than show it.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        // Line and paragraph separators; ALM, LRM, RLM; embeddings, overrides and isolates.
        case 0x2028, 0x2029, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

/// Lines out: records and counts on standard output, reasons on standard error.
enum Output {
    /// Written at once, unbuffered: a script reading a pipe sees each line as it comes, `tail`'s above all.
    static func line(_ text: String, terminator: String = "\n") {
        FileHandle.standardOutput.write(Data((text + terminator).utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// A count and its noun, singular for one: "1 step", "2 steps", "3 entries" (`plural`
    /// where adding an "s" is not it).
    static func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
        "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
    }

    /// A record as the service writes it: members in the order of openapi.yaml's `Record`
    /// (Foundation's encoder keeps no order), times in UTC with milliseconds.
    static func json(_ record: Record) throws -> String {
        let members = try JSONDecoder().decode([String: JSONValue].self, from: try encoder.encode(record))
        let ordered = recordMembers.filter { members[$0] != nil } + members.keys.filter { !recordMembers.contains($0) }.sorted()
        return try object(ordered.map { ($0, members[$0]!) })
    }

    /// An instance as a create prints it: what it is and whether this command made it.
    static func json(_ instance: Instance, created: Bool) throws -> String {
        try object([
            ("id", instance.id), ("model", instance.model), ("state", instance.state), ("version", instance.version), ("created", created),
        ])
    }

    /// An instance's creation or deletion as the stream carries it (openapi `InstanceChange`).
    static func json(_ change: InstanceChange) throws -> String {
        try object([
            ("sequence", change.sequence), ("instance", change.instance), ("version", change.version), ("kind", change.kind),
            ("model", change.model), ("state", change.state), ("time", change.time),
        ])
    }

    /// One JSON object of `members` in the order given, each value as ``encoder`` writes it, on one line.
    private static func object(_ members: [(name: String, value: any Encodable)]) throws -> String {
        let pairs = try members.map { name, value in
            String(decoding: try encoder.encode(name), as: UTF8.self) + ":" + String(decoding: try encoder.encode(value), as: UTF8.self)
        }
        return escapingTerminalControls("{" + pairs.joined(separator: ",") + "}")
    }

    /// JSON whose strings hold no character a terminal acts on: the encoder escapes only what
    /// JSON requires (below U+0020), so C1 controls (U+0080–U+009F: U+009B is a CSI to some
    /// terminals), DEL, the line and paragraph separators and the bidi controls are written as
    /// `\uXXXX`, the same JSON value. Outside strings JSON has none of them.
    private static func escapingTerminalControls(_ json: String) -> String {
        var escaped = ""
        for scalar in json.unicodeScalars {
            if Readable.isControl(scalar) && scalar.value >= 0x7F {
                escaped += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16, uppercase: true)
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// openapi.yaml's order of a record's members.
    private static let recordMembers = [
        "sequence", "instance", "version", "kind", "event", "action", "parameters", "dropped", "from", "to", "outcome", "hooks", "row",
        "disposition", "replacedAction", "deliveredAction", "clearedAction", "incompleteLaunch", "windowChanged", "believedState", "ranHooks",
        "divergence", "time", "occurredAt",
    ]

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        // The service's form, UTC with milliseconds, to the millisecond it wrote: a time read
        // back is a binary fraction of a second just below or above it, which
        // ISO8601FormatStyle truncates (.313 printed .312); rounding gives the stored one back.
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(DeviceTime(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded()), offsetMinutes: 0).description)
        }
        return encoder
    }()
}
