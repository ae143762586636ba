import Synchronization

/// A response body written over time, such as an event stream: the server asks it for bytes
/// whenever the connection can take more, and holds no thread for it in between.
///
/// The server calls ``read(into:)`` on one of its threads, never twice at once for one
/// stream. A stream with nothing to send answers ``StreamRead/wait``; the server then
/// suspends the connection until the stream calls ``StreamWaker/wake()``.
public protocol ResponseStream: AnyObject, Sendable {
    /// Called once, before the first read, with what wakes the connection after a `.wait`.
    func start(waker: StreamWaker)
    /// Writes up to `buffer.count` bytes at the front of `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead
    /// The connection is over: the stream ended, the peer went away, or the server is
    /// stopping. Called exactly once; free what the stream holds.
    func finish()
}

/// What a ``ResponseStream`` did when asked for bytes.
public enum StreamRead: Sendable, Equatable {
    /// Wrote this many bytes (more than zero).
    case wrote(Int)
    /// Has nothing to send now: suspend until woken.
    case wait
    /// Has sent everything: end the response.
    case end
}

/// Wakes a stream's connection once the stream has bytes again. Safe from any thread, any
/// number of times, also after the connection is gone (then it does nothing).
/// `init` is the server's; streams only call `wake()`.
public final class StreamWaker: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    /// `action` resumes the connection; ``disconnect()`` drops it.
    public init(_ action: @escaping @Sendable () -> Void) {
        self.action = Mutex(action)
    }

    /// Runs the action under the lock, so that once ``disconnect()`` has returned no wake is
    /// still touching the connection.
    public func wake() {
        action.withLock { $0?() }
    }

    /// After this returns, ``wake()`` does nothing and none is running: the connection is gone.
    public func disconnect() {
        action.withLock { $0 = nil }
    }
}
