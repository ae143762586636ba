import Foundation
import LifecycleStore
import MicroHTTP

/// Everything the service can be told, from flags and `LIFECYCLED_*` environment variables.
/// A flag wins over its variable; the variable wins over the default.
public struct Configuration: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    public var dataDirectory = "data"
    public var publicDirectory = "Public"
    public var modelsDirectory: String?
    public var logLevel = Logger.Level.info
    public var logFormat = Logger.Format.logfmt
    public var sync = SQLiteStore.SyncMode.normal
    public var historyLimit = 10_000
    public var maxBodySize = 64 * 1024
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    public var maxWALSize = SQLiteStore.defaultMaxWALSize
    public var acceptDataLoss = false
    /// Open connections in all; `nil`: the open-file limit less a reserve.
    public var maxConnections: Int?
    public var maxConnectionsPerClient = 256
    /// Seconds a whole request may take to arrive.
    public var requestTimeout = 30
    /// Caps the database at this many pages, as a full disk would; no flag sets it.
    public var maxDatabasePages: Int?
    /// Seconds an open stream may stay silent before it is sent a comment: under the 60 s
    /// idle limit of common proxies, and how soon a dead peer is noticed.
    public var heartbeat = 15.0
    /// Bytes of records a live stream may fall behind before it is closed with
    /// `event: overflow` (it resumes from the store). 256 KiB holds a whole group commit
    /// (512 records of about 0.4 KiB), so one batch landing at once never cuts off a
    /// subscriber that keeps pace; and since frames are shared with the ring, it is a
    /// bound on what a stuck subscriber can hold, not memory each one takes.
    public var streamBuffer = 256 * 1024
    /// Bytes of recent records kept in memory, so that a resume within them reads no SQLite.
    public var streamRing = 16 * 1024 * 1024
    /// Streams open at once; past it a stream is refused (503).
    public var maxSubscribers = 20_000
    /// Origins whose pages may call the API from a browser (CORS); none by default.
    public var corsOrigins: [String] = []

    public init() {}

    /// `*`, or an origin as a browser sends it: scheme and host, maybe a port, no path.
    static func isOrigin(_ text: String) -> Bool {
        if text == "*" { return true }
        guard let components = URLComponents(string: text), let scheme = components.scheme, ["http", "https"].contains(scheme),
              let host = components.host, !host.isEmpty, components.path.isEmpty, components.query == nil, components.fragment == nil,
              components.user == nil
        else { return false }
        return true
    }

    /// One row of the configuration table: flag, variable, what it sets.
    struct Option: Sendable {
        var flag: String
        var variable: String
        var placeholder: String
        var help: String
        /// A switch takes no value on the command line: given means "1" (its variable still takes 1 or 0).
        var isSwitch = false
        var apply: @Sendable (inout Configuration, String) -> Bool

        /// An option whose value is a whole number within `range`.
        static func integer(
            _ flag: String, _ variable: String, placeholder: String = "N", help: String, in range: ClosedRange<Int>,
            _ set: @escaping @Sendable (inout Configuration, Int) -> Void
        ) -> Option {
            Option(flag: flag, variable: variable, placeholder: placeholder, help: help) { c, v in
                guard let n = Int(v), range.contains(n) else { return false }
                set(&c, n)
                return true
            }
        }
    }

    static let options: [Option] = [
        Option(flag: "--host", variable: "LIFECYCLED_HOST", placeholder: "ADDRESS", help: "address to listen on (default 127.0.0.1; 0.0.0.0 for all)") { c, v in
            c.host = v
            return !v.isEmpty
        },
        Option(flag: "--port", variable: "LIFECYCLED_PORT", placeholder: "N", help: "TCP port (default 8080; 0 picks a free one)") { c, v in
            guard let port = UInt16(v) else { return false }
            c.port = port
            return true
        },
        Option(flag: "--data-dir", variable: "LIFECYCLED_DATA_DIR", placeholder: "PATH", help: "folder of the SQLite database (default data)") { c, v in
            c.dataDirectory = v
            return !v.isEmpty
        },
        Option(flag: "--public-dir", variable: "LIFECYCLED_PUBLIC_DIR", placeholder: "PATH", help: "folder of the dashboard's static files (default Public)") { c, v in
            c.publicDirectory = v
            return !v.isEmpty
        },
        Option(flag: "--models-dir", variable: "LIFECYCLED_MODELS_DIR", placeholder: "PATH", help: "folder of extra model files (*.json), validated at start") { c, v in
            c.modelsDirectory = v
            return !v.isEmpty
        },
        Option(flag: "--log-level", variable: "LIFECYCLED_LOG_LEVEL", placeholder: "LEVEL", help: "debug, info, warning or error (default info: a line per request and per notable event)") { c, v in
            guard let level = Logger.Level(name: v) else { return false }
            c.logLevel = level
            return true
        },
        Option(flag: "--log-format", variable: "LIFECYCLED_LOG_FORMAT", placeholder: "FORMAT", help: "logfmt (default) or json (one object per line, for log shippers)") { c, v in
            guard let format = Logger.Format(rawValue: v) else { return false }
            c.logFormat = format
            return true
        },
        Option(flag: "--sync", variable: "LIFECYCLED_SYNC", placeholder: "MODE", help: "normal (survives a crash; default) or full (survives power loss)") { c, v in
            guard let mode = SQLiteStore.SyncMode(rawValue: v) else { return false }
            c.sync = mode
            return true
        },
        .integer("--history-limit", "LIFECYCLED_HISTORY_LIMIT", help: "records kept per instance (default 10000)", in: 1...Int.max) { $0.historyLimit = $1 },
        .integer("--max-body", "LIFECYCLED_MAX_BODY", placeholder: "BYTES", help: "largest request body accepted (default 65536)", in: 1...Int.max) { $0.maxBodySize = $1 },
        .integer("--threads", "LIFECYCLED_THREADS", help: "HTTP worker threads (default: one per core)", in: 1...256) { $0.threads = $1 },
        .integer("--max-wal", "LIFECYCLED_MAX_WAL", placeholder: "BYTES", help: "bound on the SQLite WAL file under any write load (default 67108864 = 64 MiB; at least 1048576)", in: (1 << 20)...Int.max) { $0.maxWALSize = $1 },
        Option(
            flag: "--accept-data-loss", variable: "LIFECYCLED_ACCEPT_DATA_LOSS", placeholder: "",
            help: "start even though the database is missing, emptied or behind the marker of its last commit (logs the loss); a damaged database is still refused",
            isSwitch: true
        ) { c, v in
            guard let accept = ["1": true, "true": true, "0": false, "false": false][v] else { return false }
            c.acceptDataLoss = accept
            return true
        },
        .integer("--max-connections", "LIFECYCLED_MAX_CONNECTIONS", help: "open connections in all; more are refused at once (default: the open-file limit less 256)", in: 1...Int.max) { $0.maxConnections = $1 },
        .integer("--max-connections-per-client", "LIFECYCLED_MAX_CONNECTIONS_PER_CLIENT", help: "open connections from one client address; more are refused at once (default 256)", in: 1...Int.max) { $0.maxConnectionsPerClient = $1 },
        .integer("--request-timeout", "LIFECYCLED_REQUEST_TIMEOUT", placeholder: "SECONDS", help: "time for a whole request (headers and body) to arrive, from the connection being ready for it; also the idle time of a kept-alive connection (default 30)", in: 1...Int.max) { $0.requestTimeout = $1 },
        Option(
            flag: "--heartbeat", variable: "LIFECYCLED_HEARTBEAT", placeholder: "SECONDS",
            help: "seconds between comments on an idle stream (default 15; fractions allowed, at most 3600)"
        ) { c, v in
            guard let seconds = Double(v), seconds >= 0.001, seconds <= 3600 else { return false }
            c.heartbeat = seconds
            return true
        },
        .integer("--stream-buffer", "LIFECYCLED_STREAM_BUFFER", placeholder: "BYTES", help: "how far a live stream may fall behind before it is closed with event: overflow (default 262144 = 256 KiB; at least 4096)", in: 4096...Int.max) { $0.streamBuffer = $1 },
        .integer("--stream-ring", "LIFECYCLED_STREAM_RING", placeholder: "BYTES", help: "recent records kept in memory for resuming streams (default 16777216 = 16 MiB; at least 65536)", in: 65536...Int.max) { $0.streamRing = $1 },
        Option(flag: "--cors-origin", variable: "LIFECYCLED_CORS_ORIGIN", placeholder: "ORIGINS", help: "comma-separated origins (https://host[:port]) whose pages may call the API, or *; CORS is off without it") { c, v in
            let origins = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !origins.isEmpty, origins.allSatisfy(Self.isOrigin) else { return false }
            c.corsOrigins = origins
            return true
        },
        .integer("--max-subscribers", "LIFECYCLED_MAX_SUBSCRIBERS", help: "streams open at once; more are refused with 503 (default 20000)", in: 1...Int.max) { $0.maxSubscribers = $1 },
    ]

    /// What the stream hub is given.
    var streamSettings: StreamSettings {
        var settings = StreamSettings()
        settings.heartbeat = .milliseconds(Int64((heartbeat * 1000).rounded()))
        settings.subscriberBuffer = streamBuffer
        settings.ringBytes = streamRing
        settings.maxSubscribers = maxSubscribers
        return settings
    }

    /// Why the command line was refused.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case helpRequested
        case unknownFlag(String)
        case missingValue(String)
        case badValue(String, String)

        public var description: String {
            switch self {
            case .helpRequested: Configuration.usage
            case .unknownFlag(let f): "unknown option \(f); see --help"
            case .missingValue(let f): "option \(f) needs a value; see --help"
            case .badValue(let source, let v): "invalid value \"\(v)\" for \(source); see --help"
            }
        }
    }

    /// Reads the environment, then the flags (`--flag value` or `--flag=value`).
    public static func parse(arguments: [String], environment: [String: String]) throws(ParseError) -> Configuration {
        var configuration = Configuration()
        for option in options {
            if let value = environment[option.variable], !option.apply(&configuration, value) {
                throw .badValue(option.variable, value)
            }
        }
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "--help" || argument == "-h" { throw .helpRequested }
            var flag = argument
            var value: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            guard let option = options.first(where: { $0.flag == flag }) else { throw .unknownFlag(argument) }
            if value == nil { value = option.isSwitch ? "1" : remaining.popFirst() }
            guard let value else { throw .missingValue(flag) }
            guard option.apply(&configuration, value) else { throw .badValue(flag, value) }
        }
        return configuration
    }

    public static var usage: String {
        var text = """
        lifecycled: app-lifecycle state machines over HTTP

        usage: lifecycled [options]
               lifecycled healthcheck [options]   ask the service these options describe for
                                                  GET /healthz; exit 0 on 200, else 1 with the reason

        options (each also from its environment variable):

        """
        for option in options {
            let left = "  \(option.flag) \(option.placeholder)"
            text += "\(left.padding(toLength: max(26, left.count + 2), withPad: " ", startingAt: 0))\(option.help) [\(option.variable)]\n"
        }
        text += "  --help                  this text\n"
        return text
    }
}
