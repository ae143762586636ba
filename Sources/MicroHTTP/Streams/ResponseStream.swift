import Synchronization

/// A response body written over time, such as an event stream: the server asks it for bytes
/// whenever the connection can take more, and holds no thread for it in between.
///
/// The server calls ``start(waker:)`` once, then ``read(into:)`` on one of its threads (never
/// twice at once for one stream), then ``finish()`` once. A stream with nothing to send
/// answers ``StreamRead/wait``; the server then suspends the connection until the stream
/// calls ``StreamWaker/wake()``. A wake that comes while a read is running is not lost: the
/// server reads again instead of suspending.
///
/// Locks: the server holds none of its own locks while it calls these methods, and
/// ``StreamWaker/wake()`` takes only the server's per-connection lock and libmicrohttpd's
/// resume lock, neither of which is held while a stream method runs. So a stream may take
/// its own lock in `read` and `finish` and may call `wake()` while holding that lock (a hub
/// publishing to its subscribers under its lock, for instance).
public protocol ResponseStream: AnyObject, Sendable {
    /// Called once, before the first read, with what wakes the connection after a `.wait`.
    /// The stream may call `wake()` from here on, from any thread, even within this call.
    func start(waker: StreamWaker)
    /// Writes up to `buffer.count` bytes at the front of `buffer`. The buffer is the
    /// connection's whole free write buffer (about 30 KiB with libmicrohttpd's defaults), so
    /// a stream should write as many pending events as fit: they leave in one send.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead
    /// The connection is over: the stream ended, the peer went away, or the server is
    /// stopping. Called exactly once, after ``start(waker:)``, once the server no longer
    /// reads; the waker is already disconnected. Free what the stream holds.
    func finish()
}

/// What a ``ResponseStream`` did when asked for bytes.
public enum StreamRead: Sendable, Equatable {
    /// Wrote this many bytes (more than zero, at most the buffer's size).
    case wrote(Int)
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
    private let action: Mutex<(@Sendable () -> Void)?>

    /// `action` resumes the connection; ``disconnect()`` drops it.
    public init(_ action: @escaping @Sendable () -> Void) {
        self.action = Mutex(action)
    }

    /// Runs the action under the lock, so that once ``disconnect()`` has returned no wake is
    /// still touching the connection (which may by then serve another request).
    ///
    /// This cannot deadlock against libmicrohttpd: resuming takes its per-thread cleanup
    /// lock, under which libmicrohttpd 0.9.75 calls back into no application code, and the
    /// server disconnects wakers holding no lock of its own.
    public func wake() {
        action.withLock { $0?() }
    }

    /// After this returns, ``wake()`` does nothing and none is running: the connection is gone.
    public func disconnect() {
        action.withLock { $0 = nil }
    }
}
