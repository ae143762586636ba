import Testing
@testable import LifecycleHTTP

/// The stream writer's per-body decisions, without a socket: when it reads, sends, waits
/// and hands the connection back.
@Suite("stream output")
struct StreamOutputTests {
    /// A body handed over (HTTP/1.1 unless `chunked` is false).
    static func handedOver(chunked: Bool = true) -> StreamOutput {
        var output = StreamOutput()
        output.handedOver(chunked: chunked)
        return output
    }

    /// Reports a read of `count` bytes of which the socket took `sent`.
    static func wrote(_ output: inout StreamOutput, _ count: Int, sent: Int) {
        output.read(.wrote(count))
        let framed = Self.framed(output, [UInt8](repeating: 0x61, count: count))
        framed.withUnsafeBytes { output.sentRead(sent, of: $0) }
    }

    /// `bytes` as `output` frames them, in a buffer laid out as the writer's.
    static func framed(_ output: StreamOutput, _ bytes: [UInt8]) -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: StreamBody.framing + bytes.count + 2)
        buffer.replaceSubrange(StreamBody.framing..<(StreamBody.framing + bytes.count), with: bytes)
        let range = buffer.withUnsafeMutableBytes { output.frame(count: bytes.count, at: StreamBody.framing, in: $0) }
        return Array(buffer[range])
    }

    @Test("nothing is read before the hand-over; then the stream is read until it waits, and again when woken")
    func readsUntilWait() {
        var output = StreamOutput()
        output.woken()
        #expect(output.next() == .wait)
        output.handedOver(chunked: true)
        #expect(output.next() == .read)
        Self.wrote(&output, 10, sent: 15)
        // It may have had more than fitted.
        #expect(output.next() == .read)
        output.read(.wait)
        #expect(output.next() == .wait)
        output.woken()
        #expect(output.next() == .read)
        output.read(.wait)
        #expect(output.next() == .wait)
    }

    @Test("a wake during a read makes the stream read again after it")
    func wakeDuringRead() {
        var output = Self.handedOver()
        #expect(output.next() == .read)
        output.woken()
        output.read(.wait)
        #expect(output.next() == .read)
    }

    @Test("each read is one chunk for HTTP/1.1, bare for HTTP/1.0")
    func framing() {
        let chunked = Self.handedOver()
        let data = [UInt8](repeating: 0x61, count: 0x1F4)
        #expect(Self.framed(chunked, data) == Array("1f4\r\n".utf8) + data + Array("\r\n".utf8))
        #expect(Self.framed(chunked, [0x62]) == Array("1\r\nb\r\n".utf8))
        let largest = [UInt8](repeating: 0x61, count: StreamWriter.bufferSize)
        #expect(Self.framed(chunked, largest) == Array("8000\r\n".utf8) + largest + Array("\r\n".utf8))
        let bare = Self.handedOver(chunked: false)
        #expect(Self.framed(bare, data) == data)
    }

    @Test("what the socket does not take is kept and sent first once it is writable; the stream is not read meanwhile")
    func partialSend() {
        var output = Self.handedOver()
        _ = output.next()
        Self.wrote(&output, 100, sent: 40)  // of 106 framed bytes
        #expect(output.unsent.count == 66)
        output.woken()
        #expect(output.next() == .wait, "blocked: neither read nor sent until writable")
        output.writable()
        #expect(output.next() == .send)
        output.sent(30)
        #expect(output.next() == .wait)
        output.writable()
        #expect(output.next() == .send)
        output.wouldBlock()
        #expect(output.next() == .wait)
        output.writable()
        #expect(output.next() == .send)
        output.sent(36)
        #expect(output.unsent.isEmpty)
        #expect(output.next() == .read)
    }

    @Test("the stream's end, or the server stopping, hands back cleanly once what is left is sent")
    func cleanEnd() {
        var ended = Self.handedOver()
        _ = ended.next()
        ended.read(.end)
        #expect(ended.next() == .handBack(clean: true))
        #expect(ended.next() == .wait)

        var stopping = Self.handedOver()
        _ = stopping.next()
        Self.wrote(&stopping, 100, sent: 50)
        stopping.end()
        #expect(stopping.next() == .wait)
        stopping.writable()
        #expect(stopping.next() == .send)
        stopping.sent(56)
        #expect(stopping.next() == .handBack(clean: true))

        // Stopped before the hand-over: ends as soon as it is handed over, unread.
        var early = StreamOutput()
        early.end()
        #expect(early.next() == .wait)
        early.handedOver(chunked: true)
        #expect(early.next() == .handBack(clean: true))
    }

    @Test("a peer gone with bytes left, or a failed send, hands back to fail; a peer gone with nothing left still gets the clean end")
    func peerGone() {
        var blocked = Self.handedOver()
        _ = blocked.next()
        Self.wrote(&blocked, 100, sent: 0)
        blocked.end(peerGone: true)
        #expect(blocked.next() == .handBack(clean: false))
        #expect(blocked.next() == .wait)

        var idle = Self.handedOver()
        _ = idle.next()
        idle.read(.wait)
        idle.end(peerGone: true)
        #expect(idle.next() == .handBack(clean: true))

        var failed = Self.handedOver()
        _ = failed.next()
        failed.sendFailed()
        #expect(failed.next() == .handBack(clean: false))
        #expect(failed.next() == .wait)
    }

    @Test("a closed body does nothing more, whatever comes")
    func closed() {
        var output = Self.handedOver()
        output.close()
        output.woken()
        output.writable()
        output.end(peerGone: true)
        output.sendFailed()
        #expect(output.next() == .wait)
    }
}
