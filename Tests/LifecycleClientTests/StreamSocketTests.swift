import Foundation
@testable import LifecycleClient
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The plain-socket transport of `http://` streams (``StreamSocket``): its reading of an
/// answer however the bytes are cut, and its end when the reader goes away.
@Suite("LifecycleClient stream socket")
struct StreamSocketTests {
    /// Feeds `answer` to a reader cut at `cut` (and closed after it when `closes`); its messages as text.
    private func read(_ answer: String, cut: Int, closes: Bool = false) throws -> (head: [String], body: String, complete: Bool) {
        var reader = HTTPStreamReader()
        let bytes = Array(answer.utf8)
        var messages = try reader.feed(bytes[..<cut], ended: false)
        messages += try reader.feed(bytes[cut...], ended: closes)
        var head: [String] = [], body = Data()
        for message in messages {
            switch message {
            case .opened(let status, let headers): head.append("\(status) \(headers["X-Kind"] ?? "")")
            case .data(let data): body.append(data)
            case .finished: Issue.record("a reader never finishes by itself")
            }
        }
        return (head, String(decoding: body, as: UTF8.self), reader.isComplete)
    }

    @Test("an answer reads the same cut at any byte: chunked, of a Content-Length, or to the connection's end")
    func framing() throws {
        let chunked = "HTTP/1.1 200 OK\r\nX-Kind: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nid: 1\r\nA;ext=1\r\n\ndata: {}\n\r\n0\r\n\r\n"
        let sized = "HTTP/1.1 401 Unauthorized\r\nX-Kind: sized\r\nContent-Length: 11\r\n\r\n{\"x\":\"y\"}\r\n"
        let closing = "HTTP/1.1 200 OK\r\nX-Kind: closing\r\n\r\n: open\n\n"
        for cut in 0...chunked.utf8.count {
            let read = try read(chunked, cut: cut)
            #expect(read.head == ["200 chunked"] && read.body == "id: 1\ndata: {}\n" && read.complete, "cut at \(cut): \(read)")
        }
        for cut in 0...sized.utf8.count {
            let read = try read(sized, cut: cut)
            #expect(read.head == ["401 sized"] && read.body == "{\"x\":\"y\"}\r\n" && read.complete, "cut at \(cut): \(read)")
        }
        for cut in 0...closing.utf8.count {
            let open = try read(closing, cut: cut)
            #expect(open.body == ": open\n\n" && !open.complete, "open until the connection ends: \(open)")
            #expect(try read(closing, cut: cut, closes: true).complete)
        }
        var reader = HTTPStreamReader()
        #expect(throws: HTTPStreamReader.Malformed.self) { try reader.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8)[...], ended: false) }
        reader = HTTPStreamReader()
        #expect(throws: HTTPStreamReader.Malformed.self) { try reader.feed(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)[...], ended: false) }
    }

    @Test("a stream whose reader is cancelled closes its connection at once, though the service sends nothing")
    func cancelledReaderCloses() async throws {
        let listener = try LoopbackListener()
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:\(listener.port)")!, timeout: 60))
        let reader = Task {
            var iterator = client.records(after: 0).makeAsyncIterator()
            return try await iterator.next()
        }
        // Each blocking call off the pool: the reader's task must be free to run meanwhile.
        let fd = listener.fd
        let peer = await offThePool { accept(fd, nil, nil) }
        #expect(peer >= 0)
        defer { close(peer) }
        #expect(await offThePool {
            var head = [UInt8](repeating: 0, count: 8192)
            return recv(peer, &head, head.count, 0)
        } > 0)
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n: open\n\n\r\n".utf8)
        #expect(answer.withUnsafeBytes { send(peer, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) } == answer.count)
        reader.cancel()
        // The reader's end shuts the socket: the peer reads its end, long before the 60 s timeout.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let (read, error) = await offThePool {
            var byte: UInt8 = 0
            return (recv(peer, &byte, 1, 0), errno)
        }
        #expect(read == 0, "the connection ended: \(String(cString: strerror(error)))")
        await #expect(throws: CancellationError.self) { try await reader.value }
    }
}
