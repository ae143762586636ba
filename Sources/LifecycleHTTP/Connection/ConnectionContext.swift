import CLifecycleMicroHTTPD
import Foundation
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// One connection: its socket, client address and state machine. Created when
/// libmicrohttpd starts the connection, kept as its socket context, released when it closes.
final class ConnectionContext: Sendable {
    let handle: LibraryHandle
    /// The connection's socket; libmicrohttpd closes it only after the close notification,
    /// which removes the context from the table (see ``ConnectionTable``).
    let descriptor: Int32
    /// The daemon thread that runs all of the connection's callbacks.
    let owner: pthread_t
    /// The peer's address, which the per-client limit counts.
    let clientAddress: String
    let machine: LockedValue<ConnectionMachine>

    init(connection: OpaquePointer, clientAddress: String, limits: RequestLimits, proxies: TrustedProxies, now: UInt64) {
        handle = LibraryHandle(pointer: connection)
        descriptor = lc_connection_fd(connection)
        owner = pthread_self()
        self.clientAddress = clientAddress
        machine = LockedValue(ConnectionMachine(clientAddress: clientAddress, limits: limits, proxies: proxies, now: now))
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

    /// The handler answers `request` later: suspends the connection, unless the server gave
    /// up on it. Returns whether it did (then start the work).
    func suspendForReply(to request: Request) -> Bool {
        machine.withLock { machine in
            guard case .suspend = machine.handlerDeferred(finishing: request) else { return false }
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

    /// libmicrohttpd calls the stream's reader: the first time (the head is sent), the
    /// connection is suspended here for the stream writer to own its body.
    func streamWillRead() -> ConnectionMachine.StreamReadAction {
        machine.withLock { machine in
            let action = machine.streamWillRead()
            if case .handOver = action { MHD_suspend_connection(handle.pointer) }
            return action
        }
    }

    /// Runs `body` (a send of the stream's bytes) while the stream writer owns the
    /// connection, under its lock, so the server cannot take it back meanwhile; `nil` if the
    /// writer no longer owns it.
    func whileStreamOwned<T>(_ body: () -> T) -> T? {
        machine.withLock { machine in machine.ownsStream ? body() : nil }
    }

    /// The stream writer is done with the body: resumes the connection once, for
    /// libmicrohttpd to end the body (`clean`) or close the connection.
    func handBackStream(clean: Bool) {
        machine.withLock { machine in
            if case .resume = machine.streamHandedBack(clean: clean) { MHD_resume_connection(handle.pointer) }
        }
    }

    /// The server is stopping: makes the connection's stream, if any, end. One the stream
    /// writer owns is ended by it (``StreamWriter/endAll()``). Returns whether there was a stream to end.
    func endStream() -> Bool {
        machine.withLock { machine in
            switch machine.serverStopping() {
            case .none: false
            case .end, .endInWriter: true
            }
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
