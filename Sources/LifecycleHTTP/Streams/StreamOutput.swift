/// One streamed body as the server's ``StreamWriter`` sends it: whether to read the stream,
/// send what is left of the last read, wait, or hand the connection back to libmicrohttpd.
/// Each input is one mutating function; ``next()`` says what the writer must do, and the
/// writer reports the outcome (`read`, `sent`, `wouldBlock`, `sendFailed`). No I/O: the
/// writer owns the socket and the buffer the stream reads into.
///
/// The stream is read only when nothing of the last read is left to send, so a peer that
/// does not read holds at most one read's bytes here; the stream itself (a hub subscription)
/// sees it fall behind and applies its own limit. Each read goes out as one send (for
/// HTTP/1.1 one chunk, framed here); what the socket does not take is kept and sent first
/// once the socket is writable again.
struct StreamOutput {
    private enum State {
        /// libmicrohttpd has not handed the body over yet (it is sending the head): nothing
        /// is read or sent. `ending` when the stream must end as soon as it is.
        case awaitingHandOver(ending: Bool)
        /// The stream said it has nothing; it is read again when woken.
        case idle
        /// Woken (or just handed over): read the stream once nothing is left to send.
        case due
        /// The stream ended, or must (the server stops, the peer closed): send what is left,
        /// then hand the connection back for a clean end.
        case ending
        /// A send failed, or the peer is gone with bytes left unsent: hand back for an abrupt end.
        case failing
        /// Handed back, or given up: nothing more.
        case over
    }

    /// What the writer does next.
    enum Step: Equatable {
        /// Send ``unsent`` to the socket, then report ``sent(_:)``, ``wouldBlock()`` or ``sendFailed()``.
        case send
        /// Read the stream into the writer's buffer, then report ``read(_:)``; if it wrote
        /// bytes, send them framed by ``frame(count:)`` and report ``sentRead(_:of:)``.
        case read
        /// Nothing until a wake, a writable socket, or an end.
        case wait
        /// Resume the connection: libmicrohttpd ends the body cleanly (`clean`) or closes it.
        case handBack(clean: Bool)
    }

    private var state: State = .awaitingHandOver(ending: false)
    /// Framed bytes of the last read the socket did not take, from `sentCount` on.
    private var left: [UInt8] = []
    private var sentCount = 0
    /// The last send did not take everything: wait for the socket to be writable.
    private var isBlocked = false
    /// The peer closed its side (or reset): bytes it does not take are not waited for.
    private var isPeerGone = false
    /// Whether each read is sent as an HTTP/1.1 chunk (else as is: an HTTP/1.0 body ends with the connection).
    private var isChunked = true

    /// What is left to send, for ``Step/send``.
    var unsent: ArraySlice<UInt8> { left[sentCount...] }

    // MARK: inputs

    /// libmicrohttpd has sent the head and suspended the connection: the body is the writer's.
    mutating func handedOver(chunked: Bool) {
        guard case .awaitingHandOver(let ending) = state else { return }
        isChunked = chunked
        state = ending ? .ending : .due
    }

    /// The stream has bytes again.
    mutating func woken() {
        if case .idle = state { state = .due }
    }

    /// The socket can take bytes again.
    mutating func writable() {
        isBlocked = false
    }

    /// The body must end: the server is stopping, or (`peerGone`) the peer closed its side.
    /// A peer that only half-closed still gets the clean end, if the socket takes it.
    mutating func end(peerGone: Bool = false) {
        isPeerGone = isPeerGone || peerGone
        switch state {
        case .awaitingHandOver: state = .awaitingHandOver(ending: true)
        case .idle, .due: state = .ending
        case .ending, .failing, .over: break
        }
    }

    /// The connection is gone (its response freed) or no longer the writer's: nothing more.
    mutating func close() {
        state = .over
        left = []
        sentCount = 0
    }

    // MARK: the writer's loop

    mutating func next() -> Step {
        switch state {
        case .over, .awaitingHandOver:
            return .wait
        case .failing:
            state = .over
            return .handBack(clean: false)
        case .idle, .due, .ending:
            break
        }
        if sentCount < left.count {
            guard isBlocked else { return .send }
            guard isPeerGone else { return .wait }
            // Closed with bytes it will never read: there is no clean end to send.
            state = .over
            return .handBack(clean: false)
        }
        switch state {
        case .due:
            // A wake that comes during the read makes it due again.
            state = .idle
            return .read
        case .ending:
            state = .over
            return .handBack(clean: true)
        default:
            return .wait
        }
    }

    /// The stream answered ``Step/read``. For `.wrote(count)` or `.wroteAll(count)` the writer sends the bytes
    /// framed by ``frame(count:)`` next and reports ``sentRead(_:of:)``.
    mutating func read(_ result: StreamRead) {
        guard case .idle = state else { return }
        switch result {
        // It may have more than fitted: read again once these are out.
        case .wrote: state = .due
        case .wait, .wroteAll: break
        case .end: state = .ending
        }
    }

    /// Frames a read of `count` bytes at `start` in `buffer` (as one chunk, for HTTP/1.1):
    /// writes the chunk's head just before them and its end just after, and returns where the
    /// framed bytes begin and end. `start` must leave room for the head (``StreamBody/framing``).
    func frame(count: Int, at start: Int, in buffer: UnsafeMutableRawBufferPointer) -> Range<Int> {
        guard isChunked else { return start..<(start + count) }
        buffer[start + count] = 0x0D
        buffer[start + count + 1] = 0x0A
        var head = start - 2
        buffer[head] = 0x0D
        buffer[head + 1] = 0x0A
        var rest = count
        repeat {
            head -= 1
            buffer[head] = Self.hexDigits[rest & 0xF]
            rest >>= 4
        } while rest > 0
        return head..<(start + count + 2)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A framed read was sent: the socket took `sent` of its bytes, all of `framed`.
    mutating func sentRead(_ sent: Int, of framed: UnsafeRawBufferPointer) {
        guard sent < framed.count else { return }
        left = Array(framed[sent...])
        sentCount = 0
        isBlocked = true
    }

    /// The socket took `count` bytes of ``unsent``.
    mutating func sent(_ count: Int) {
        sentCount += count
        if sentCount >= left.count {
            // All out: give the memory back, an idle stream holds none.
            left = []
            sentCount = 0
        } else {
            isBlocked = true
        }
    }

    /// The socket takes nothing now.
    mutating func wouldBlock() {
        isBlocked = true
    }

    /// The send failed (the peer reset, or the kernel gave up on it): the connection closes.
    mutating func sendFailed() {
        left = []
        sentCount = 0
        if case .over = state { return }
        state = .failing
    }
}
