import Foundation
import Testing
@testable import LifecycleService

/// One test per defect of the HTTP layer found in review (each failed before the fix),
/// written against the HTTP interface only.
@Suite("HTTP layer regressions")
struct HTTPRegressionTests {
    /// The instance ids in the list, so a test can see that nothing appeared or vanished.
    static func ids(_ c: HTTPConnection) throws -> [String] {
        let items = try c.request("GET", "/v1/instances").json["items"] as? [[String: Any]] ?? []
        return items.compactMap { $0["id"] as? String }
    }

    @Test("a NUL or any byte not allowed in an id, anywhere in the decoded path or query, is 400 and acts on nothing")
    func nulInPath() throws {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("victim", events: ["didFinishLaunching"])
        let victim = try c.request("GET", "/v1/instances/victim").body

        let cases: [(method: String, target: String)] = [
            ("DELETE", "/v1/instances/victim%00.not-this-one"),
            ("PUT", "/v1/instances/ba%00se"),
            ("GET", "/index.html%00.txt"),
            ("POST", "/v1/instances/victim%00x/relaunches"),
            ("PUT", "/v1/instances/.."),
            ("PUT", "/v1/instances/%2e"),
            ("PUT", "/v1/instances/caf%C3%A9"),
            ("GET", "/v1/instances?state=initializing%00x"),
        ]
        for (method, target) in cases {
            let response = try server.connect().request(method, target, body: method == "GET" ? nil : [], contentType: nil)
            #expect(response.status == 400, "\(method) \(target)")
            #expect(response.header("content-type") == "application/problem+json", "\(method) \(target)")
        }
        let created = try c.request("POST", "/v1/instances", json: #"{"id": ".."}"#)
        #expect(created.status == 422, "the ids . and .. could never be named in a path")
        #expect(try c.request("GET", "/v1/instances/victim").body == victim)
        #expect(try Self.ids(c) == ["victim"])
    }

    @Test("ambiguous framing is 400 (or 501) and closes: no smuggled second request runs")
    func smuggling() throws {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("victim")
        let smuggled = "DELETE /v1/instances/victim HTTP/1.1\r\nHost: x\r\n\r\n"
        let attempts = [
            // Two Content-Lengths: the first used to win, and the rest of the body ran as a request.
            "POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: \(2 + smuggled.utf8.count)\r\n\r\n{}" + smuggled,
            // Chunked and Content-Length, kept alive: the body ended at the empty chunk.
            "POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: \(5 + smuggled.utf8.count)\r\n\r\n0\r\n\r\n" + smuggled,
        ]
        for attempt in attempts {
            let raw = try RawSocket(port: server.port)
            raw.send(attempt)
            let response = try raw.readResponse()
            #expect(response.status == 400 && response.header("connection")?.lowercased() == "close")
            #expect(raw.waitForClose(within: 10))
            #expect(raw.readAll(within: 1).isEmpty, "no second response")
        }
        #expect(try c.request("GET", "/v1/instances/victim").status == 200)
        #expect(try Self.ids(c) == ["victim"])

        // A bad Content-Length gets one answer, not its header block twice.
        for length in ["-1", "+2", "2, 2"] {
            let raw = try RawSocket(port: server.port)
            raw.send("POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n{}")
            let text = String(decoding: raw.readAll(within: 10), as: UTF8.self)
            #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "Content-Length: \(length): \(text)")
            #expect(text.hasPrefix("HTTP/1.1 400 "), "Content-Length: \(length)")
        }

        // An unknown transfer coding is 501 at once, not a connection held for a minute.
        let gzip = try RawSocket(port: server.port)
        gzip.send("POST /v1/instances HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")
        let refused = try? gzip.readResponse(within: 5)
        #expect(refused?.status == 501 && refused?.header("content-type") == "application/problem+json")
        #expect(try Self.ids(c) == ["victim"])
    }

    @Test("one client address cannot hold every connection: past its limit it is refused at once, others are served")
    func perClientLimit() throws {
        let server = try TestServer()
        // 300 connections from one address, each sending a request: at most the default
        // limit (256) are served, the rest are closed without an answer.
        let sockets = try (0..<300).map { _ in try RawSocket(port: server.port, from: "127.0.0.7") }
        for socket in sockets { socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") }
        var statuses: [Int: Int] = [:]
        var refused = 0
        var hanging = 0
        for socket in sockets {
            if let response = try? socket.readResponse(within: 20) {
                statuses[response.status, default: 0] += 1
            } else if socket.isClosed {
                refused += 1
            } else {
                hanging += 1
            }
        }
        let served = statuses[200, default: 0]
        #expect(served <= 256 && served > 0, "\(statuses)")
        #expect(refused >= 300 - 256, "closed without an answer: \(refused); answered: \(statuses)")
        #expect(hanging == 0, "no client is left hanging")
        let other = try RawSocket(port: server.port, from: "127.0.0.8")
        other.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try other.readResponse().status == 200)
    }

    @Test("errors of the HTTP layer are problem+json; absolute-form targets, If-Match lists and If-Match on DELETE work")
    func httpLayerErrors() throws {
        let server = try TestServer()
        let c = try server.connect()
        let cases: [(request: String, status: Int)] = [
            ("POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
            ("POST /v1/instances HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
            ("GET /\(String(repeating: "a", count: 9000)) HTTP/1.1\r\nHost: x\r\n\r\n", 414),
            ("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 17000))\r\n\r\n", 431),
        ]
        for (request, status) in cases {
            let raw = try RawSocket(port: server.port)
            raw.send(request)
            let response = try raw.readResponse()
            #expect(response.status == status)
            #expect(response.header("content-type") == "application/problem+json", "\(status)")
            #expect(response.json["status"] as? Int == status)
        }

        let absolute = try RawSocket(port: server.port)
        absolute.send("GET http://127.0.0.1:\(server.port)/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try absolute.readResponse().status == 200)

        try c.makeInstance("app", events: ["didFinishLaunching"])
        let listed = try c.event("app", #"{"event": "willConnectToWindow", "window": "w"}"#, headers: [("If-Match", #""0", "1""#)])
        #expect(listed.status == 200 && listed.json["version"] as? Int == 2)
        #expect(try c.event("app", #"{"event": "didBecomeActive"}"#, headers: [("If-Match", #""0", W/"2""#)]).status == 412)
        #expect(try c.request("DELETE", "/v1/instances/app", headers: [("If-Match", #""1""#)]).status == 412)
        #expect(try c.request("GET", "/v1/instances/app").status == 200)
        #expect(try c.request("DELETE", "/v1/instances/app", headers: [("If-Match", #""7", "2""#)]).status == 204)
        #expect(try c.request("GET", "/v1/instances/app").status == 404)
    }
}
