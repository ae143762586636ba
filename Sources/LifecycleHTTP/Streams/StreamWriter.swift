import CLifecycleMicroHTTPD
import Foundation
import LifecycleLog
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// Writes every streamed body to its socket, on one thread of its own, so that streams
/// never hold up libmicrohttpd's threads (which answer the other requests) and a record
/// wakes its streams without resuming their connections.
///
/// Once libmicrohttpd has sent a stream's head, the connection is suspended and handed over
/// here (see ``StreamBody``): libmicrohttpd neither polls nor times out a suspended
/// connection, nor touches its memory pool. Wakes (``StreamWaker``) put the body on a list
/// that the thread takes whole, after one eventfd write for the lot; the thread reads each
/// due stream into its one buffer and sends the bytes at once, non-blocking (one chunk per
/// read for HTTP/1.1). A socket that takes only part is watched for writability
/// (`EPOLLOUT`, edge-triggered) and its rest kept (``StreamOutput``). The same epoll set
/// reports a peer that closes or resets (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`), which ends
/// the body at once, while bytes the client sends (a pipelined request) report nothing and
/// stay for libmicrohttpd. When a body ends, the connection is resumed once, and
/// libmicrohttpd writes the last chunk and keeps or closes the connection, as for any response.
///
/// Owns the epoll descriptor, an eventfd that wakes its thread, and the thread.
final class StreamWriter: Sendable {
    private let epoll: Int32
    private let signal: Int32
    private let state = LockedValue(State())
    /// Signalled as the thread ends, which `stop()` waits for.
    private let finished = DispatchSemaphore(value: 0)
    private let logger: LineLogger

    private struct State {
        /// Bodies from their start to their finish, by key (``StreamBody/key``).
        var bodies: [UInt64: StreamBody] = [:]
        /// Bodies to service at the thread's next turn.
        var due: [StreamBody] = []
        var isStopping = false
    }

    /// Key of the eventfd's registration.
    private static let signalKey: UInt64 = 0
    /// Bytes a stream may write per read: its events leave in one send.
    static let bufferSize = 32 * 1024
    /// Reads of one stream per turn before the others get theirs (a long replay takes turns).
    private static let readsPerTurn = 8
    /// The writer threads' nice value, above the request threads' 0.
    private static let niceness: Int32 = 2

    init(logger: LineLogger) throws(ServerError) {
        self.logger = logger
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw .socket(operation: "epoll_create1", code: errno) }
        signal = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard signal >= 0 else {
            let code = errno
            close(epoll)
            throw .socket(operation: "eventfd", code: code)
        }
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.signalKey))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, signal, &event) == 0 else {
            let code = errno
            close(signal)
            close(epoll)
            throw .socket(operation: "epoll_ctl", code: code)
        }
        let thread = Thread { [self] in run() }
        thread.name = "lifecycled-http-streams"
        thread.start()
    }

    deinit {
        close(signal)
        close(epoll)
    }

    // MARK: from any thread

    /// A new body: wakes reach it from now on; it is serviced once handed over.
    func register(_ body: StreamBody) {
        state.withLock { $0.bodies[body.key] = body }
    }

    /// libmicrohttpd has handed `body` over: its socket is watched and its stream read.
    /// False if the socket cannot be watched (then the body is handed back to fail).
    func handedOver(_ body: StreamBody) -> Bool {
        let flags = EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue
        var event = epoll_event(events: flags, data: epoll_data_t(u64: body.key))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, body.descriptor, &event) == 0 else {
            logger.warning("cannot watch a stream's connection; closing it", ["error": String(cString: strerror(errno))])
            return false
        }
        wake(body)
        return true
    }

    /// `body` has work: put on the thread's list (once), and the thread woken if the list was empty.
    func wake(_ body: StreamBody) {
        guard !body.isDue.withLock({ value in defer { value = true }; return value }) else { return }
        let wasEmpty = state.withLock { state in
            state.due.append(body)
            return state.due.count == 1
        }
        if wasEmpty { poke() }
    }

    /// The server is stopping: every body ends cleanly (those not handed over yet, once they are).
    func endAll() {
        let bodies = state.withLock { Array($0.bodies.values) }
        for body in bodies {
            body.output.withLock { $0.end() }
            wake(body)
        }
    }

    /// `body`'s response is being freed: its socket, still open, is no longer watched, and
    /// once this returns the thread neither reads its stream nor touches its socket.
    func remove(_ body: StreamBody) {
        _ = state.withLock { $0.bodies.removeValue(forKey: body.key) }
        // Also when never added: then this fails, harmlessly.
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, body.descriptor, nil)
        // Waits for a turn in progress on it.
        body.output.withLock { $0.close() }
    }

    /// Ends the thread; call once, after the daemon has stopped.
    func stop() {
        state.withLock { $0.isStopping = true }
        poke()
        finished.wait()
    }

    private func poke() {
        var one: UInt64 = 1
        _ = write(signal, &one, MemoryLayout<UInt64>.size)
    }

    // MARK: the thread

    private func run() {
        // A little below the request threads, which then take the cores first when both
        // are ready: an answer never waits behind a pass over the streams. (On Linux, 0 names
        // the calling thread alone.)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Self.niceness)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: StreamBody.framing + Self.bufferSize + 2, alignment: 16)
        defer { buffer.deallocate() }
        var again: [StreamBody] = []
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), again.isEmpty ? -1 : 0)
            if count < 0 {
                if errno == EINTR { continue }
                logger.error("the stream writer's epoll failed; streams stop", ["error": String(cString: strerror(errno))])
                break
            }
            var reports: [(key: UInt64, flags: UInt32)] = []
            for event in events.prefix(Int(count)) {
                if event.data.u64 == Self.signalKey {
                    var value: UInt64 = 0
                    _ = read(signal, &value, MemoryLayout<UInt64>.size)
                } else {
                    reports.append((event.data.u64, event.events))
                }
            }
            // The list is taken whole, by swapping (a copy would retain every body on it).
            var due: [StreamBody] = []
            let (reported, isStopping) = state.withLock { state in
                swap(&due, &state.due)
                return (reports.compactMap { report in state.bodies[report.key].map { ($0, report.flags) } }, state.isStopping)
            }
            if isStopping { break }
            var turn = again
            again = []
            for (body, flags) in reported {
                body.output.withLock { output in
                    if flags & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { output.end(peerGone: true) }
                    if flags & EPOLLOUT.rawValue != 0 { output.writable() }
                }
                turn.append(body)
            }
            for body in due {
                body.isDue.withLock { $0 = false }
                body.output.withLock { $0.woken() }
                turn.append(body)
            }
            for body in turn where body.service(buffer: buffer, reads: Self.readsPerTurn) {
                again.append(body)
            }
        }
        finished.signal()
    }
}
