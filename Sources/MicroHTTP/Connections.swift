import CMicroHTTPD
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A libmicrohttpd connection pointer. Used on the connection's own daemon thread, except
/// for `MHD_resume_connection`, which libmicrohttpd allows from any thread (and which is
/// only called under the connection's lock, while its machine says it is suspended).
struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// One connection: its socket, client address and state machine. Created when
/// libmicrohttpd starts the connection, kept as its socket context, released when it closes.
final class ConnectionContext: Sendable {
    let handle: ConnectionHandle
    /// The connection's socket; libmicrohttpd closes it only after the close notification,
    /// which removes the context from the table (see ``ConnectionTable``).
    let descriptor: Int32
    /// The daemon thread that runs all of the connection's callbacks.
    let owner: pthread_t
    /// The peer's address, which the per-client limit counts.
    let clientAddress: String
    let machine: Mutex<ConnectionMachine>

    init(connection: OpaquePointer, clientAddress: String, limits: RequestLimits, proxies: TrustedProxies, now: UInt64) {
        handle = ConnectionHandle(pointer: connection)
        descriptor = lc_connection_fd(connection)
        owner = pthread_self()
        self.clientAddress = clientAddress
        machine = Mutex(ConnectionMachine(clientAddress: clientAddress, limits: limits, proxies: proxies, now: now))
    }

    /// The context of a connection, from its socket context.
    static func of(_ connection: OpaquePointer) -> ConnectionContext? {
        lc_connection_socket_context(connection).map { Unmanaged<ConnectionContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Whether libmicrohttpd is refusing this connection's header block: the request line
    /// is in, the headers are complete (libmicrohttpd tells their size only from then on),
    /// no response is queued, and the access handler has not seen them. Only on the
    /// connection's own thread.
    var isHeadBeingRefused: Bool {
        machine.withLock { $0.isReceivingHead } && lc_connection_header_size(handle.pointer) >= 0 && lc_connection_has_response(handle.pointer) == 0
    }

    // MARK: suspending and resuming, each under the connection's lock

    /// The handler answers later: suspends the connection, unless the server gave up on it.
    /// Returns whether it did (then start the work).
    func suspendForReply() -> Bool {
        machine.withLock { machine in
            guard case .suspend = machine.handlerDeferred() else { return false }
            MHD_suspend_connection(handle.pointer)
            return true
        }
    }

    /// A deferred reply, from any thread: resumes the connection so that libmicrohttpd calls
    /// the access handler, which queues it. Ignored when the connection is not waiting for
    /// it (the server gave up on it, or the reply came twice).
    func reply(_ response: Response, isStopping: () -> Bool) {
        machine.withLock { machine in
            if case .resume = machine.handlerReplied(response, isStopping: isStopping) {
                MHD_resume_connection(handle.pointer)
            }
        }
    }

    /// The stream has bytes again (its waker's action, from any thread).
    func wakeStream() {
        machine.withLock { machine in
            if case .resume = machine.streamWoken() { MHD_resume_connection(handle.pointer) }
        }
    }

    /// The stream found nothing to send: suspends the connection unless a wake came meanwhile.
    func streamWaits() -> ConnectionMachine.StreamWaitAction {
        machine.withLock { machine in
            let action = machine.streamWaits()
            if case .suspend = action { MHD_suspend_connection(handle.pointer) }
            return action
        }
    }

    /// The server is stopping: makes the connection's stream, if any, end at its next read,
    /// resuming it if suspended. Returns whether there was a stream to end.
    func endStream() -> Bool {
        machine.withLock { machine in perform(machine.serverStopping()) }
    }

    /// The peer closed the connection (from the server's ``HangUpWatch``, on its thread): as
    /// ``endStream()``, so that libmicrohttpd closes the connection at once.
    func peerClosed() {
        machine.withLock { machine in _ = perform(machine.peerClosed()) }
    }

    /// Does what ending the stream requires; under the connection's lock.
    private func perform(_ action: ConnectionMachine.StopAction) -> Bool {
        switch action {
        case .none:
            return false
        case .end:
            return true
        case .resumeToEnd:
            MHD_resume_connection(handle.pointer)
            return true
        }
    }

    /// The server gives up on the connection before stopping libmicrohttpd: resumes it if
    /// suspended (libmicrohttpd must not stop with a suspended connection), and ends its
    /// counted request in `gate`. Returns whether a request was still in flight.
    func abandon(gate: RequestGate) -> Bool {
        machine.withLock { machine in
            switch machine.abandon() {
            case .none:
                return false
            case .release:
                gate.release()
                return true
            case .resumeAndRelease:
                MHD_resume_connection(handle.pointer)
                gate.release()
                return true
            }
        }
    }

    /// Sends a final response past libmicrohttpd, then shuts the socket down both ways, so
    /// libmicrohttpd sees the connection end and closes it. Only for a connection that has
    /// sent nothing of its current response.
    func answerAndShutDown(_ response: Response) {
        let message = response.closingMessage()
        _ = message.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

/// Every open connection of a server, for the limits in all and per client address, and
/// the request deadline.
final class ConnectionTable: Sendable {
    private struct Open {
        var contexts: [ObjectIdentifier: ConnectionContext] = [:]
        /// Open connections by client address (only addresses with some).
        var perClient: [String: Int] = [:]
    }

    private let open = Mutex(Open())

    var count: Int { open.withLock { $0.contexts.count } }

    /// Connections open from `client`.
    func count(from client: String) -> Int { open.withLock { $0.perClient[client, default: 0] } }

    /// Whether a connection was added.
    enum Insertion {
        case inserted
        /// `limit` connections are open.
        case full
        /// `perClient` connections are open from its client address.
        case clientFull
    }

    /// Adds a connection unless `limit` are already open, or `perClient` from its address.
    func insert(_ context: ConnectionContext, limit: Int, perClient: Int) -> Insertion {
        open.withLock { open in
            guard open.contexts.count < limit else { return .full }
            guard open.perClient[context.clientAddress, default: 0] < perClient else { return .clientFull }
            open.contexts[ObjectIdentifier(context)] = context
            open.perClient[context.clientAddress, default: 0] += 1
            return .inserted
        }
    }

    func remove(_ context: ConnectionContext) {
        open.withLock { open in
            guard open.contexts.removeValue(forKey: ObjectIdentifier(context)) != nil else { return }
            let left = open.perClient[context.clientAddress, default: 1] - 1
            open.perClient[context.clientAddress] = left > 0 ? left : nil
        }
    }

    /// The connections open now, to act on outside the table's lock. A context stays valid
    /// after its connection closes; its machine then says so.
    var all: [ConnectionContext] {
        open.withLock { Array($0.contexts.values) }
    }

    /// The first connection of the calling thread that satisfies `predicate` (which may
    /// use libmicrohttpd on it, being on its thread).
    func first(ofThisThreadWhere predicate: (ConnectionContext) -> Bool) -> ConnectionContext? {
        let me = pthread_self()
        return open.withLock { open in
            open.contexts.values.first { pthread_equal($0.owner, me) != 0 && predicate($0) }
        }
    }

    /// Shuts down every open connection, so that its client can send nothing more and
    /// libmicrohttpd closes it; returns how many are open. Under the table's lock, as
    /// ``cutLateRequests(now:gate:)``.
    func shutDownAll() -> Int {
        open.withLock { open in
            for context in open.contexts.values { shutdown(context.descriptor, Int32(SHUT_RDWR)) }
            return open.contexts.count
        }
    }

    /// Shuts down every connection whose request is late (answering 408 when its headers
    /// were in); returns how many. Done under the table's lock, so no socket can be closed
    /// (and its number reused) by libmicrohttpd meanwhile.
    func cutLateRequests(now: UInt64, gate: RequestGate) -> Int {
        open.withLock { open in
            var cut = 0
            for context in open.contexts.values {
                switch context.machine.withLock({ $0.deadlinePassed(now: now) }) {
                case .none:
                    continue
                case .close:
                    shutdown(context.descriptor, Int32(SHUT_RDWR))
                case .answerAndClose(let response):
                    context.answerAndShutDown(response)
                    gate.release()
                }
                cut += 1
            }
            return cut
        }
    }
}

/// Counts requests in flight, streams included, so `stop()` can wait for them.
final class RequestGate: Sendable {
    private let isClosedNow = Mutex(false)
    private let group = DispatchGroup()

    /// Counts a request, unless the server is stopping.
    func admit() -> Bool {
        isClosedNow.withLock { isClosed in
            guard !isClosed else { return false }
            group.enter()
            return true
        }
    }

    /// Ends a counted request.
    func release() {
        group.leave()
    }

    /// Refuses new requests from now on.
    func close() {
        isClosedNow.withLock { $0 = true }
    }

    /// Whether new requests are refused: the server is stopping.
    var isClosed: Bool {
        isClosedNow.withLock { $0 }
    }

    /// Waits until no request is in flight, or `deadline`.
    func drain(until deadline: DispatchTime) {
        _ = group.wait(timeout: deadline)
    }
}

/// A thread running `work` every `interval` seconds until stopped.
final class Sweeper: Sendable {
    private let stopping = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(interval: Double, work: @escaping @Sendable () -> Void) {
        let thread = Thread { [stopping, finished] in
            while stopping.wait(timeout: .now() + interval) == .timedOut { work() }
            finished.signal()
        }
        thread.name = "lifecycled-http-sweeper"
        thread.start()
    }

    func stop() {
        stopping.signal()
        finished.wait()
    }
}

/// The connection whose request line this daemon thread parsed last (a pthread key's
/// value per thread, unretained: cleared when that connection closes, on this thread).
/// libmicrohttpd checks a header block in the same pass that parsed its request line,
/// unless the block arrived later, so a refusal of it it logs concerns this connection.
enum LastRequestLine {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    static func set(_ context: ConnectionContext) {
        pthread_setspecific(key, Unmanaged.passUnretained(context).toOpaque())
    }

    static var context: ConnectionContext? {
        pthread_getspecific(key).map { Unmanaged<ConnectionContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Forgets `context` if it is the one kept.
    static func forget(_ context: ConnectionContext) {
        if pthread_getspecific(key) == Unmanaged.passUnretained(context).toOpaque() { pthread_setspecific(key, nil) }
    }
}

/// Refused and cut connections, logged at info without flooding: the first at once, then
/// at most one line per reason every 10 seconds with the count since the last line.
final class RefusalLog: Sendable {
    private struct Pending {
        var count = 0
        var lastLine: UInt64 = 0
    }

    private let logger: Logger
    private let pending = Mutex<[String: Pending]>([:])
    private static let interval: UInt64 = 10_000_000_000

    init(logger: Logger) { self.logger = logger }

    func record(_ count: Int, reason: String, limit: String) {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = pending.withLock { pending -> Int? in
            var entry = pending[reason, default: Pending()]
            entry.count += count
            if entry.lastLine != 0, now - entry.lastLine < Self.interval {
                pending[reason] = entry
                return nil
            }
            pending[reason] = Pending(count: 0, lastLine: now)
            return entry.count
        }
        if let due {
            logger.info(reason == "request-timeout" ? "connections closed" : "connections refused", ["reason": reason, "limit": limit, "count": String(due)])
        }
    }
}

/// A client's address as text.
enum ClientAddress {
    /// `127.0.0.1`, `::1`; an IPv4 client of an IPv6 socket (`::ffff:a.b.c.d`) as IPv4.
    static func describe(_ address: UnsafePointer<sockaddr>?) -> String {
        guard let address else { return "" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            inet_ntop(AF_INET, &v4, &text, socklen_t(text.count))
        case AF_INET6:
            var v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            let isMapped = withUnsafeBytes(of: &v6) { bytes in bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF }
            if isMapped {
                var v4 = withUnsafeBytes(of: &v6) { bytes in in_addr(s_addr: bytes.load(fromByteOffset: 12, as: UInt32.self)) }
                inet_ntop(AF_INET, &v4, &text, socklen_t(text.count))
            } else {
                inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count))
            }
        default:
            return ""
        }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// The process's limit on open files.
enum OpenFiles {
    /// Raises the soft limit to the hard limit; returns the soft limit now in force.
    static func raiseLimit() -> Int {
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: min(limit.rlim_cur, 1 << 30))
    }
}

/// What libmicrohttpd 0.9.75's log messages mean.
enum LibraryMessages {
    private static let refusalPrefix = "Error processing request (HTTP response code is "

    /// The status of a refusal libmicrohttpd is about to send itself.
    static func refusalStatus(_ message: String) -> Int? {
        guard message.hasPrefix(refusalPrefix) else { return nil }
        return Int(message.dropFirst(refusalPrefix.count).prefix { $0.isNumber })
    }

    /// The title of the refusal's HTML body, such as `Request malformed`.
    static func refusalTitle(_ message: String) -> String {
        guard let open = message.range(of: "<title>"), let close = message.range(of: "</title>", range: open.upperBound..<message.endIndex) else { return "" }
        return String(message[open.upperBound..<close.lowerBound]).replacingOccurrences(of: "&quot;", with: "\"")
    }

    static func reasonPhrase(_ status: Int) -> String {
        String(cString: MHD_get_reason_phrase_for(UInt32(status)))
    }

    /// Messages about one client's connection (it went away, sent a bad request, is
    /// slow): logged at debug, as the request lines are.
    static func isAboutOneClient(_ message: String) -> Bool {
        [
            "Connection was closed by remote side", "Socket has been disconnected when reading", "Connection socket is closed when reading",
            "Failed to parse `Content-Length'", "Too large value of 'Content-Length'", "Not enough memory in pool to",
            "Received HTTP/1.1 request without", "Failed to send", "Too late", "Closing connection (failed to queue error",
            "Connection \"Upgrade\"",
        ].contains { message.hasPrefix($0) }
    }
}

extension Response {
    /// The whole response as bytes, announcing that the connection closes: for the few
    /// answers sent past libmicrohttpd, problems held in memory and the heads of HEAD answers
    /// (``Response/Body/omitted``, sent without a length); a stream has no place here.
    func closingMessage() -> [UInt8] {
        let body = body.bytes
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var date = [CChar](repeating: 0, count: 64)
        strftime(&date, date.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        var head = "HTTP/1.1 \(status) \(LibraryMessages.reasonPhrase(status))\r\nDate: \(date.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })\r\n"
        for (name, value) in headers where name.lowercased() != "connection" && name.lowercased() != "content-length" {
            head += "\(name): \(value)\r\n"
        }
        head += "Connection: close\r\n" + (body.map { "Content-Length: \($0.count)\r\n" } ?? "") + "\r\n"
        return Array(head.utf8) + (body ?? [])
    }
}
