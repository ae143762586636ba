import CLifecycleMicroHTTPD
import LifecycleLog
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// A streamed body as libmicrohttpd sees it: a callback response of unknown size (chunked
/// for HTTP/1.1 clients, delimited by the connection's close for HTTP/1.0 ones), written by
/// the server's ``StreamWriter``.
///
/// libmicrohttpd calls the reader once the head is sent: the reader suspends the connection
/// and hands the body over to the writer (returning 0, as libmicrohttpd allows), which from
/// then on reads the ``ResponseStream`` and writes its bytes to the socket itself, framed as
/// libmicrohttpd would have. A suspended connection is neither polled nor timed out by
/// libmicrohttpd, so it costs none of its threads' time. When the body ends (the stream
/// ended, the server stops, the peer closed, a send failed) the writer resumes the
/// connection once, and the reader's next call ends the body: the last chunk, or an abrupt
/// close. A peer that vanished without a word (no FIN or reset ever comes back) is found at
/// the stream's next write (its heartbeat): the kernel gives the connection up once written
/// data stays unacknowledged for the connection timeout (`TCP_USER_TIMEOUT`), and the send
/// after that fails.
///
/// Owned by the libmicrohttpd response (retained as the reader's context) and released by
/// its free callback, which libmicrohttpd calls exactly once, after the request's
/// completion callback and before it closes the socket, however the connection ends.
final class StreamBody: Sendable {
    let stream: any ResponseStream
    private let context: ConnectionContext
    let waker: StreamWaker
    private let logger: LineLogger
    private let writer: StreamWriter
    /// Its key in `writer`.
    let key: UInt64
    /// How far the body is, as the writer sends it.
    let output = LockedValue(StreamOutput())
    /// On the writer's list of bodies to service (so a burst of wakes puts it there once).
    let isDue = LockedValue(false)
    var descriptor: Int32 { context.descriptor }

    /// Bytes before a read in the writer's buffer: room for the longest chunk head (`8000\r\n`).
    static let framing = 8

    /// libmicrohttpd's buffer for the reader, which the reader never fills: the writer reads
    /// into its own. (Allocated for every stream, so kept small.)
    private static let blockSize = 64

    private init(stream: any ResponseStream, context: ConnectionContext, key: UInt64, writer: StreamWriter, logger: LineLogger) {
        self.stream = stream
        self.context = context
        self.key = key
        self.writer = writer
        self.logger = logger
        waker = StreamWaker()
        // A cycle (body, waker, action) that `finish()` breaks by disconnecting the waker.
        waker.connect { [self] in writer.wake(self) }
        writer.register(self)
    }

    /// Keys of bodies, never reused: a writer's report about a body gone finds nothing.
    private static let keys = LockedValue<UInt64>(0)

    /// Starts `stream` and makes the libmicrohttpd response that hands it to one of `writers`, for
    /// the caller to queue on `context`'s connection and then destroy (libmicrohttpd keeps its
    /// own reference). `nil` if libmicrohttpd could not make it (then the stream is finished).
    /// `unacknowledgedSeconds` (when above 0) bounds how long the kernel keeps trying to
    /// deliver to a silent peer.
    static func response(
        _ stream: any ResponseStream, on context: ConnectionContext, unacknowledgedSeconds: Int, writers: [StreamWriter], logger: LineLogger
    ) -> OpaquePointer? {
        if unacknowledgedSeconds > 0 {
            var milliseconds = UInt32(clamping: unacknowledgedSeconds * 1000)
            setsockopt(context.descriptor, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &milliseconds, socklen_t(MemoryLayout<UInt32>.size))
        }
        let key = keys.withLock { $0 += 1; return $0 }
        // Streams are spread over the writers in turn.
        let writer = writers[Int(key % UInt64(writers.count))]
        let body = StreamBody(stream: stream, context: context, key: key, writer: writer, logger: logger)
        stream.start(waker: body.waker)
        let retained = Unmanaged.passRetained(body)
        guard let response = MHD_create_response_from_callback(lc_size_unknown, blockSize, streamReader, retained.toOpaque(), streamFreed) else {
            retained.release()
            body.finish()
            return nil
        }
        return response
    }

    /// libmicrohttpd wants bytes in `buffer`: the first time, the body is handed over (0);
    /// after the writer handed it back, the end of the body.
    fileprivate func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        switch context.streamWillRead() {
        case .handOver(let chunked):
            Self.release(buffer)
            output.withLock { $0.handedOver(chunked: chunked) }
            // Nothing is sent with the head's last bytes unless pushed: the events go out at once.
            var one: Int32 = 1
            setsockopt(context.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if !writer.handedOver(self) {
                output.withLock { $0.close() }
                context.handBackStream(clean: false)
            }
            return 0
        case .end:
            return lc_content_reader_end_of_stream
        case .fail:
            return lc_content_reader_end_with_error
        }
    }

    /// Gives the pages of `buffer` back to the kernel. libmicrohttpd 0.9.75 offers a chunked
    /// body's reader the free rest of the connection's memory pool (see `connectionMemory`; zeroed by
    /// it as the request's read buffer shrank, so resident), which it never fills while the
    /// writer owns the body: the pages wholly inside it are only the reader's to write, and
    /// read back as zeros if touched again (as libmicrohttpd does for the last chunk).
    private static func release(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let start = (UInt(bitPattern: base) + page - 1) / page * page
        let end = (UInt(bitPattern: base) + UInt(buffer.count)) / page * page
        guard end > start else { return }
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), Int(end - start), MADV_DONTNEED)
    }

    /// One turn of the writer on this body (on its thread): reads the stream and sends, up to
    /// `reads` reads, until it waits or is handed back. `buffer` is the writer's. Returns
    /// whether it has more to read now (its turn ran out).
    func service(buffer: UnsafeMutableRawBufferPointer, reads: Int) -> Bool {
        output.withLock { output in
            var reads = reads
            while true {
                switch output.next() {
                case .wait:
                    return false
                case .handBack(let clean):
                    context.handBackStream(clean: clean)
                    return false
                case .send:
                    let result = output.unsent.withUnsafeBytes { send($0) }
                    switch result {
                    case nil: output.close()
                    case .some(.sent(let count)): output.sent(count)
                    case .some(.wouldBlock): output.wouldBlock()
                    case .some(.failed): output.sendFailed()
                    }
                case .read:
                    guard reads > 0 else {
                        // Due still: its next turn reads.
                        output.woken()
                        return true
                    }
                    reads -= 1
                    let room = UnsafeMutableRawBufferPointer(rebasing: buffer[StreamBody.framing..<(buffer.count - 2)])
                    let result = stream.read(into: room)
                    if let count = result.count {
                        guard count > 0, count <= room.count else {
                            logger.error("stream wrote a wrong count; closing its connection", ["count": String(count), "buffer": String(room.count)])
                            output.sendFailed()
                            continue
                        }
                        output.read(result)
                        let framed = UnsafeRawBufferPointer(rebasing: buffer[output.frame(count: count, at: StreamBody.framing, in: buffer)])
                        switch send(framed) {
                        case nil: output.close()
                        case .some(.sent(let sent)): output.sentRead(sent, of: framed)
                        case .some(.wouldBlock): output.sentRead(0, of: framed)
                        case .some(.failed): output.sendFailed()
                        }
                    } else {
                        output.read(result)
                    }
                }
            }
        }
    }

    private enum SendResult {
        case sent(Int)
        case wouldBlock
        case failed
    }

    /// Sends `bytes` without blocking, while the writer owns the connection (`nil` once it does not).
    private func send(_ bytes: UnsafeRawBufferPointer) -> SendResult? {
        context.whileStreamOwned {
            while true {
                let sent = Glibc.send(context.descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                if sent >= 0 { return .sent(sent) }
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return .wouldBlock
                default: return .failed
                }
            }
        }
    }

    /// The connection is done with the stream: the writer lets go of it, no wake reaches it
    /// any more, then it is finished.
    fileprivate func finish() {
        // Before libmicrohttpd closes the socket, whose number may then be reused.
        writer.remove(self)
        waker.disconnect()
        stream.finish()
    }
}

extension StreamRead {
    /// The bytes a read wrote, if it wrote any.
    var count: Int? {
        switch self {
        case .wrote(let count), .wroteAll(let count): count
        case .wait, .end: nil
        }
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
