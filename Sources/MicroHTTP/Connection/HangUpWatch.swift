import CMicroHTTPD
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Notices that a streaming connection's peer has closed, while the stream is idle.
///
/// libmicrohttpd does not watch a suspended connection's socket, nor read one it is sending
/// a response on, so a peer that closed would be found only when its stream next writes (a
/// heartbeat, maybe a minute later): until then its connection counts against the client's
/// connection limit and its stream against the subscriber limit. This watch holds one epoll
/// set with the socket of every connection whose response is a stream, each registered for
/// `EPOLLRDHUP` alone, once: the peer's FIN (or a reset, which also brings `EPOLLHUP` and
/// `EPOLLERR`) reports it, while bytes the client sends (a pipelined request) report
/// nothing and stay for libmicrohttpd. A report ends the connection's stream (see
/// ``ConnectionMachine/peerClosed()``).
///
/// Owns the epoll descriptor, an eventfd that stops its thread, and the thread.
final class HangUpWatch: Sendable {
    private let epoll: Int32
    private let stopping: Int32
    /// Signalled as the thread ends, which `stop()` waits for.
    private let finished = DispatchSemaphore(value: 0)
    /// The connections watched, by the key their registration carries (a counter, never
    /// reused, so that a report read just before its connection was unwatched finds nothing).
    private let watched = Mutex<(next: UInt64, contexts: [UInt64: ConnectionContext])>((1, [:]))
    private let logger: Logger

    /// Key of the eventfd's registration.
    private static let stopKey: UInt64 = 0

    init(logger: Logger) throws(ServerError) {
        self.logger = logger
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw .socket(operation: "epoll_create1", code: errno) }
        stopping = eventfd(0, Int32(EFD_CLOEXEC))
        guard stopping >= 0 else {
            let code = errno
            close(epoll)
            throw .socket(operation: "eventfd", code: code)
        }
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: Self.stopKey))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, stopping, &event) == 0 else {
            let code = errno
            close(stopping)
            close(epoll)
            throw .socket(operation: "epoll_ctl", code: code)
        }
        let thread = Thread { [self] in run() }
        thread.name = "lifecycled-http-hangups"
        thread.start()
    }

    deinit {
        close(stopping)
        close(epoll)
    }

    /// Starts watching `context`'s socket; returns the key to unwatch it with (0 if it cannot
    /// be watched: then its close is found at its next write, as without the watch).
    func watch(_ context: ConnectionContext) -> UInt64 {
        let key = watched.withLock { watched in
            defer { watched.next += 1 }
            watched.contexts[watched.next] = context
            return watched.next
        }
        let flags = EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
        var event = epoll_event(events: flags, data: epoll_data_t(u64: key))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, context.descriptor, &event) == 0 else {
            logger.warning("cannot watch a stream's connection for its client closing", ["error": String(cString: strerror(errno))])
            _ = watched.withLock { $0.contexts.removeValue(forKey: key) }
            return 0
        }
        return key
    }

    /// Stops watching the connection `key` names. Called while its socket is still open
    /// (libmicrohttpd closes it only after the stream is finished), so that the number is
    /// not another connection's yet.
    func unwatch(_ key: UInt64) {
        guard key != 0, let context = watched.withLock({ $0.contexts.removeValue(forKey: key) }) else { return }
        // Also when it has reported: a one-shot registration stays, disabled, until deleted.
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, context.descriptor, nil)
    }

    /// Ends the thread; call once, after the daemon has stopped.
    func stop() {
        var one: UInt64 = 1
        _ = write(stopping, &one, MemoryLayout<UInt64>.size)
        finished.wait()
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), -1)
            if count < 0 {
                if errno == EINTR { continue }
                logger.error("the watch for streams' clients closing failed; closes are found at the next write", ["error": String(cString: strerror(errno))])
                break
            }
            let keys = events.prefix(Int(count)).map(\.data.u64)
            if keys.contains(Self.stopKey) { break }
            // Each reports once (one-shot); one unwatched meanwhile is no longer found.
            let closed = watched.withLock { watched in keys.compactMap { watched.contexts[$0] } }
            for context in closed { context.peerClosed() }
        }
        finished.signal()
    }
}
