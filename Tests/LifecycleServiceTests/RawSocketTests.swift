import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// Bad input over raw sockets: truncated and pipelined requests, smuggling variants, NUL
/// and invalid UTF-8, deep JSON, slow senders and connection floods. After each, nothing
/// has changed and the server still answers a valid request.
@Suite("raw sockets")
struct RawSocketTests {
    static let smuggled = "DELETE /v1/instances/victim HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    /// A server with one instance, `victim`, that no test may change.
    static func server(_ configure: (inout Configuration) -> Void = { _ in }) throws -> (TestServer, [UInt8]) {
        let server = try TestServer(configure: configure)
        // Through the router: a set-up connection the server has not yet seen closed would
        // hold a slot the connection-limit tests count as free.
        let c = server.router()
        try c.makeInstance("victim", events: ["didFinishLaunching"])
        return (server, try c.request("GET", "/v1/instances/victim").body)
    }

    /// The victim is as it was, no other instance exists, and a valid request is answered.
    static func expectUnharmed(_ server: TestServer, _ victim: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let c = try server.connect()
        #expect(try c.request("GET", "/v1/instances/victim").body == victim, sourceLocation: sourceLocation)
        #expect(try HTTPRegressionTests.ids(c) == ["victim"], sourceLocation: sourceLocation)
        #expect(try c.request("GET", "/healthz").status == 200, sourceLocation: sourceLocation)
    }

    /// Sends `request` on a fresh connection, whose answer closes it; returns every response
    /// received until the server closed (or 10 seconds passed).
    static func exchange(_ server: TestServer, _ request: [UInt8]) throws -> (responses: [HTTPResponse], isClosed: Bool) {
        let raw = try WireClient(port: server.port)
        raw.send(request)
        let isClosed = raw.waitForClose(within: 10)
        var responses: [HTTPResponse] = []
        while let response = try? raw.readResponse(within: 0) { responses.append(response) }
        return (responses, isClosed)
    }

    @Test("smuggling variants: one answer, the connection closed, nothing run", arguments: [
        ("Content-Length: 2\r\nContent-Length: 3", 400),
        ("Content-Length: 2, 3", 400),
        ("Content-Length: 2, 2", 400),
        ("Content-Length: -1", 400),
        ("Content-Length: +2", 400),
        ("Content-Length: 0x2", 400),
        ("Content-Length: ", 400),
        ("Content-Length: 99999999999999999999999", 413),
        ("Content-Length: 1000000", 413),
        ("Transfer-Encoding: chunked\r\nContent-Length: 2", 400),
        ("Content-Length: 2\r\nTransfer-Encoding: chunked", 400),
        ("Transfer-Encoding: chunked, chunked", 400),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", 400),
        ("Transfer-Encoding: gzip, chunked", 501),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", 501),
        ("Transfer-Encoding: gzip", 501),
        ("Transfer-Encoding: identity", 501),
        ("Transfer-Encoding: ,", 400),
    ])
    func smugglingVariants(framing: String, status: Int) throws {
        let (server, victim) = try Self.server()
        let request = "POST /v1/instances HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\(framing)\r\n\r\n0\r\n\r\n\(Self.smuggled)"
        let (responses, isClosed) = try Self.exchange(server, Array(request.utf8))
        #expect(responses.map(\.status) == [status])
        #expect(responses.first?.header("content-type") == "application/problem+json")
        #expect(isClosed)
        try Self.expectUnharmed(server, victim)
    }

    @Test("Transfer-Encoding in an HTTP/1.0 request is refused; chunked with spaces is fine")
    func transferEncodingEdges() throws {
        let (server, victim) = try Self.server()
        let old = try Self.exchange(server, Array("POST /v1/instances HTTP/1.0\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".utf8))
        #expect(old.responses.map(\.status) == [400] && old.isClosed)
        try Self.expectUnharmed(server, victim)

        let raw = try WireClient(port: server.port)
        raw.send("PUT /v1/instances/spaced HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding:  Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        #expect(try raw.readResponse().status == 201)
        // A trailing space made libmicrohttpd read the body to the end of the connection.
        let spaced = try Self.exchange(server, Array("PUT /v1/instances/spaced HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked \r\n\r\n0\r\n\r\n".utf8))
        #expect(spaced.responses.map(\.status) == [400] && spaced.isClosed)
    }

    @Test("a bad Content-Length whose headers come after another client's request is still answered once, as problem+json")
    func badLengthAfterAnotherRequest() throws {
        // One daemon thread, so both clients are on it: the refused header block is not the
        // request line that thread parsed last.
        let (server, victim) = try Self.server { $0.threads = 1 }
        let slow = try WireClient(port: server.port)
        slow.send("POST /v1/instances HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        let other = try WireClient(port: server.port)
        #expect(other.exchangeHealth() == 200)
        slow.send("Content-Length: 2, 2\r\n\r\n{}")
        let text = String(decoding: slow.readAll(within: 10), as: UTF8.self)
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "\(text)")
        #expect(text.hasPrefix("HTTP/1.1 400 ") && text.contains("application/problem+json"), "\(text)")
        #expect(other.exchangeHealth() == 200)
        try Self.expectUnharmed(server, victim)
    }

    @Test("pipelined requests are answered in order on one connection")
    func pipelined() throws {
        let (server, _) = try Self.server()
        let raw = try WireClient(port: server.port)
        let event = #"{"event": "didFinishLaunching"}"#
        raw.send(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                + "PUT /v1/instances/piped HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
                + "POST /v1/instances/piped/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(event.utf8.count)\r\n\r\n\(event)"
                + "GET /v1/instances/piped HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                + "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        )
        #expect(try raw.readResponse().status == 200)
        #expect(try raw.readResponse().status == 201)
        #expect(try raw.readResponse().status == 200)
        let piped = try raw.readResponse()
        #expect(piped.status == 200 && piped.json["version"] as? Int == 1)
        #expect(try raw.readResponse().status == 404)
    }

    @Test("the whitespace after a header's value is not the value's (framing reads them as sent); lines of one name are one field")
    func headerValues() throws {
        let (server, victim) = try Self.server()
        let raw = try WireClient(port: server.port)
        let body = #"{"id":"spaced"}"#
        func create(_ headers: String) throws -> HTTPResponse {
            raw.send("POST /v1/instances HTTP/1.1\r\nHost: 127.0.0.1 \r\nContent-Type: application/json\t\r\n\(headers)Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return try raw.readResponse()
        }
        let made = try create("Idempotency-Key: k-1 \t\r\n")
        #expect(made.status == 201, "\(made.text)")
        #expect(try create("Idempotency-Key: k-1\r\n").body == made.body, "the same key: answered as first")
        let two = try create("Idempotency-Key: k-2\r\nIdempotency-Key: k-3\r\n")
        #expect(two.status == 400 && two.header("content-type") == "application/problem+json", "two keys, as one line listing both: \(two.text)")
        raw.send("DELETE /v1/instances/spaced HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-Match: \"9\"\r\nIf-Match: \"0\" \r\n\r\n")
        let deleted = try raw.readResponse()
        #expect(deleted.status == 204, "one If-Match listing both versions: \(deleted.text)")
        try Self.expectUnharmed(server, victim)
    }

    @Test("truncated requests: the connection ends, nothing is created")
    func truncated() throws {
        // libmicrohttpd misses the end of a connection that sends a partial request line and
        // closes at once; the request deadline ends it.
        let (server, victim) = try Self.server { $0.requestTimeout = 1 }
        let pieces = [
            "PUT /v1/instances/half",
            "PUT /v1/instances/half HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",
            "PUT /v1/instances/half HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"model\":",
            "PUT /v1/instances/half HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mod",
        ]
        for piece in pieces {
            let raw = try WireClient(port: server.port)
            raw.send(piece)
            raw.finishSending()
            #expect(raw.waitForClose(within: 10), "\(piece)")
        }
        try Self.expectUnharmed(server, victim)
    }

    @Test("NUL, invalid UTF-8, spaces, bad escapes and dot segments in the target are 400", arguments: [
        "/v1/instances/vic%00tim", "/v1/instances/%C3%28", "/v1/instances/victim%FF", "/v1/instances/a%20b", "/v1/instances/a%2", "/v1/instances/a%zz",
        "/v1/instances/victim/../victim", "/v1/instances/./victim", "/js/%2e%2e/%2e%2e/secret.txt", "/index.html%00.txt", "/v1/instances/a~b",
        "/v1/instances?state=%00", "/v1/instances?state=%FF", "/v1/instances?state=a%0Ab", "/v1/instances?state=%4", "victim", "*",
    ])
    func badTargets(target: String) throws {
        let (server, victim) = try Self.server()
        // The framing is sound, so the connection stays usable: a request after it is answered.
        let raw = try WireClient(port: server.port)
        raw.send("DELETE \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let refused = try raw.readResponse()
        #expect(refused.status == 400 && refused.header("content-type") == "application/problem+json")
        #expect(try raw.readResponse().status == 200)
        try Self.expectUnharmed(server, victim)
    }

    @Test("raw bytes outside ASCII in the target are 400; UTF-8 in a query value is fine")
    func rawBytesInTarget() throws {
        let (server, victim) = try Self.server()
        for bytes: [UInt8] in [[0xFF], [0xC3, 0xA9], [0x01], [0x7F]] {
            let raw = try WireClient(port: server.port)
            raw.send(Array("DELETE /v1/instances/victim".utf8) + bytes + Array(" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            #expect(try raw.readResponse().status == 400, "\(bytes)")
        }
        let c = try server.connect()
        let utf8 = try c.request("GET", "/v1/instances?cursor=caf%C3%A9")
        #expect(utf8.status == 200 && (utf8.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["victim"])
        try Self.expectUnharmed(server, victim)
    }

    @Test("bodies with NUL, invalid UTF-8 or deep nesting are 400")
    func badBodies() throws {
        let (server, victim) = try Self.server()
        let c = try server.connect()
        let bodies: [[UInt8]] = [
            Array(#"{"event": "didBecome"#.utf8) + [0] + Array(#"Active"}"#.utf8),
            Array(#"{"event": "didBecomeActive"}"#.utf8) + [0],
            Array(#"{"event": "didBecomeActive", "x": ""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8),
            Array(#"{"event": "didBecomeActive", "x": ""#.utf8) + [0xFF] + Array(#""}"#.utf8),
            Array(repeating: UInt8(ascii: "["), count: 20_000) + Array(repeating: UInt8(ascii: "]"), count: 20_000),
            Array(#"{"event": "didBecomeActive", "x": "#.utf8) + Array(repeating: UInt8(ascii: "{"), count: 10_000),
        ]
        for body in bodies {
            let response = try c.request("POST", "/v1/instances/victim/events", body: body)
            #expect(response.status == 400, "\(String(decoding: body.prefix(40), as: UTF8.self))")
            #expect(response.header("content-type") == "application/problem+json")
        }
        try Self.expectUnharmed(server, victim)
    }

    @Test("slow senders are cut at the request deadline; a late body gets 408; an idle connection is closed")
    func slowSenders() throws {
        let (server, victim) = try Self.server { $0.requestTimeout = 1 }

        // A header a tenth of a second, for ever: closed once the request deadline passes.
        let headers = try WireClient(port: server.port)
        headers.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        var isCut = false
        for line in 0..<200 where !isCut {
            headers.send("X-Slow-\(line): y\r\n")
            isCut = headers.waitForClose(within: 0.1)
        }
        #expect(isCut, "a trickle of headers keeps no connection open")

        // A body a byte at a time: answered 408, then closed.
        let body = try WireClient(port: server.port)
        body.send("PUT /v1/instances/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        var isClosed = false
        for _ in 0..<200 where !isClosed {
            body.send(" ")
            isClosed = body.waitForClose(within: 0.1)
        }
        #expect(isClosed)
        let late = try body.readResponse(within: 1)
        #expect(late.status == 408 && late.header("content-type") == "application/problem+json")

        // Idle after a request: the next request's deadline runs from the response.
        let idle = try WireClient(port: server.port)
        idle.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try idle.readResponse().status == 200)
        #expect(idle.waitForClose(within: 10))
        #expect(idle.readAll(within: 0).isEmpty, "an idle connection is closed without an answer")

        try Self.expectUnharmed(server, victim)
        #expect(try server.connect().request("GET", "/v1/instances/slow").status == 404)
    }

    @Test("a connection flood from several addresses: the limits hold, the rest are refused at once, then service resumes")
    func flood() throws {
        let (server, victim) = try Self.server {
            $0.maxConnections = 32
            $0.maxConnectionsPerClient = 12
        }
        let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
        var sockets: [(source: String, socket: WireClient)] = []
        for index in 0..<240 {
            let source = sources[index % sources.count]
            sockets.append((source, try WireClient(port: server.port, source: source)))
        }
        for (_, socket) in sockets { socket.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }
        var served: [String: Int] = [:]
        var refused = 0
        for (source, socket) in sockets {
            if let response = try? socket.readResponse(within: 10), response.status == 200 {
                served[source, default: 0] += 1
            } else if socket.isClosed {
                refused += 1
            }
        }
        let total = served.values.reduce(0, +)
        #expect(total == 32, "every free slot is used, and no more: \(served)")
        #expect(served.values.allSatisfy { $0 <= 12 }, "\(served)")
        #expect(refused == 240 - total, "every other client was refused, none left hanging")

        // The slots are freed as the clients go.
        sockets.removeAll()
        #expect(eventually { (try? WireClient(port: server.port, source: "127.0.0.2").exchangeHealth()) == 200 })
        try Self.expectUnharmed(server, victim)
    }
}

extension WireClient {
    /// The status of `GET /healthz` on this connection, or nil if refused.
    func exchangeHealth() -> Int? {
        send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return try? readResponse(within: 5).status
    }
}
