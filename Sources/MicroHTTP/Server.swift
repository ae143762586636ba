import CMicroHTTPD
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a server listens and what it accepts.
public struct ServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; read the chosen one from ``HTTPServer/port``.
    public var port: UInt16
    /// Threads of libmicrohttpd's internal epoll pool.
    public var threads: Int
    /// Bodies past this many bytes are refused with 413 without reading the rest.
    public var maxBodySize: Int
    /// Idle seconds before a keep-alive connection is closed.
    public var connectionTimeout: Int

    public init(
        host: String = "127.0.0.1", port: UInt16 = 8080, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxBodySize: Int = 64 * 1024, connectionTimeout: Int = 60
    ) {
        self.host = host
        self.port = port
        self.threads = max(1, threads)
        self.maxBodySize = maxBodySize
        self.connectionTimeout = connectionTimeout
    }
}

/// Why a server could not start.
public enum ServerError: Error, Sendable, CustomStringConvertible {
    case badHost(String)
    case addressInUse(host: String, port: UInt16)
    case socket(operation: String, code: Int32)
    case startFailed

    public var description: String {
        switch self {
        case .badHost(let host): "cannot listen on \"\(host)\": not an IPv4 or IPv6 address"
        case .addressInUse(let host, let port): "cannot listen on \(host):\(port): address already in use"
        case .socket(let operation, let code): "cannot listen: \(operation) failed: \(String(cString: strerror(code)))"
        case .startFailed: "libmicrohttpd could not start the daemon"
        }
    }
}

/// An HTTP server on libmicrohttpd's internal epoll thread pool.
///
/// This file and its siblings are the only Swift that touches libmicrohttpd; the
/// daemon pointer is owned here and stopped in `stop()` or `deinit`.
public final class HTTPServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    /// The port actually bound (useful when configured with 0).
    public private(set) var port: UInt16 = 0
    let handler: @Sendable (Request) -> Reply
    let logger: Logger
    private var daemon: OpaquePointer?
    private let lock = NSLock()
    /// Requests accepted and not yet completed, counted from the first call of the access
    /// handler to libmicrohttpd's completion callback. `stop()` waits for them, so no
    /// connection is still suspended (which libmicrohttpd forbids) when the daemon stops.
    private let requests = NSCondition()
    private var requestsInFlight = 0
    /// Set by `stop()`: requests that arrive after it are refused, so the drain ends.
    private var isStopping = false

    public init(configuration: ServerConfiguration, logger: Logger = Logger(), handler: @escaping @Sendable (Request) -> Reply) {
        self.configuration = configuration
        self.logger = logger
        self.handler = handler
    }

    deinit { stop() }

    /// Binds and starts serving; returns once the daemon's threads are running.
    public func start() throws(ServerError) {
        let socket = try ListeningSocket(host: configuration.host, port: configuration.port)
        let flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: .LISTEN_SOCKET, value: Int(socket.descriptor), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: configuration.connectionTimeout, ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: 10_000, ptr_value: nil),
        ]
        if configuration.threads > 1 {
            options.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: configuration.threads, ptr_value: nil))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))

        let context = Unmanaged.passUnretained(self).toOpaque()
        let started = options.withUnsafeBufferPointer { items in
            lc_mhd_start(UInt32(flags), accessHandler, context, completedHandler, context, items.baseAddress)
        }
        guard let started else {
            close(socket.descriptor)
            throw .startFailed
        }
        lock.withLock { daemon = started }
        port = socket.port
    }

    /// Stops accepting connections and requests, lets requests in flight finish (up to
    /// `drainSeconds`), then stops the daemon's threads.
    public func stop(drainSeconds: Double = 10) {
        let running = lock.withLock { () -> OpaquePointer? in
            defer { daemon = nil }
            return daemon
        }
        guard let running else { return }
        requests.withLock { isStopping = true }
        let listening = MHD_quiesce_daemon(running)
        if listening >= 0 { close(listening) }
        let deadline = Date().addingTimeInterval(drainSeconds)
        requests.lock()
        while requestsInFlight > 0, requests.wait(until: deadline) {}
        let abandoned = requestsInFlight
        requests.unlock()
        if abandoned > 0 { logger.error("stopping with requests unfinished", ["count": String(abandoned)]) }
        MHD_stop_daemon(running)
    }

    /// Called by libmicrohttpd once per request, several times: first with headers only,
    /// then once per body chunk, then with no data, when the response is queued.
    fileprivate func handle(
        _ connection: OpaquePointer, url: String, method: String, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let existing = context.pointee else {
            let pending = PendingRequest(method: method, path: url, connection: connection, isTimed: logger.isLogging(.debug))
            context.pointee = Unmanaged.passRetained(pending).toOpaque()
            pending.isCounted = requests.withLock {
                if !isStopping { requestsInFlight += 1 }
                return !isStopping
            }
            if !pending.isCounted {
                // Answered at once (so without keep-alive): the server is going away.
                let problem = Problem(status: 503, title: "Service Unavailable", detail: "the server is stopping; nothing was changed")
                return queue(Response.problem(problem, headers: [("Connection", "close")]), on: connection, for: pending)
            }
            if let length = pending.headers.first(where: { $0.name == "content-length" }).flatMap({ Int($0.value) }),
               length > configuration.maxBodySize {
                // The one response queued on the first call: libmicrohttpd accepts a response
                // only before the body starts or after it ends, and this body is never read, so
                // the connection closes after the 413 anyway.
                pending.isTooLarge = true
                return queue(tooLarge(), on: connection, for: pending)
            }
            // Otherwise wait: a response queued now would force `Connection: close`.
            return .YES
        }
        let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()
        if pending.isAnswered {
            uploadSize.pointee = 0
            return .YES
        }
        if let deferred = pending.takeDeferredResponse() {
            // Called again after a deferred reply resumed the connection.
            return queue(deferred, on: connection, for: pending)
        }
        let size = uploadSize.pointee
        if size > 0 {
            // A body without Content-Length (chunked) that outgrows the limit is drained
            // without being kept, then answered with 413 below.
            if pending.body.count + size > configuration.maxBodySize { pending.isTooLarge = true }
            if !pending.isTooLarge, let upload {
                pending.body.append(contentsOf: UnsafeRawBufferPointer(start: upload, count: size))
            }
            uploadSize.pointee = 0
            return .YES
        }
        if pending.isTooLarge {
            pending.body = []
            return queue(tooLarge(), on: connection, for: pending)
        }
        let request = Request(method: pending.method, path: pending.path, headers: pending.headers, query: pending.query, body: pending.body)
        switch handler(request) {
        case .now(let response):
            return queue(response, on: connection, for: pending)
        case .later(let start):
            // Suspend before starting the work, so its reply can never arrive first.
            MHD_suspend_connection(connection)
            let suspended = SuspendedConnection(connection)
            start { response in
                pending.setDeferredResponse(response)
                MHD_resume_connection(suspended.pointer)
            }
            return .YES
        }
    }

    /// Called from the completion callback for every counted request.
    fileprivate func requestEnded() {
        requests.withLock { requestsInFlight -= 1 }
        requests.broadcast()
    }

    private func tooLarge() -> Response {
        .problem(Problem(
            status: 413, title: "Content Too Large",
            detail: "request body is larger than the limit of \(configuration.maxBodySize) bytes"
        ))
    }

    private func queue(_ response: Response, on connection: OpaquePointer, for pending: PendingRequest) -> MHD_Result {
        pending.isAnswered = true
        let created = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        for (name, value) in response.headers {
            _ = MHD_add_response_header(created, name, value)
        }
        if logger.isLogging(.debug) {
            let micros = (DispatchTime.now().uptimeNanoseconds - pending.started) / 1000
            logger.debug("request", ["method": pending.method, "path": pending.path, "status": String(response.status), "micros": String(micros)])
        }
        return MHD_queue_response(connection, UInt32(response.status), created)
    }
}

/// A suspended connection, carried to the thread that resumes it. libmicrohttpd keeps the
/// connection alive while suspended, and resuming is safe from any thread.
private struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A request being received: lives from the first call of the access handler to the
/// completion callback, which releases it.
private final class PendingRequest: @unchecked Sendable {
    let method: String
    let path: String
    /// Start time for the debug log line; 0 when not logging requests.
    let started: UInt64
    var headers: [(name: String, value: String)] = []
    var query: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var isTooLarge = false
    /// A response is queued; later calls for this request only drain what remains.
    var isAnswered = false
    /// Counted in the server's requests in flight until the completion callback.
    var isCounted = false
    /// Set from the thread that finished deferred work; read by the daemon after resume.
    private let deferredLock = NSLock()
    private var deferredResponse: Response?

    func setDeferredResponse(_ response: Response) { deferredLock.withLock { deferredResponse = response } }

    func takeDeferredResponse() -> Response? {
        deferredLock.withLock {
            defer { deferredResponse = nil }
            return deferredResponse
        }
    }

    init(method: String, path: String, connection: OpaquePointer, isTimed: Bool) {
        self.method = method
        self.path = path
        started = isTimed ? DispatchTime.now().uptimeNanoseconds : 0
        headers.reserveCapacity(8)
        let me = Unmanaged.passUnretained(self).toOpaque()
        MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, value in
            let pending = Unmanaged<PendingRequest>.fromOpaque(cls!).takeUnretainedValue()
            if let key {
                let name = String(cString: key)
                let isLowercase = !name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
                pending.headers.append((isLowercase ? name : name.lowercased(), value.map { String(cString: $0) } ?? ""))
            }
            return .YES
        }, me)
        MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, { cls, _, key, value in
            let pending = Unmanaged<PendingRequest>.fromOpaque(cls!).takeUnretainedValue()
            if let key { pending.query.append((String(cString: key), value.map { String(cString: $0) } ?? "")) }
            return .YES
        }, me)
    }
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, upload, uploadSize, context in
    guard let cls, let connection, let url, let method, let uploadSize, let context else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    return server.handle(
        connection, url: String(cString: url), method: String(cString: method), upload: upload,
        uploadSize: uploadSize, context: context
    )
}

private let completedHandler: MHD_RequestCompletedCallback = { cls, _, context, _ in
    guard let context, let opaque = context.pointee else { return }
    let pending = Unmanaged<PendingRequest>.fromOpaque(opaque)
    if pending.takeUnretainedValue().isCounted, let cls {
        Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().requestEnded()
    }
    pending.release()
    context.pointee = nil
}
