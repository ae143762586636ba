import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService
@testable import LifecycleLog
@testable import LifecycleHTTP

/// Request ids and the one log line per request, on the real executable.
@Suite("request ids and access logs")
struct RequestLogTests {
    @Test("a valid X-Request-ID is echoed and written in the request's log line; an invalid one is replaced")
    func requestIDs() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        defer { server.signal(SIGTERM); server.finish() }
        let connection = try WireClient(port: server.port)

        let kept = try connection.request("GET", "/v1/models/ios-app", headers: [("X-Request-ID", "trace-4bf92f35.00f0:7")])
        #expect(kept.header("x-request-id") == "trace-4bf92f35.00f0:7")
        let line = server.waitForLogLine(containing: ["request_id=trace-4bf92f35.00f0:7"])
        #expect(line?.contains("level=info msg=request method=GET route=/v1/models/{model} status=200 duration_ms=") == true, "\(line ?? "no line")")
        #expect(line?.contains(" bytes=\(kept.body.count) ") == true, "\(line ?? "no line")")
        #expect(line?.contains("client=127.0.0.1") == true, "\(line ?? "no line")")

        for offered in ["has space", String(repeating: "a", count: RequestIDs.maxLength + 1), "quote\"", ""] {
            let replaced = try connection.request("GET", "/healthz", headers: [("X-Request-ID", offered)])
            let id = try #require(replaced.header("x-request-id"))
            #expect(id != offered && RequestIDs.isValid(id), "offered \(offered.debugDescription), got \(id)")
        }
        // Generated ids differ from one request to the next.
        let first = try connection.request("GET", "/healthz").header("x-request-id")
        let second = try connection.request("GET", "/healthz").header("x-request-id")
        #expect(first != nil && first != second)
    }

    @Test("the lines a write makes carry its request id: instance created, unexpected event")
    func writeNotes() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        defer { server.signal(SIGTERM); server.finish() }
        let connection = try WireClient(port: server.port)
        #expect(try connection.request("PUT", "/v1/instances/noted", json: "{}", headers: [("X-Request-ID", "make-it")]).status == 201)
        #expect(try connection.event("noted", #"{"event": "didBecomeActive"}"#, headers: [("X-Request-ID", "odd-one")]).status == 409)
        let created = server.waitForLogLine(containing: ["msg=\"instance created\"", "request_id=make-it"])
        #expect(created?.contains("id=noted") == true, "\(server.standardErrorSoFar)")
        let unexpected = server.waitForLogLine(containing: ["msg=\"unexpected event\"", "request_id=odd-one"])
        #expect(unexpected?.contains("event=didBecomeActive") == true, "\(server.standardErrorSoFar)")
    }

    @Test("refusals get a request id and a line too: the server's own (route -) and a 404's (route *)")
    func refusalsAreLogged() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        defer { server.signal(SIGTERM); server.finish() }
        let connection = try WireClient(port: server.port)
        let bad = try connection.request("GET", "/v1/instances/a%00b", headers: [("X-Request-ID", "bad-target")])
        #expect(bad.status == 400 && bad.header("x-request-id") == "bad-target")
        let line = server.waitForLogLine(containing: ["request_id=bad-target"])
        #expect(line?.contains("method=GET route=- status=400") == true, "\(line ?? "no line")")

        let missing = try connection.request("GET", "/nothing/here", headers: [("X-Request-ID", "not-found")])
        #expect(missing.status == 404)
        let missingLine = server.waitForLogLine(containing: ["request_id=not-found"])
        #expect(missingLine?.contains("route=* status=404") == true, "\(missingLine ?? "no line")")
    }

    @Test("--log-format json writes one JSON object per line with the same members")
    func jsonLines() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--log-format", "json"])
        defer { server.signal(SIGTERM); server.finish() }
        _ = try WireClient(port: server.port).request("GET", "/healthz", headers: [("X-Request-ID", "json-line")])
        let line = try #require(server.waitForLogLine(containing: ["json-line"]))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["msg"] == "request" && object["level"] == "info" && object["route"] == "/healthz" && object["status"] == "200")
        #expect(object["request_id"] == "json-line" && object["time"] != nil && object["duration_ms"] != nil)
        // Every line is JSON, the start-up line too.
        for line in server.standardErrorSoFar.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: String], "\(line)")
        }
    }

    @Test("a value never breaks a logfmt line or forges a key", arguments: [
        ("plain", "plain"), ("", "\"\""), ("two words", "\"two words\""), ("a=b", "\"a=b\""),
        ("line\nbreak", "\"line\\nbreak\""), ("say \"hi\"", "\"say \\\"hi\\\"\""), ("back\\slash", "\"back\\\\slash\""), ("bell\u{7}", "\"bell\\u0007\""),
        // What a terminal or viewer would act on or hide: C1 controls, bidi overrides and
        // isolates, marks, zero-widths, separators, a format character past the BMP.
        ("csi\u{9B}2J", "\"csi\\u009b2J\""), ("abc\u{202E}fed", "\"abc\\u202efed\""), ("\u{2066}x\u{2069}", "\"\\u2066x\\u2069\""),
        ("l\u{200E}r\u{200F}", "\"l\\u200er\\u200f\""), ("zero\u{200B}width\u{FEFF}", "\"zero\\u200bwidth\\ufeff\""),
        ("para\u{2029}", "\"para\\u2029\""), ("tag\u{E0041}", "\"tag\\udb40\\udc41\""), ("naïve✓日本", "naïve✓日本"),
    ])
    func logfmtValues(value: String, written: String) {
        #expect(LineLogger.logfmtValue(value) == written)
        let line = LineLogger(format: .logfmt).line(.info, "m", [("k", value)], time: Date(timeIntervalSince1970: 0))
        #expect(line == "time=1970-01-01T00:00:00.000Z level=info msg=m k=\(written)\n")
        let json = LineLogger(format: .json).line(.info, "m", [("k", value)], time: Date(timeIntervalSince1970: 0))
        let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: String]
        #expect(object?["k"] == value)
    }

    @Test("a value a client sent is clipped to 256 bytes of whole characters, with a marker giving its length")
    func clippedValues() {
        #expect(LineLogger.clipped("short") == "short")
        let exact = String(repeating: "a", count: LineLogger.maxClientValueBytes)
        #expect(LineLogger.clipped(exact) == exact)
        #expect(LineLogger.clipped(exact + "b") == exact + "…[257 bytes]")
        // A character is never cut in two: 85 three-byte characters fit in 256 bytes, not 86.
        #expect(LineLogger.clipped(String(repeating: "日", count: 100)) == String(repeating: "日", count: 85) + "…[300 bytes]")
    }

    @Test("a client's method is logged as the metrics name it (other past the usual ones), however long or odd, a 431's too")
    func clientMethods() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        defer { server.signal(SIGTERM); server.finish() }
        // Past the 16 KiB header limit (431), within the connection's memory pool, which is
        // sized from that limit (ServerConfiguration.connectionMemory): the server answers it.
        let long = String(repeating: "M", count: 20_000)
        for (n, method) in ["BREW", "GET\u{202E}TEG", String(repeating: "M", count: 5_000), long].enumerated() {
            let raw = try WireClient(port: server.port)
            raw.send("\(method) /healthz HTTP/1.1\r\nHost: x\r\nX-Request-ID: method-\(n)\r\n\r\n")
            let response = try raw.readResponse()
            let line = try #require(server.waitForLogLine(containing: ["msg=request", "request_id=method-\(n) "]), "\(server.standardErrorSoFar.suffix(2000))")
            #expect(line.contains(" method=other route=") && line.contains(" status=\(response.status) "), "\(line.prefix(300))")
            #expect(line.utf8.count < 400, "\(line.utf8.count) bytes")
            if method == long { #expect(response.status == 431) }
        }
        let everything = server.standardErrorSoFar
        #expect(!everything.unicodeScalars.contains("\u{202E}") && !everything.contains(String(repeating: "M", count: 300)))
    }
}
