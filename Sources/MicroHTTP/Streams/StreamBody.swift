import CMicroHTTPD
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A streamed body as libmicrohttpd sees it: a callback response of unknown size (chunked
/// for HTTP/1.1 clients, delimited by the connection's close for HTTP/1.0 ones) whose
/// reader asks the ``ResponseStream`` for bytes.
///
/// When the stream has nothing to send, the reader suspends the connection and returns 0,
/// as libmicrohttpd allows from a content reader; the waker resumes it, and libmicrohttpd
/// calls the reader again. A suspended connection is neither polled nor timed out by
/// libmicrohttpd, so it costs no thread and no wakeups; a peer that closes or resets the
/// connection is seen by the server's ``HangUpWatch``, which ends the stream, so
/// libmicrohttpd closes the connection and frees the response at once. A peer that vanished
/// without a word (no FIN or reset ever comes back) is found when the stream next writes
/// (its heartbeat): the kernel gives the connection up once written data stays
/// unacknowledged for the connection timeout (`TCP_USER_TIMEOUT`), and the send after that fails.
///
/// Owned by the libmicrohttpd response (retained as the reader's context) and released by
/// its free callback, which libmicrohttpd calls exactly once, after the request's
/// completion callback, however the connection ends: the stream ended, the peer went
/// away, a timeout, or the daemon stopping.
final class StreamBody {
    private let stream: any ResponseStream
    private let context: ConnectionContext
    private let waker: StreamWaker
    private let logger: Logger
    private let hangUps: HangUpWatch
    /// The connection's registration in `hangUps`, from the start to ``finish()``.
    private let watchKey: UInt64

    /// Bytes of the buffer libmicrohttpd reads into for an HTTP/1.0 client (no chunks).
    /// For HTTP/1.1, libmicrohttpd 0.9.75 reads chunks straight into the connection's write
    /// buffer, the free rest of its memory pool (32 KiB in all by default), so this size
    /// does not limit them; it is kept small because it is allocated for every stream.
    static let blockSize = 4096

    private init(stream: any ResponseStream, context: ConnectionContext, hangUps: HangUpWatch, logger: Logger) {
        self.stream = stream
        self.context = context
        self.hangUps = hangUps
        self.logger = logger
        waker = StreamWaker { [context] in context.wakeStream() }
        watchKey = hangUps.watch(context)
    }

    /// Starts `stream` and makes the libmicrohttpd response that reads it, for the caller
    /// to queue on `context`'s connection and then destroy (libmicrohttpd keeps its own
    /// reference). `nil` if libmicrohttpd could not make it (then the stream is finished).
    /// `unacknowledgedSeconds` (when above 0) bounds how long the kernel keeps trying to
    /// deliver to a silent peer. `hangUps` watches the connection for its peer closing from
    /// now on: the connection's machine already knows its response is a stream.
    static func response(
        _ stream: any ResponseStream, on context: ConnectionContext, unacknowledgedSeconds: Int, hangUps: HangUpWatch, logger: Logger
    ) -> OpaquePointer? {
        if unacknowledgedSeconds > 0 {
            var milliseconds = UInt32(clamping: unacknowledgedSeconds * 1000)
            setsockopt(context.descriptor, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &milliseconds, socklen_t(MemoryLayout<UInt32>.size))
        }
        let body = StreamBody(stream: stream, context: context, hangUps: hangUps, logger: logger)
        stream.start(waker: body.waker)
        let retained = Unmanaged.passRetained(body)
        guard let response = MHD_create_response_from_callback(lc_size_unknown, blockSize, streamReader, retained.toOpaque(), streamFreed) else {
            retained.release()
            body.finish()
            return nil
        }
        return response
    }

    /// libmicrohttpd wants bytes: up to `buffer.count`, or 0 (after suspending the
    /// connection), or the end of the body.
    fileprivate func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            switch context.machine.withLock({ $0.streamWillRead() }) {
            case .read: break
            case .end: return lc_content_reader_end_of_stream
            case .fail: return lc_content_reader_end_with_error
            }
            switch stream.read(into: buffer) {
            case .wrote(let count):
                guard count > 0, count <= buffer.count else {
                    logger.error("stream wrote a wrong count; closing its connection", ["count": String(count), "buffer": String(buffer.count)])
                    return lc_content_reader_end_with_error
                }
                return count
            case .end:
                return lc_content_reader_end_of_stream
            case .wait:
                switch context.streamWaits() {
                case .suspend: return 0
                case .readAgain: continue
                case .end: return lc_content_reader_end_of_stream
                case .fail: return lc_content_reader_end_with_error
                }
            }
        }
    }

    /// The connection is done with the stream: no wake reaches it any more, then it is finished.
    fileprivate func finish() {
        // Before libmicrohttpd closes the socket, whose number may then be reused.
        hangUps.unwatch(watchKey)
        waker.disconnect()
        stream.finish()
    }
}

private let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, size in
    guard let cls, let buffer else { return lc_content_reader_end_with_error }
    return Unmanaged<StreamBody>.fromOpaque(cls).takeUnretainedValue().read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size))
}

private let streamFreed: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<StreamBody>.fromOpaque(cls).takeRetainedValue().finish()
}
