import CMicroHTTPD
import Foundation
import Synchronization
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
    /// Seconds without progress before libmicrohttpd closes a connection: the longest a
    /// response may wait for a client that does not read it. (An idle kept-alive connection
    /// is closed after `requestTimeout` when that is shorter: its next request is late.)
    public var connectionTimeout: Int
    /// Seconds a whole request (headers and body) may take to arrive, counted from the
    /// moment the connection is ready for it (accepted, or the previous response sent).
    /// A request that has fully arrived is never cut, however long its answer takes.
    public var requestTimeout: Int
    /// Open connections in all; `nil` sizes it from the open-file limit (see ``HTTPServer/start()``).
    public var maxConnections: Int?
    /// Open connections from one client address; trusted proxies' are not limited.
    public var maxConnectionsPerClient: Int
    /// Whose `X-Forwarded-For` names the client (see ``TrustedProxies``).
    public var trustedProxies: TrustedProxies
    /// Longest request target (path and query) accepted; longer gets 414.
    public var maxTargetSize: Int
    /// Largest request line and header fields accepted; larger gets 431.
    public var maxHeaderSize: Int

    public init(
        host: String = "127.0.0.1", port: UInt16 = 8080, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
        maxBodySize: Int = 64 * 1024, connectionTimeout: Int = 60, requestTimeout: Int = 30,
        maxConnections: Int? = nil, maxConnectionsPerClient: Int = 256, trustedProxies: TrustedProxies = TrustedProxies(),
        maxTargetSize: Int = 8 * 1024, maxHeaderSize: Int = 16 * 1024
    ) {
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
///
/// Each connection has a ``ConnectionMachine`` (in a ``ConnectionContext``, the
/// connection's socket context) driven by libmicrohttpd's callbacks. Connections are
/// limited per client address (counted here rather than by libmicrohttpd's per-IP limit,
/// so that trusted proxies, which carry many clients, are not held to it) and in all (the
/// accept policy here, below libmicrohttpd's own limit, at which it would stop accepting and
/// leave new clients hanging); both refuse a client at once by closing its socket. A
/// sweeper thread closes connections whose request has not arrived in time.
///
/// A response body may be a ``ResponseStream``: a libmicrohttpd callback response, chunked,
/// whose reader suspends the connection while the stream has nothing to send (see
/// `StreamBody`). The connection table, with each connection's state, is the registry of
/// open streams that `stop()` ends first.
public final class HTTPServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    /// The port actually bound (useful when configured with 0).
    public private(set) var port: UInt16 = 0
    /// The limit on open connections in force, once started.
    public private(set) var maxConnections = 0
    let pipeline: Pipeline
    let logger: Logger
    private let lock = NSLock()
    private var daemon: OpaquePointer?
    private var callbacks: DaemonCallbacks?
    private var sweeper: Sweeper?
    /// Set by `start()` before the daemon's threads run (which read it), stopped after them.
    private var hangUps: HangUpWatch?
    let gate = RequestGate()
    let connections = ConnectionTable()
    let refusals: RefusalLog
    let limits: RequestLimits

    public init(configuration: ServerConfiguration, logger: Logger = Logger(), pipeline: Pipeline) {
        self.configuration = configuration
        self.logger = logger
        self.pipeline = pipeline
        refusals = RefusalLog(logger: logger)
        limits = RequestLimits(
            maxBodySize: configuration.maxBodySize, maxTargetSize: configuration.maxTargetSize, maxHeaderSize: configuration.maxHeaderSize,
            requestTimeout: UInt64(max(1, configuration.requestTimeout)) * 1_000_000_000
        )
    }

    deinit { stop() }

    /// Binds and starts serving; returns once the daemon's threads are running.
    ///
    /// Raises the process's soft limit on open files to its hard limit, and keeps the
    /// connection limit below it (less ``ServerConfiguration/reservedDescriptors``), so
    /// accepting never fails for want of a descriptor.
    public func start() throws(ServerError) {
        let openFiles = OpenFiles.raiseLimit()
        let ceiling = max(1, openFiles - ServerConfiguration.reservedDescriptors)
        maxConnections = min(configuration.maxConnections ?? ceiling, ceiling)
        if let wanted = configuration.maxConnections, wanted > ceiling {
            logger.warning("connection limit lowered to fit the open-file limit", ["wanted": String(wanted), "limit": String(ceiling), "openFiles": String(openFiles)])
        }

        let socket = try ListeningSocket(host: configuration.host, port: configuration.port)
        let flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: .LISTEN_SOCKET, value: Int(socket.descriptor), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: configuration.connectionTimeout, ptr_value: nil),
            // libmicrohttpd splits its limit evenly between threads and a thread at its share
            // stops accepting, so each share is kept above the whole limit enforced here.
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: (maxConnections + 1) * configuration.threads, ptr_value: nil),
        ]
        if configuration.threads > 1 {
            options.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: configuration.threads, ptr_value: nil))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))

        let hangUps: HangUpWatch
        do {
            hangUps = try HangUpWatch(logger: logger)
        } catch {
            close(socket.descriptor)
            throw error
        }
        self.hangUps = hangUps
        let callbacks = DaemonCallbacks(context: Unmanaged.passUnretained(self).toOpaque())
        let started = options.withUnsafeBufferPointer { items in
            lc_mhd_start(UInt32(flags), callbacks.pointer, items.baseAddress)
        }
        guard let started else {
            close(socket.descriptor)
            hangUps.stop()
            self.hangUps = nil
            throw .startFailed
        }
        self.callbacks = callbacks
        lock.withLock { daemon = started }
        port = socket.port
        let interval = min(1, max(0.05, Double(limits.requestTimeout) / 4e9))
        sweeper = Sweeper(interval: interval) { [connections, gate, limits, refusals] in
            let cut = connections.cutLateRequests(now: DispatchTime.now().uptimeNanoseconds, gate: gate)
            if cut > 0 { refusals.record(cut, reason: "request-timeout", limit: "\(limits.requestTimeout / 1_000_000_000)s") }
        }
    }

    /// Stops accepting connections and requests, ends every open stream (each client sees
    /// the clean end of its body), lets requests in flight and the ending streams finish (up
    /// to `drainSeconds`), closes every connection (up to ``closeSeconds`` more: a handler
    /// still running holds its connection), then stops the daemon's threads.
    ///
    /// libmicrohttpd must not stop with a suspended connection (it aborts the process), and
    /// no connection may be resumed once it has stopped (its memory is freed). So, before
    /// stopping it, the server gives up on every connection still open: each suspended one
    /// is resumed, and from then on no reply or wake resumes any (see ``ConnectionMachine``).
    public func stop(drainSeconds: Double = 10) {
        let running = lock.withLock { () -> OpaquePointer? in
            defer { daemon = nil }
            return daemon
        }
        guard let running else { return }
        let deadline = DispatchTime.now() + drainSeconds
        // From here the accept policy turns every new client away at once. (Not
        // `MHD_quiesce_daemon`: in 0.9.75 with a thread pool on epoll it races a worker that
        // wakes meanwhile to take the listening socket out of the same epoll set, and the
        // loser aborts the process. The socket stays open until `MHD_stop_daemon` closes it.)
        gate.close()
        // After closing the gate: a stream queued from now on starts out ending.
        let streams = connections.all.reduce(0) { $0 + ($1.endStream() ? 1 : 0) }
        if streams > 0 { logger.info("ending streams", ["count": String(streams)]) }
        gate.drain(until: deadline)
        sweeper?.stop()
        let abandoned = connections.all.reduce(0) { $0 + ($1.abandon(gate: gate) ? 1 : 0) }
        if abandoned > 0 { logger.error("stopping with requests unfinished", ["count": String(abandoned)]) }
        // libmicrohttpd 0.9.75 goes on reading connections until its threads notice the stop,
        // and a header block it refuses itself then (a bad Content-Length) crashes the process:
        // its `MHD_queue_response` queues nothing once stopping, and it builds the head of that
        // response from a null pointer. So no connection may be left when it is told to stop:
        // each is shut down and, as libmicrohttpd may still read what its client had sent,
        // waited for until libmicrohttpd has closed it.
        let closing = DispatchTime.now() + Self.closeSeconds
        while connections.shutDownAll() > 0, DispatchTime.now() < closing { usleep(5_000) }
        let open = connections.count
        if open > 0 { logger.error("stopping with connections still open", ["count": String(open)]) }
        MHD_stop_daemon(running)
        // Every stream is finished (unwatched) by now.
        hangUps?.stop()
    }

    /// Longest `stop()` waits for the connections to close once their drain is over: they
    /// close at once unless a handler still holds one (then the daemon waits for it anyway).
    static let closeSeconds = 1.0

    // MARK: callbacks (on the daemon's threads unless noted)

    /// A new connection: its context, counted against the total limit.
    fileprivate func connectionStarted(_ connection: OpaquePointer, _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let context = ConnectionContext(
            connection: connection, clientAddress: ClientAddress.describe(lc_connection_client_address(connection)),
            limits: limits, proxies: configuration.trustedProxies, now: DispatchTime.now().uptimeNanoseconds
        )
        socketContext.pointee = Unmanaged.passRetained(context).toOpaque()
        switch connections.insert(context, limit: maxConnections, perClient: perClientLimit(context.clientAddress)) {
        case .inserted:
            break
        case .full:
            // The accept policy's checks raced with other threads' accepts: refuse now.
            shutdown(context.descriptor, Int32(SHUT_RDWR))
            refusals.record(1, reason: "max-connections", limit: String(maxConnections))
        case .clientFull:
            shutdown(context.descriptor, Int32(SHUT_RDWR))
            refusals.record(1, reason: "max-connections-per-client", limit: String(configuration.maxConnectionsPerClient))
        }
    }

    fileprivate func connectionClosed(_ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let opaque = socketContext.pointee else { return }
        socketContext.pointee = nil
        let context = Unmanaged<ConnectionContext>.fromOpaque(opaque).takeRetainedValue()
        LastRequestLine.forget(context)
        connections.remove(context)
    }

    /// The request line is parsed; `target` is still raw (libmicrohttpd decodes it later).
    fileprivate func requestLineReceived(_ connection: OpaquePointer, target: UnsafePointer<CChar>?) {
        guard let context = ConnectionContext.of(connection) else { return }
        let raw = target.map { UnsafeBufferPointer(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self), count: strlen($0)) }
        context.machine.withLock { $0.receivedRequestLine(target: raw ?? UnsafeBufferPointer(start: nil, count: 0)) }
        LastRequestLine.set(context)
    }

    /// Called by libmicrohttpd once per request, several times: first with headers only,
    /// then once per body chunk, then with no data; once more after a suspended
    /// connection is resumed.
    fileprivate func handle(
        _ connection: OpaquePointer, method: UnsafePointer<CChar>, version: UnsafePointer<CChar>, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>, requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let existing = requestContext.pointee else {
            guard let context = ConnectionContext.of(connection) else { return .NO }
            requestContext.pointee = Unmanaged.passUnretained(context).toOpaque()
            let head = RequestHead(
                method: String(cString: method), version: String(cString: version), headers: Self.headers(of: connection),
                headerSize: lc_connection_header_size(connection)
            )
            switch context.machine.withLock({ $0.receivedHeaders(head, admit: gate.admit, screen: pipeline.admit) }) {
            case .readBody:
                // Wait: a response queued on the first call would force `Connection: close`.
                return .YES
            case .respond(let response):
                return queue(response, on: context)
            case .refuse(let request, let response):
                return queue(pipeline.refuse(request, with: response), on: context)
            case .close:
                return .NO
            }
        }
        let context = Unmanaged<ConnectionContext>.fromOpaque(existing).takeUnretainedValue()
        let size = uploadSize.pointee
        if size > 0 {
            context.machine.withLock { $0.receivedBody(UnsafeRawBufferPointer(start: upload, count: size)) }
            uploadSize.pointee = 0
            return .YES
        }
        switch context.machine.withLock({ $0.receivedEnd(isStopping: { gate.isClosed }) }) {
        case .wait:
            return .YES
        case .close:
            return .NO
        case .respond(let response):
            return queue(response, on: context)
        case .refuse(let request, let response):
            return queue(pipeline.refuse(request, with: response), on: context)
        case .handle(let request):
            switch pipeline.reply(to: request) {
            case .now(let response):
                guard case .queue(let response) = context.machine.withLock({ $0.handlerReplied(response, isStopping: { gate.isClosed }) }) else {
                    return .NO
                }
                return queue(response, on: context)
            case .later(let start):
                // Suspend before starting the work, so its reply can never arrive first.
                guard context.suspendForReply() else { return .NO }
                start { [gate] response in
                    context.reply(response, isStopping: { gate.isClosed })
                }
                return .YES
            }
        }
    }

    /// libmicrohttpd is done with a request: answered, or its connection failed.
    fileprivate func requestCompleted(_ connection: OpaquePointer, _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let context = requestContext.pointee.map { Unmanaged<ConnectionContext>.fromOpaque($0).takeUnretainedValue() }
            ?? ConnectionContext.of(connection)
        requestContext.pointee = nil
        guard let context else { return }
        if case .release = context.machine.withLock({ $0.completed(now: DispatchTime.now().uptimeNanoseconds) }) {
            gate.release()
        }
    }

    /// The accept policy: refuses a client at once when the server is stopping or full, or
    /// the client has its limit of connections. (The exact counts are kept at connection
    /// start; this check saves allocating a refused connection.)
    fileprivate func accepts(_ address: UnsafePointer<sockaddr>?) -> Bool {
        guard !gate.isClosed else { return false }
        guard connections.count < maxConnections else {
            refusals.record(1, reason: "max-connections", limit: String(maxConnections))
            return false
        }
        let client = ClientAddress.describe(address)
        guard connections.count(from: client) < perClientLimit(client) else {
            refusals.record(1, reason: "max-connections-per-client", limit: String(configuration.maxConnectionsPerClient))
            return false
        }
        return true
    }

    /// Connections `client` may have open: a trusted proxy's are not limited.
    private func perClientLimit(_ client: String) -> Int {
        configuration.trustedProxies.contains(client) ? Int.max : configuration.maxConnectionsPerClient
    }

    private static func headers(of connection: OpaquePointer) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(8)
        withUnsafeMutablePointer(to: &headers) { list in
            _ = MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, value in
                let headers = cls!.assumingMemoryBound(to: [(name: String, value: String)].self)
                if let key {
                    let name = String(cString: key)
                    let isLowercase = !name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
                    headers.pointee.append((isLowercase ? name : name.lowercased(), value.map { String(cString: $0) } ?? ""))
                }
                return .YES
            }, list)
        }
        return headers
    }

    private func queue(_ response: Response, on context: ConnectionContext) -> MHD_Result {
        let created: OpaquePointer?
        switch response.body {
        case .bytes(let body):
            created = body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .stream(let stream):
            guard let hangUps else { return .NO }
            created = StreamBody.response(stream, on: context, unacknowledgedSeconds: configuration.connectionTimeout, hangUps: hangUps, logger: logger)
        case .omitted:
            // libmicrohttpd 0.9.75 follows the head of any HEAD answer of unknown length with
            // a chunked body's last chunk (`0\r\n\r\n`), which the client reads as the start
            // of the next response; and a length it would announce must be the GET's. So this
            // head goes out past libmicrohttpd and the socket is shut down: libmicrohttpd's
            // own (empty) answer then fails to send, and it closes the connection.
            context.answerAndShutDown(response)
            created = MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        for (name, value) in response.headers {
            _ = MHD_add_response_header(created, name, value)
        }
        return MHD_queue_response(context.handle.pointer, UInt32(response.status), created)
    }

    // MARK: libmicrohttpd's log

    /// A message from libmicrohttpd, as one structured line. Its refusals of a request are
    /// logged as such; when one concerns a complete header block (a malformed or huge
    /// Content-Length), the client gets a problem+json answer instead of libmicrohttpd's HTML.
    fileprivate func libraryLogged(_ raw: String) {
        let message = String(raw.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : Character($0) })
            .trimmingCharacters(in: .whitespaces)
        if let status = LibraryMessages.refusalStatus(message) {
            let answered = answerHeadRefusal(status: status)
            logger.debug("request refused by libmicrohttpd", [
                "status": String(status), "reason": LibraryMessages.refusalTitle(message),
                "body": answered ? "problem+json" : "libmicrohttpd html",
            ])
        } else if LibraryMessages.isAboutOneClient(message) {
            // It may quote what a client sent (a request line, a header): clipped like any such value.
            logger.debug("libmicrohttpd", ["message": Logger.clipped(message)])
        } else {
            logger.warning("libmicrohttpd", ["message": Logger.clipped(message)])
        }
    }

    /// libmicrohttpd is refusing a complete header block on this thread: after logging,
    /// it would send its HTML answer (twice over for a bad Content-Length, a bug of 0.9.75).
    /// The connection concerned is the one of this thread in the state that
    /// ``ConnectionContext/isHeadBeingRefused`` describes (there is one at most: libmicrohttpd
    /// goes from complete headers to the access handler, or to this refusal, without a
    /// pause); usually the one whose request line it parsed last. It is answered here and
    /// shut down, so libmicrohttpd's own answer fails to send and the connection closes.
    private func answerHeadRefusal(status: Int) -> Bool {
        let refused = LastRequestLine.context.flatMap { $0.isHeadBeingRefused ? $0 : nil }
            ?? connections.first(ofThisThreadWhere: \.isHeadBeingRefused)
        guard let context = refused else { return false }
        let problem = switch status {
        case 400: Problem(status: 400, title: "Bad Request", detail: "Content-Length must be one decimal number")
        case 413: Problem(status: 413, title: "Content Too Large", detail: "request body is larger than the limit of \(configuration.maxBodySize) bytes")
        case 431: Problem(status: 431, title: "Request Header Fields Too Large", detail: "the header fields are too large")
        default: Problem(status: status, title: LibraryMessages.reasonPhrase(status), detail: "the request's header block was refused")
        }
        context.answerAndShutDown(ConnectionMachine.closing(problem))
        return true
    }
}

/// The callbacks' C struct, which the daemon reads until it stops.
private final class DaemonCallbacks {
    let pointer: UnsafeMutablePointer<lc_mhd_callbacks>

    init(context: UnsafeMutableRawPointer) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: lc_mhd_callbacks(
            context: context, access: accessHandler, completed: completedHandler, connection: connectionHandler,
            accept: acceptHandler, uri: uriHandler, unescape: unescapeHandler, log: logHandler
        ))
    }

    deinit { pointer.deallocate() }
}

private func server(_ cls: UnsafeMutableRawPointer?) -> HTTPServer {
    Unmanaged<HTTPServer>.fromOpaque(cls!).takeUnretainedValue()
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, _, method, version, upload, uploadSize, context in
    guard let connection, let method, let version, let uploadSize, let context else { return .NO }
    return server(cls).handle(connection, method: method, version: version, upload: upload, uploadSize: uploadSize, requestContext: context)
}

private let completedHandler: MHD_RequestCompletedCallback = { cls, connection, context, _ in
    guard let connection, let context else { return }
    server(cls).requestCompleted(connection, context)
}

private let connectionHandler: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let connection, let socketContext else { return }
    if code == .CONNECTION_NOTIFY_STARTED {
        server(cls).connectionStarted(connection, socketContext)
    } else {
        server(cls).connectionClosed(socketContext)
    }
}

private let acceptHandler: MHD_AcceptPolicyCallback = { cls, address, _ in
    server(cls).accepts(address) ? .YES : .NO
}

private let uriHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = { cls, uri, connection in
    if let connection { server(cls).requestLineReceived(connection, target: uri) }
    // No request context yet: the access handler's first call is told apart by its absence.
    return nil
}

/// Leaves the target as it came: ``RequestTarget`` decodes it from the raw request line.
private let unescapeHandler: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = { _, _, string in
    string.map { strlen($0) } ?? 0
}

private let logHandler: lc_mhd_log_callback = { cls, message in
    guard let message else { return }
    server(cls).libraryLogged(String(cString: message))
}
