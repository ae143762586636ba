import Foundation
import LifecycleTestSupport
import Testing

/// The tests' own machinery: the router harness answers as the server does over the wire,
/// and the one chunked decoder reads a body however it is cut.
@Suite("test harness")
struct HarnessTests {
    /// What only the wire adds or varies: libmicrohttpd's framing and date, a fresh request id.
    static let wireOnly: Set<String> = ["date", "content-length", "connection", "x-request-id", "transfer-encoding"]

    static func comparable(_ response: HTTPResponse) -> [String] {
        response.headers.filter { !wireOnly.contains($0.name.lowercased()) }.map { "\($0.name.lowercased()): \($0.value)" }.sorted()
    }

    @Test("RouterClient answers as the server does over the wire: status, headers and body, refusals and HEAD included")
    func routerMatchesTheWire() throws {
        let server = try TestServer { $0.token = "s3cret.T0ken_for-tests~" }
        let router = server.router()
        let token = [("Authorization", "Bearer s3cret.T0ken_for-tests~")]
        #expect(try router.request("PUT", "/v1/instances/app", headers: token, body: [], contentType: nil).status == 201)
        let etag = try #require(try server.connect().request("GET", "/v1/instances/app").header("etag"))
        let requests: [(String, String, [(String, String)], String?)] = [
            ("GET", "/healthz", [], nil),
            ("GET", "/v1/models/ios-app", [], nil),
            ("HEAD", "/v1/models/ios-app", [], nil),
            ("GET", "/v1/instances/app", [("If-None-Match", etag)], nil),
            ("GET", "/v1/instances?limit=0", [], nil),
            ("GET", "/%2e%2e/secret.txt", [], nil),
            ("PATCH", "/v1/instances/app", [], nil),
            ("GET", "/v1/nothing", [], nil),
            ("POST", "/v1/instances/app/events", [], #"{"event": "willConnectToWindow", "window": "w"}"#),
            ("PUT", "/v1/instances/app", token, #"{"model": "android-activity"}"#),
            ("POST", "/v1/instances/app/events", token, #"{"event": "didExplode"}"#),
            ("GET", "/js/app.js", [], nil),
        ]
        // Each request changes nothing, so that both answers can be alike.
        for (method, path, headers, json) in requests {
            let body = json.map { Array($0.utf8) }
            // A connection each: a refusal before the body closes its connection.
            let overWire = try server.connect().request(method, path, headers: headers, body: body)
            let direct = try router.request(method, path, headers: headers, body: body)
            #expect(direct.status == overWire.status, "\(method) \(path)")
            #expect(direct.body == overWire.body, "\(method) \(path)")
            #expect(Self.comparable(direct) == Self.comparable(overWire), "\(method) \(path)")
        }
    }

    @Test("a chunked body decodes the same however its bytes are split; a broken frame is malformed, a short one incomplete")
    func chunkedDecoder() {
        let body = Array("5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n".utf8)
        for step in [1, 2, 3, 7, body.count] {
            var decoder = ChunkedDecoder()
            var unread: [UInt8] = []
            var payload: [UInt8] = []
            for start in stride(from: 0, to: body.count, by: step) {
                unread += body[start..<min(start + step, body.count)]
                payload += decoder.decode(&unread)
            }
            #expect(String(decoding: payload, as: UTF8.self) == "hello world!", "step \(step)")
            #expect(decoder.hasEnded && !decoder.isMalformed && unread.isEmpty && decoder.chunkSizes == [5, 1, 6], "step \(step)")
        }
        let head = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let whole = HTTPResponse.parse(head + body)
        #expect(whole?.status == 200 && whole?.isComplete == true && whole?.chunks.map { $0.count } == [5, 1, 6] && whole?.text == "hello world!")
        let short = HTTPResponse.parse(head + Array("5\r\nhello\r\n6\r\nwor".utf8))
        #expect(short?.isComplete == false && short?.isMalformed == false && short?.chunks.count == 1 && short?.text == "hello")
        let broken = HTTPResponse.parse(head + Array("5\r\nhelloXX6\r\nworld!\r\n".utf8))
        #expect(broken?.isMalformed == true && broken?.isComplete == false)
        #expect(HTTPResponse.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8)) == nil, "no head before the blank line")
    }
}
