import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a server listens and what it accepts.
public struct ServerConfiguration: Sendable {
    /// The IPv4 or IPv6 address to listen on (`127.0.0.1`, `::`); not a name, so nothing is resolved at start.
    public var host: String
    /// 0 picks a free port; read the chosen one from ``HTTPServer/port``.
    public var port: UInt16
    /// Threads of libmicrohttpd's internal epoll pool.
    public var threads: Int
    /// Bodies past this many bytes are refused with 413 without reading the rest.
    public var maxBodySize: Int
    /// Paths whose bodies have a limit of their own in place of `maxBodySize` (exact paths, no query).
    public var maxBodySizeByPath: [String: Int]
    /// Seconds without progress before libmicrohttpd closes a connection: the longest a
    /// response may wait for a client that does not read it. (An idle kept-alive connection
    /// is closed after `requestTimeout` when that is shorter: its next request is late.)
    public var connectionTimeout: Int
    /// Seconds a whole request (headers and body) may take to arrive, counted from the
    /// moment the connection is ready for it (accepted, or the previous response sent).
    /// A request that has fully arrived is never cut, however long its answer takes.
    public var requestTimeout: Int
    /// Open connections in all; `nil` sizes it from the open-file limit (see ``HTTPServer/maxConnections``).
    public var maxConnections: Int?
    /// Open connections from one client address; trusted proxies' are not limited.
    public var maxConnectionsPerClient: Int
    /// Whose `X-Forwarded-For` names the client (see ``TrustedProxies``).
    public var trustedProxies: TrustedProxies
    /// Longest request target (path and query) accepted; longer gets 414.
    public var maxTargetSize: Int
    /// Largest request line and header fields accepted; larger gets 431.
    public var maxHeaderSize: Int

    /// Each setting as described on its property; `threads` is raised to 1 if below.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 8080, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxBodySize: Int = 64 * 1024, connectionTimeout: Int = 60, requestTimeout: Int = 30,
        maxConnections: Int? = nil, maxConnectionsPerClient: Int = 256, trustedProxies: TrustedProxies = TrustedProxies(),
        maxTargetSize: Int = 8 * 1024, maxHeaderSize: Int = 16 * 1024, maxBodySizeByPath: [String: Int] = [:]
    ) {
        self.maxBodySizeByPath = maxBodySizeByPath
        self.host = host
        self.port = port
        self.threads = max(1, threads)
        self.maxBodySize = maxBodySize
        self.connectionTimeout = connectionTimeout
        self.requestTimeout = requestTimeout
        self.maxConnections = maxConnections
        self.maxConnectionsPerClient = maxConnectionsPerClient
        self.trustedProxies = trustedProxies
        self.maxTargetSize = maxTargetSize
        self.maxHeaderSize = maxHeaderSize
    }

    /// Bytes of libmicrohttpd's memory pool per connection, from the header limit: the pool
    /// holds a request's head in full (its fields are parsed in place and stay until the
    /// answer), a 64-byte record per field (room for 64) and per query argument, then the
    /// response's head (bodies are copied out by the access handler, and answers sent from
    /// their own memory). libmicrohttpd 0.9.75 zeroes the whole pool after every request of a
    /// kept-alive connection, and half of it again as the read buffer shrinks, so its
    /// default of 32 KiB costs a GET more than the rest of libmicrohttpd's work; too small, and
    /// a head within the limit is refused (431) by libmicrohttpd itself.
    public var connectionMemory: Int {
        let fields = 64 * 64, responseHead = 2 * 1024
        return (maxHeaderSize + fields + responseHead + 1023) / 1024 * 1024
    }

    /// Descriptors kept free of connections when the total is sized from the open-file
    /// limit: the database and its journal, files being served, epoll and signalling
    /// descriptors of each thread, standard streams.
    public static let reservedDescriptors = 256
}

/// Why a server could not start.
public enum ServerError: Error, Sendable, CustomStringConvertible {
    case badHost(String)
    case addressInUse(host: String, port: UInt16)
    case socket(operation: String, code: Int32)
    case startFailed

    /// The reason as `lifecycled` prints it before exiting 1.
    public var description: String {
        switch self {
        case .badHost(let host): "cannot listen on \"\(host)\": not an IPv4 or IPv6 address"
        case .addressInUse(let host, let port): "cannot listen on \(host):\(port): address already in use"
        case .socket(let operation, let code): "cannot listen: \(operation) failed: \(String(cString: strerror(code)))"
        case .startFailed: "libmicrohttpd could not start the daemon"
        }
    }
}
