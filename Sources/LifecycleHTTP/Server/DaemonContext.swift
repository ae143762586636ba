import CLifecycleMicroHTTPD
import Foundation
import LifecycleLog
#if canImport(Glibc)
import Glibc
#endif

/// What libmicrohttpd's callbacks act on while one daemon runs: the connections, the
/// requests in flight, and everything the callbacks read, fixed before the daemon's threads
/// start (so it needs no lock of its own). Its callbacks are the only way libmicrohttpd
/// reaches Swift; each runs on a daemon thread.
final class DaemonContext: Sendable {
    let configuration: ServerConfiguration
    let maxConnections: Int
    let limits: RequestLimits
    let pipeline: Pipeline
    let logger: LineLogger
    /// Write streamed bodies, one thread each; stopped by the server after the daemon.
    let streams: [StreamWriter]
    let gate = RequestGate()
    let connections = ConnectionTable()
    let refusals: RefusalLog

    init(configuration: ServerConfiguration, maxConnections: Int, limits: RequestLimits, pipeline: Pipeline, logger: LineLogger, streams: [StreamWriter]) {
        self.configuration = configuration
        self.maxConnections = maxConnections
        self.limits = limits
        self.pipeline = pipeline
        self.logger = logger
        self.streams = streams
        refusals = RefusalLog(logger: logger)
    }

    /// The callbacks' C struct, naming this context unretained: for the server to pass to
    /// `lc_mhd_start`, keep until the daemon has stopped, then deallocate.
    func makeCallbacks() -> UnsafeMutablePointer<lc_mhd_callbacks> {
        let callbacks = UnsafeMutablePointer<lc_mhd_callbacks>.allocate(capacity: 1)
        callbacks.initialize(to: lc_mhd_callbacks(
            context: Unmanaged.passUnretained(self).toOpaque(), access: accessHandler, completed: completedHandler,
            connection: connectionHandler, accept: acceptHandler, uri: uriHandler, unescape: unescapeHandler, log: logHandler
        ))
        return callbacks
    }

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
                method: Self.method(method), version: Self.version(version), headers: Self.headers(of: connection),
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
        case .finish(let request, var response):
            // Here, on the connection's thread, rather than on the thread that answered
            // (for writes, the one committer thread).
            pipeline.finish(request, &response)
            return queue(response, on: context)
        case .refuse(let request, let response):
            return queue(pipeline.refuse(request, with: response), on: context)
        case .handle(var request):
            switch pipeline.start(&request) {
            case .now(var response):
                pipeline.finish(request, &response)
                guard case .queue(let response) = context.machine.withLock({ $0.handlerReplied(response, isStopping: { gate.isClosed }) }) else {
                    return .NO
                }
                return queue(response, on: context)
            case .later(let start):
                // Suspend before starting the work, so its reply can never arrive first.
                guard context.suspendForReply(to: request) else { return .NO }
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

    /// The request line's method and version as strings. Those HTTP defines are the enum's
    /// and the literals' own strings, not read from the C strings: `String(cString:)` measures
    /// and checks its bytes, some 500 instructions each on every request.
    private static func method(_ text: UnsafePointer<CChar>) -> String {
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: strlen(text))
        return HTTPMethod.method(spelled: bytes)?.rawValue ?? String(cString: text)
    }

    private static func version(_ text: UnsafePointer<CChar>) -> String {
        // A `StaticString`'s bytes are in the binary, NUL-terminated: compared where they are,
        // with nothing made for the call.
        func spells(_ literal: StaticString) -> Bool {
            strcmp(text, UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
        }
        if spells("HTTP/1.1") { return "HTTP/1.1" }
        if spells("HTTP/1.0") { return "HTTP/1.0" }
        return String(cString: text)
    }

    /// The request's header fields, names lowercased (RFC 9110 §5.1: they are
    /// case-insensitive) as they are read from libmicrohttpd's bytes.
    private static func headers(of connection: OpaquePointer) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(8)
        withUnsafeMutablePointer(to: &headers) { list in
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, { cls, _, key, keySize, value, _ in
                let headers = cls!.assumingMemoryBound(to: [(name: String, value: String)].self)
                if let key {
                    let name = UnsafeRawBufferPointer(start: key, count: keySize)
                    // A name beyond ASCII is no token (RFC 9110 §5.6.2): read as any text is.
                    let lowered = name.allSatisfy { $0 < 0x80 }
                        ? String(lowercasingASCII: name) : String(decoding: name, as: UTF8.self).lowercased()
                    headers.pointee.append((lowered, value.map { String(cString: $0) } ?? ""))
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
            created = StreamBody.response(stream, on: context, unacknowledgedSeconds: configuration.connectionTimeout, writers: streams, logger: logger)
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
            // withCString: passing a String as a C string copies a short one to the heap.
            _ = name.withCString { name in value.withCString { MHD_add_response_header(created, name, $0) } }
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
            logger.debug("libmicrohttpd", ["message": LineLogger.clipped(message)])
        } else {
            logger.warning("libmicrohttpd", ["message": LineLogger.clipped(message)])
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

private func daemon(_ cls: UnsafeMutableRawPointer?) -> DaemonContext {
    Unmanaged<DaemonContext>.fromOpaque(cls!).takeUnretainedValue()
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, _, method, version, upload, uploadSize, context in
    guard let connection, let method, let version, let uploadSize, let context else { return .NO }
    return daemon(cls).handle(connection, method: method, version: version, upload: upload, uploadSize: uploadSize, requestContext: context)
}

private let completedHandler: MHD_RequestCompletedCallback = { cls, connection, context, _ in
    guard let connection, let context else { return }
    daemon(cls).requestCompleted(connection, context)
}

private let connectionHandler: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let connection, let socketContext else { return }
    if code == .CONNECTION_NOTIFY_STARTED {
        daemon(cls).connectionStarted(connection, socketContext)
    } else {
        daemon(cls).connectionClosed(socketContext)
    }
}

private let acceptHandler: MHD_AcceptPolicyCallback = { cls, address, _ in
    daemon(cls).accepts(address) ? .YES : .NO
}

private let uriHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = { cls, uri, connection in
    if let connection { daemon(cls).requestLineReceived(connection, target: uri) }
    // No request context yet: the access handler's first call is told apart by its absence.
    return nil
}

/// Leaves the target as it came: ``RequestTarget`` decodes it from the raw request line.
private let unescapeHandler: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = { _, _, string in
    string.map { strlen($0) } ?? 0
}

private let logHandler: lc_mhd_log_callback = { cls, message in
    guard let message else { return }
    daemon(cls).libraryLogged(String(cString: message))
}
