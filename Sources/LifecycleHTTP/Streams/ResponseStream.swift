import LifecycleLocks

/// A response body written over time, such as an event stream: the server asks it for bytes
/// whenever the connection can take more, and holds no thread for it in between.
///
/// The server calls ``start(waker:)`` once, then ``read(into:)`` on its stream writer thread
/// (never twice at once for one stream), then ``finish()`` once. A stream with nothing to
/// send answers ``StreamRead/wait`` and is read again once it calls ``StreamWaker/wake()``.
/// A wake that comes while a read is running is not lost: the stream is read again after it.
///
/// Locks: the server holds none of its own locks while it calls `start` and `finish`, and
/// only the stream's own writing state while it calls `read`; ``StreamWaker/wake()`` takes
/// only the waker's lock and the writer's list of due streams, neither held while a stream
/// method runs. So a stream may take its own lock in `read` and `finish` and may call
/// `wake()` while holding that lock (a hub publishing to its subscribers under its lock, for instance).
public protocol ResponseStream: AnyObject, Sendable {
    /// Called once, before the first read, with what wakes the connection after a `.wait`.
    /// The stream may call `wake()` from here on, from any thread, even within this call.
    func start(waker: StreamWaker)
    /// Writes up to `buffer.count` bytes at the front of `buffer`. The buffer is the stream
    /// writer's (32 KiB), so a stream should write as many pending events as fit: they leave
    /// in one send (for HTTP/1.1, one chunk).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead
    /// The connection is over: the stream ended, the peer went away, or the server is
    /// stopping. Called exactly once, after ``start(waker:)``, once the server no longer
    /// reads; the waker is already disconnected. Free what the stream holds.
    func finish()
}

/// What a ``ResponseStream`` did when asked for bytes.
public enum StreamRead: Sendable, Equatable {
    /// Wrote this many bytes (more than zero, at most the buffer's size); it may have more.
    case wrote(Int)
    /// Wrote this many bytes, as `wrote`, and has nothing more now: as after `wait`, it is
    /// read again once woken (which saves a read that would only answer `wait`).
    case wroteAll(Int)
    /// Has nothing to send now: suspend until woken.
    case wait
    /// Has sent everything: end the response (for HTTP/1.1, the last chunk of a chunked body).
    case end
}

/// Wakes a stream's connection once the stream has bytes again. Safe from any thread, any
/// number of times, also after the connection is gone or the server has stopped (then it
/// does nothing). Make the bytes readable first, then wake.
///
/// `init` is the server's; streams only call `wake()`.
public final class StreamWaker: Sendable {
    private let action: LockedValue<(@Sendable () -> Void)?>

    /// `action` tells the server the stream has bytes; ``disconnect()`` drops it.
    public init(_ action: @escaping @Sendable () -> Void) {
        self.action = LockedValue(action)
    }

    /// A waker that does nothing until ``connect(_:)``.
    init() {
        action = LockedValue(nil)
    }

    /// Sets what a wake does.
    func connect(_ action: @escaping @Sendable () -> Void) {
        self.action.withLock { $0 = action }
    }

    /// Runs the action under the lock, so that once ``disconnect()`` has returned no wake is
    /// still touching the connection (which may by then serve another request).
    ///
    /// This cannot deadlock: the action takes only the stream writer's list lock, under which
    /// nothing else is taken, and the server disconnects wakers holding no lock of its own.
    public func wake() {
        action.withLock { $0?() }
    }

    /// After this returns, ``wake()`` does nothing and none is running: the connection is gone.
    public func disconnect() {
        action.withLock { $0 = nil }
    }
}
