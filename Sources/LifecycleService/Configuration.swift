import Foundation
import LifecycleStore
import LifecycleLog
import LifecycleHTTP

/// Everything the service can be told, from flags and `LIFECYCLED_*` environment variables.
/// A flag wins over its variable; the variable wins over the default.
public struct Configuration: Sendable {
    /// The release this build is, as `--version` prints it: the one place it is written.
    public static let version = "0.1.0"

    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    public var dataDirectory = "data"
    /// The PostgreSQL that replicas share (a `postgres://` URI or a libpq connection string);
    /// `nil`: SQLite in ``dataDirectory``.
    public var databaseURL: String?
    /// A direct connection for `LISTEN`, when ``databaseURL`` goes through a pooler in
    /// transaction mode, which cannot carry one; `nil`: ``databaseURL``.
    public var databaseListenURL: String?
    /// Seconds a replica waits, idle, before asking whether others committed: the most a
    /// lost notification can delay their records (SQLite: nothing to ask).
    public var pollInterval = 1.0
    /// Seconds a write transaction (or connecting, or opening the store) may wait on
    /// PostgreSQL before it is answered 503: a server that holds its connections but does not
    /// answer must not hold writes, nor `/healthz`'s 200.
    public var databaseTimeout = 5.0
    /// Seconds a read may wait on PostgreSQL: reads are answered on the HTTP threads, which a
    /// server that does not answer must not hold.
    public var databaseReadTimeout = 1.0
    /// The dashboard's folder; `nil` to look for it (see ``Service/dashboardCandidates(executable:workingDirectory:)``).
    public var publicDirectory: String?
    public var modelsDirectory: String?
    public var logLevel = LineLogger.Level.info
    public var logFormat = LineLogger.Format.logfmt
    public var sync = SQLiteStore.SyncMode.normal
    public var historyLimit = 10_000
    public var maxBodySize = 64 * 1024
    /// The largest body of `POST /v1/batch`, whose 1,000 items need more than `maxBodySize`.
    public var maxBatchBodySize = 2 * 1024 * 1024
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    public var maxWALSize = SQLiteStore.defaultMaxWALSize
    public var acceptDataLoss = false
    /// Open connections in all; `nil`: the open-file limit less a reserve.
    public var maxConnections: Int?
    /// Open connections from one client address, and streams open for one client.
    public var maxConnectionsPerClient = 256
    /// Reverse proxies whose `X-Forwarded-For` names the client; none by default.
    public var trustedProxies = TrustedProxies()
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
    /// Bytes of records one history page or one replay step of a stream holds at most, and of
    /// instances one instance list page (a single bigger one still goes alone): the most a
    /// client that does not read pins per connection. A page that stops early says where to
    /// continue, as any page does.
    public var pageBytes = PageLimit.defaultBytes
    /// Streams open at once; past it a stream is refused (503).
    public var maxSubscribers = 20_000
    /// Instances there may be at once; a create past it is refused (507). Every instance is
    /// kept in memory, so the default keeps a runaway client from exhausting it.
    public var maxInstances = 1_000_000
    /// Origins whose pages may call the API from a browser (CORS); none by default.
    public var corsOrigins: [String] = []
    /// Names (lowercased, no port) requests may call the service by in `Host`, besides IP
    /// addresses and `localhost`; `*`: any. See ``allowedHostNames``.
    public var allowedHosts: [String] = []
    /// The bearer token writes need (and, with ``protectReads``, reads); `nil`: none, unless
    /// ``tokenFile`` names one.
    public var token: String?
    /// A file holding the token, read at start (for secrets mounted as files).
    public var tokenFile: String?
    /// The token guards reads, streams and static files too; the health check stays open.
    public var protectReads = false
    /// Requests per second per client address; `nil`: ``defaultRateLimit`` for clients beyond
    /// loopback and none for loopback ones; 0: no limit.
    public var rateLimit: Double?
    /// Requests a client may send at once before the rate applies; `nil`: twice the rate.
    public var rateBurst: Int?
    /// `GET /metrics` and the request counters behind it.
    public var metrics = true
    /// States plus rows of the largest model `graph.svg` draws; a larger one is 422.
    public var graphMaxSize = ModelGraphs.Limits().maxElements
    /// Seconds a `graph.svg` request waits for its drawing before it is answered 503.
    public var graphWait = ModelGraphs.Limits().wait

    /// The rate clients beyond loopback get when none is set: far above what an app or a
    /// test rig posting lifecycle events sends, low enough that one runaway client cannot
    /// take the whole server.
    static let defaultRateLimit = 100.0
    /// The slowest rate `--rate-limit` takes (other than 0): one request per 1,000 s.
    static let minimumRateLimit = 0.001

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

    /// A name `--allowed-host` takes: a host name as `Host` carries it, without a port.
    static func isHostName(_ text: String) -> Bool {
        guard let host = HostName(text) else { return false }
        return !host.name.isEmpty && !text.contains(":") && !host.isAddress
    }

    /// The names ``AllowedHosts`` holds `Host` to, or `nil` for any name: bound to loopback,
    /// only ``allowedHosts`` (a page of another site could otherwise reach the service by
    /// rebinding its name to 127.0.0.1); bound beyond it, any unless names are given.
    var allowedHostNames: Set<String>? {
        guard !allowedHosts.contains("*"), !allowedHosts.isEmpty || isLoopback(host) else { return nil }
        return Set(allowedHosts)
    }

    /// One row of the configuration table: flag, variable, what it sets.
    struct Option: Sendable {
        var flag: String
        var variable: String
        var placeholder: String
        var help: String
        /// A switch takes no value on the command line: given means "1" (its variable still takes 1 or 0).
        var isSwitch = false
        /// A secret: a refused value is not repeated in the error.
        var isSecret = false
        var apply: @Sendable (inout Configuration, String) -> Bool

        /// An option whose value is a whole number within `range`.
        static func integer(
            _ flag: String, _ variable: String, placeholder: String = "N", help: String, in range: ClosedRange<Int>,
            _ set: @escaping @Sendable (inout Configuration, Int) -> Void
        ) -> Option {
            number(flag, variable, placeholder: placeholder, help: help, in: range, set)
        }

        /// An option whose value is a number, fractions allowed, within `range`.
        static func decimal(
            _ flag: String, _ variable: String, placeholder: String = "N", help: String, in range: ClosedRange<Double>,
            _ set: @escaping @Sendable (inout Configuration, Double) -> Void
        ) -> Option {
            number(flag, variable, placeholder: placeholder, help: help, in: range, set)
        }

        private static func number<T: LosslessStringConvertible & Comparable & Sendable>(
            _ flag: String, _ variable: String, placeholder: String, help: String, in range: ClosedRange<T>,
            _ set: @escaping @Sendable (inout Configuration, T) -> Void
        ) -> Option {
            Option(flag: flag, variable: variable, placeholder: placeholder, help: help) { c, v in
                guard let n = T(v), range.contains(n) else { return false }
                set(&c, n)
                return true
            }
        }

        /// A switch: given, or its variable 1 or true, sets it; its variable 0 or false clears it.
        static func toggle(_ flag: String, _ variable: String, help: String, _ set: @escaping @Sendable (inout Configuration, Bool) -> Void) -> Option {
            Option(flag: flag, variable: variable, placeholder: "", help: help, isSwitch: true) { c, v in
                guard let on = ["1": true, "true": true, "0": false, "false": false][v] else { return false }
                set(&c, on)
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
        Option(
            flag: "--database-url", variable: "LIFECYCLED_DATABASE_URL", placeholder: "URL",
            help: "PostgreSQL to store in, shared by any number of replicas (postgres://user:password@host/db or a libpq connection string); without it SQLite in --data-dir",
            isSecret: true
        ) { c, v in
            c.databaseURL = v
            return !v.isEmpty
        },
        Option(
            flag: "--database-listen-url", variable: "LIFECYCLED_DATABASE_LISTEN_URL", placeholder: "URL",
            help: "a direct connection to PostgreSQL for LISTEN when --database-url goes through PgBouncer in transaction mode (default: --database-url)",
            isSecret: true
        ) { c, v in
            c.databaseListenURL = v
            return !v.isEmpty
        },
        .decimal(
            "--poll-interval", "LIFECYCLED_POLL_INTERVAL", placeholder: "SECONDS",
            help: "with PostgreSQL: seconds an idle replica waits for a notification before asking for other replicas' commits (default 1; fractions allowed)",
            in: 0.01...60
        ) { $0.pollInterval = $1 },
        .decimal(
            "--database-timeout", "LIFECYCLED_DATABASE_TIMEOUT", placeholder: "SECONDS",
            help: "with PostgreSQL: seconds a write (connecting, every statement and the commit) may wait on the database before it is answered 503 and /healthz says so (default 5; fractions allowed)",
            in: 0.1...3600
        ) { $0.databaseTimeout = $1 },
        .decimal(
            "--database-read-timeout", "LIFECYCLED_DATABASE_READ_TIMEOUT", placeholder: "SECONDS",
            help: "with PostgreSQL: seconds a read the cache cannot answer (an unknown id, a history page, a stream's replay) may wait on the database before it is answered 503 (default 1; fractions allowed)",
            in: 0.05...3600
        ) { $0.databaseReadTimeout = $1 },
        Option(flag: "--public-dir", variable: "LIFECYCLED_PUBLIC_DIR", placeholder: "PATH", help: "folder of the dashboard's static files (default: the first of <binary's folder>/../share/lifecycled/Public, <binary's folder>/Public and ./Public that holds index.html)") { c, v in
            c.publicDirectory = v
            return !v.isEmpty
        },
        Option(flag: "--models-dir", variable: "LIFECYCLED_MODELS_DIR", placeholder: "PATH", help: "folder of extra model files (*.json), validated at start") { c, v in
            c.modelsDirectory = v
            return !v.isEmpty
        },
        Option(flag: "--log-level", variable: "LIFECYCLED_LOG_LEVEL", placeholder: "LEVEL", help: "debug, info, warning or error (default info: a line per request and per notable event)") { c, v in
            guard let level = LineLogger.Level(name: v) else { return false }
            c.logLevel = level
            return true
        },
        Option(flag: "--log-format", variable: "LIFECYCLED_LOG_FORMAT", placeholder: "FORMAT", help: "logfmt (default) or json (one object per line, for log shippers)") { c, v in
            guard let format = LineLogger.Format(rawValue: v) else { return false }
            c.logFormat = format
            return true
        },
        Option(flag: "--sync", variable: "LIFECYCLED_SYNC", placeholder: "MODE", help: "normal (survives a crash; default) or full (survives power loss)") { c, v in
            guard let mode = SQLiteStore.SyncMode(rawValue: v) else { return false }
            c.sync = mode
            return true
        },
        .integer("--history-limit", "LIFECYCLED_HISTORY_LIMIT", help: "records kept per instance, at least (default 10000)", in: 1...Int.max) { $0.historyLimit = $1 },
        .integer("--max-body", "LIFECYCLED_MAX_BODY", placeholder: "BYTES", help: "largest request body accepted (default 65536)", in: 1...Int.max) { $0.maxBodySize = $1 },
        .integer("--max-batch-body", "LIFECYCLED_MAX_BATCH_BODY", placeholder: "BYTES", help: "largest POST /v1/batch body accepted (default 2097152 = 2 MiB)", in: 1...Int.max) { $0.maxBatchBodySize = $1 },
        .integer("--threads", "LIFECYCLED_THREADS", help: "HTTP worker threads (default: one per core)", in: 1...256) { $0.threads = $1 },
        .integer("--max-wal", "LIFECYCLED_MAX_WAL", placeholder: "BYTES", help: "bound on the SQLite WAL file under any write load (default 67108864 = 64 MiB; at least 1048576)", in: (1 << 20)...Int.max) { $0.maxWALSize = $1 },
        .toggle(
            "--accept-data-loss", "LIFECYCLED_ACCEPT_DATA_LOSS",
            help: "start even though the database is missing, emptied or behind the marker of its last commit (logs the loss); damage is still reported"
        ) { $0.acceptDataLoss = $1 },
        .integer("--max-connections", "LIFECYCLED_MAX_CONNECTIONS", help: "open connections in all; more are refused at once (default: the open-file limit less 256)", in: 1...Int.max) { $0.maxConnections = $1 },
        .integer(
            "--max-connections-per-client", "LIFECYCLED_MAX_CONNECTIONS_PER_CLIENT",
            help: "open connections from one client address, more are refused at once; also streams open for one client, more get 429 (default 256)", in: 1...Int.max
        ) { $0.maxConnectionsPerClient = $1 },
        Option(
            flag: "--trusted-proxy", variable: "LIFECYCLED_TRUSTED_PROXY", placeholder: "ADDRESSES",
            help: "comma-separated addresses or ranges (10.0.0.0/8) of reverse proxies: for their requests the client is the last untrusted address of X-Forwarded-For, and their connections are not limited per address; none by default"
        ) { c, v in
            let entries = v.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let proxies = TrustedProxies(entries) else { return false }
            c.trustedProxies = proxies
            return true
        },
        .integer("--request-timeout", "LIFECYCLED_REQUEST_TIMEOUT", placeholder: "SECONDS", help: "time for a whole request (headers and body) to arrive, from the connection being ready for it; also the idle time of a kept-alive connection (default 30; at most 86400)", in: 1...86_400) { $0.requestTimeout = $1 },
        .decimal(
            "--heartbeat", "LIFECYCLED_HEARTBEAT", placeholder: "SECONDS",
            help: "seconds between comments on an idle stream (default 15; fractions allowed, at most 3600)", in: 0.001...3600
        ) { $0.heartbeat = $1 },
        .integer("--stream-buffer", "LIFECYCLED_STREAM_BUFFER", placeholder: "BYTES", help: "how far a live stream may fall behind before it is closed with event: overflow (default 262144 = 256 KiB; at least 4096)", in: 4096...Int.max) { $0.streamBuffer = $1 },
        .integer("--stream-ring", "LIFECYCLED_STREAM_RING", placeholder: "BYTES", help: "recent records kept in memory for resuming streams (default 16777216 = 16 MiB; at least 65536)", in: 65536...Int.max) { $0.streamRing = $1 },
        .integer(
            "--page-bytes", "LIFECYCLED_PAGE_BYTES", placeholder: "BYTES",
            help: "bytes of records a history page or a stream's replay step holds at most, and of instances an instance list page; a page that stops early gives nextAfter or nextCursor (default 4194304 = 4 MiB; at least 65536)",
            in: 65536...Int.max
        ) { $0.pageBytes = $1 },
        Option(flag: "--cors-origin", variable: "LIFECYCLED_CORS_ORIGIN", placeholder: "ORIGINS", help: "comma-separated origins (https://host[:port]) whose pages may call the API, or *; CORS is off without it") { c, v in
            let origins = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !origins.isEmpty, origins.allSatisfy(Self.isOrigin) else { return false }
            c.corsOrigins = origins
            return true
        },
        Option(
            flag: "--allowed-host", variable: "LIFECYCLED_ALLOWED_HOSTS", placeholder: "NAMES",
            help: "comma-separated host names (or *) requests may call the service by in Host, besides IP addresses and localhost; others get 421 (default: only those on a loopback --host, any otherwise)"
        ) { c, v in
            let names = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !names.isEmpty, names.allSatisfy({ $0 == "*" || isHostName($0) }) else { return false }
            c.allowedHosts = names.map { $0.hasSuffix(".") ? String($0.dropLast()) : $0 }
            return true
        },
        .integer("--max-instances", "LIFECYCLED_MAX_INSTANCES", help: "instances at once; creates past it are refused with 507 (default 1000000)", in: 1...Int.max) { $0.maxInstances = $1 },
        .integer("--max-subscribers", "LIFECYCLED_MAX_SUBSCRIBERS", help: "streams open at once; more are refused with 503 (default 20000)", in: 1...Int.max) { $0.maxSubscribers = $1 },
        Option(
            flag: "--token", variable: "LIFECYCLED_TOKEN", placeholder: "TOKEN",
            help: "every write must send Authorization: Bearer TOKEN (visible ASCII, no spaces); prefer the variable or --token-file, as flags show in ps",
            isSecret: true
        ) { c, v in
            c.token = v
            return isValidToken(v)
        },
        Option(
            flag: "--token-file", variable: "LIFECYCLED_TOKEN_FILE", placeholder: "PATH",
            help: "read the token from this file at start (a trailing newline is ignored), for secrets mounted as files"
        ) { c, v in
            c.tokenFile = v
            return !v.isEmpty
        },
        .toggle(
            "--protect-reads", "LIFECYCLED_PROTECT_READS",
            help: "the token is needed for reads, streams and /metrics too; /healthz and the dashboard's files stay open"
        ) { $0.protectReads = $1 },
        Option(
            flag: "--rate-limit", variable: "LIFECYCLED_RATE_LIMIT", placeholder: "N",
            help: "requests per second per client address, answered 429 beyond it (\(minimumRateLimit) to 1000000, fractions allowed; 0: no limit; default: 100 for clients beyond loopback, none for loopback; when set, it applies to loopback too)"
        ) { c, v in
            // A slower rate would tell a client to retry after more than a quarter of an hour.
            guard let rate = Double(v), rate == 0 || (minimumRateLimit...1_000_000).contains(rate) else { return false }
            c.rateLimit = rate
            return true
        },
        .integer("--rate-burst", "LIFECYCLED_RATE_BURST", help: "requests a client may send at once before --rate-limit applies (default: twice the rate)", in: 1...1_000_000) { $0.rateBurst = $1 },
        .integer(
            "--graph-max-size", "LIFECYCLED_GRAPH_MAX_SIZE",
            help: "states plus rows of the largest model whose graph.svg is drawn; a larger one is answered 422 (default 150: Graphviz's layout time grows far faster than the graph)",
            in: 1...10_000
        ) { $0.graphMaxSize = $1 },
        .decimal(
            "--graph-wait", "LIFECYCLED_GRAPH_WAIT", placeholder: "SECONDS",
            help: "seconds a graph.svg request waits for its drawing, which runs on a thread of its own, before it is answered 503 with Retry-After (default 2; fractions allowed)",
            in: 0.01...60
        ) { $0.graphWait = $1 },
        Option(
            flag: "--metrics", variable: "LIFECYCLED_METRICS", placeholder: "on|off",
            help: "on (default): GET /metrics in Prometheus's text format, and the request counters behind it; off: neither (GET /metrics is 404)"
        ) { c, v in
            guard let on = ["on": true, "off": false][v] else { return false }
            c.metrics = on
            return true
        },
    ]

    /// A token is what a header can carry as it is: visible ASCII without spaces.
    static func isValidToken(_ token: String) -> Bool {
        (1...4096).contains(token.utf8.count) && token.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
    }

    /// The token, from ``token`` or read from ``tokenFile``; `nil` when neither is set.
    /// A file that cannot be read, is empty or holds more than a token refuses the start:
    /// a service meant to be guarded must not come up open.
    func resolvedToken() throws(StartError) -> String? {
        if let token { return token }
        guard let path = tokenFile else { return nil }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw StartError(description: "cannot read the token file \(path): \((error as NSError).localizedFailureReason ?? error.localizedDescription)")
        }
        // The newline an editor or `echo` adds (LF or CRLF) is not part of the token.
        var bytes = data[...]
        if bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        let text = String(decoding: bytes, as: UTF8.self)
        guard !text.isEmpty else { throw StartError(description: "the token file \(path) is empty") }
        guard Self.isValidToken(text) else {
            throw StartError(description: "the token file \(path) must hold one token of visible ASCII characters without spaces (and at most one trailing newline); its content is not shown")
        }
        return text
    }

    /// The rate limit to apply, or `nil` for none (see ``rateLimit``).
    var rateLimitPolicy: RateLimitPolicy? {
        let rate = rateLimit ?? Self.defaultRateLimit
        guard rate > 0 else { return nil }
        return RateLimitPolicy(rate: rate, burst: rateBurst ?? max(1, Int((rate * 2).rounded(.up))), exemptsLoopback: rateLimit == nil)
    }

    /// What the stream hub is given.
    var streamSettings: StreamSettings {
        var settings = StreamSettings()
        settings.heartbeat = .milliseconds(Int64((heartbeat * 1000).rounded()))
        settings.subscriberBuffer = streamBuffer
        settings.ringBytes = streamRing
        settings.pageBytes = pageBytes
        settings.maxSubscribers = maxSubscribers
        settings.maxSubscribersPerClient = maxConnectionsPerClient
        return settings
    }

    /// Why the command line was refused.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case helpRequested
        case versionRequested
        case unknownFlag(String)
        case missingValue(String)
        case badValue(String, String)
        /// A refused secret, which is not repeated.
        case badSecret(String)
        /// Options that cannot go together, and why.
        case conflict(String)

        public var description: String {
            switch self {
            case .helpRequested: Configuration.usage
            case .versionRequested: "lifecycled \(Configuration.version)"
            case .unknownFlag(let f): "unknown option \(f); see --help"
            case .missingValue(let f): "option \(f) needs a value; see --help"
            case .badValue(let source, let v): "invalid value \"\(v)\" for \(source); see --help"
            case .badSecret(let source): "invalid value for \(source) (not shown): a token is 1 to 4096 visible ASCII characters without spaces"
            case .conflict(let why): "\(why); see --help"
            }
        }
    }

    /// Reads the environment, then the flags (`--flag value` or `--flag=value`).
    public static func parse(arguments: [String], environment: [String: String]) throws(ParseError) -> Configuration {
        var configuration = Configuration()
        for option in options {
            if let value = environment[option.variable], !option.apply(&configuration, value) {
                throw option.isSecret ? .badSecret(option.variable) : .badValue(option.variable, value)
            }
        }
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "--help" || argument == "-h" { throw .helpRequested }
            if argument == "--version" { throw .versionRequested }
            var flag = argument
            var value: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            guard let option = options.first(where: { $0.flag == flag }) else { throw .unknownFlag(argument) }
            if value == nil { value = option.isSwitch ? "1" : remaining.popFirst() }
            guard let value else { throw .missingValue(flag) }
            guard option.apply(&configuration, value) else { throw option.isSecret ? .badSecret(flag) : .badValue(flag, value) }
        }
        if configuration.token != nil, configuration.tokenFile != nil {
            throw .conflict("give the token once: --token (LIFECYCLED_TOKEN) or --token-file (LIFECYCLED_TOKEN_FILE), not both")
        }
        if configuration.protectReads, configuration.token == nil, configuration.tokenFile == nil {
            throw .conflict("--protect-reads needs a token (--token or --token-file)")
        }
        return configuration
    }

    public static var usage: String {
        var text = """
        lifecycled: app-lifecycle state machines over HTTP

        usage: lifecycled [options]
               lifecycled healthcheck [options]   ask the service these options describe for
                                                  GET /healthz; exit 0 on 200, else 1 with the reason
               lifecycled post [options] INSTANCE EVENT [NAME=VALUE ...]
                                                  send an event, print its record (3: unexpected)
               lifecycled action [options] INSTANCE ACTION [NAME=VALUE ...]
                                                  perform an action, print its record
               lifecycled relaunch [options] INSTANCE
                                                  record a new process, print its record
               lifecycled create [options] INSTANCE [MODEL]
                                                  create an instance if absent
               lifecycled flush --queue DIR       deliver what `post --queue DIR` (…) left queued
               lifecycled tail [options]          print records as they are committed
               lifecycled check [options] --instance ID | --label KEY=VALUE | MODEL FILE
                                                  check histories or a trace (1: problems; --junit)
               (the commands talk to a service at --server; each has its own --help)

        options (each also from its environment variable):

        """
        func line(_ left: String, _ help: String) -> String {
            "\(left.padding(toLength: max(26, left.count + 2), withPad: " ", startingAt: 0))\(help)\n"
        }
        for option in options {
            text += line("  \(option.flag) \(option.placeholder)", "\(option.help) [\(option.variable)]")
        }
        text += line("  --version", "print the version (lifecycled \(version)) and exit")
        text += line("  --help", "this text")
        return text
    }
}
