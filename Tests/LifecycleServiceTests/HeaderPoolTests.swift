import Foundation
import LifecycleLog
import LifecycleHTTP
import LifecycleTestSupport
import Testing

/// libmicrohttpd's per-connection memory pool is sized from the header limit
/// (``ServerConfiguration/connectionMemory``): a head as large as the limit allows must fit
/// in it with its fields and the answer's head, at the default limit and a raised one.
@Suite("Header limit and the connection memory pool")
struct HeaderPoolTests {
    /// A GET head of exactly `size` bytes (request line to the blank line's end), with
    /// `fields` header fields besides Host and the padding one.
    static func head(size: Int, fields: Int) -> String {
        var head = "GET /probe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for i in 0..<fields { head += "X-Field-\(i): value-\(i)\r\n" }
        head += "X-Pad: "
        let padding = size - head.utf8.count - 4
        precondition(padding > 0)
        return head + String(repeating: "p", count: padding) + "\r\n\r\n"
    }

    @Test("the largest head the header limit allows is served on a kept-alive connection, one byte more is 431 problem+json", arguments: [16 * 1024, 40 * 1024])
    func largestHead(maxHeaderSize: Int) throws {
        var router = Router()
        router.get("/probe") { _ in Response(status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok".utf8)) }
        let server = HTTPServer(
            configuration: ServerConfiguration(port: 0, threads: 1, maxHeaderSize: maxHeaderSize), logger: LineLogger(level: .error),
            pipeline: Pipeline(router: router)
        )
        try server.start()
        defer { server.stop() }

        let client = try WireClient(port: server.port)
        for fields in [0, 20, 60] {
            // Twice on one connection: the second follows the pool's reset.
            for _ in 0..<2 {
                client.send(Self.head(size: maxHeaderSize, fields: fields))
                let response = try client.readResponse()
                #expect(response.status == 200, "\(fields) fields")
                #expect(response.body == Array("ok".utf8))
            }
        }
        let over = try WireClient(port: server.port)
        over.send(Self.head(size: maxHeaderSize + 1, fields: 20))
        let refused = try over.readResponse()
        #expect(refused.status == 431)
        #expect(refused.header("content-type") == "application/problem+json")
        #expect(refused.json["detail"] as? String == "the request line and header fields are larger than \(maxHeaderSize) bytes")
    }
}
