import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

@Suite("bodies end with a newline")
struct ResponseNewlineTests {
    /// Every kind of JSON and problem+json body the service sends, each from its own code
    /// path: encoded values, instances rendered for reads and for writes, records (as answered
    /// and as replayed for an Idempotency-Key), history pages, refusals by handlers, by the
    /// committer and by the connection itself.
    @Test("every JSON and problem body is one line of JSON ending with a newline; a 204 has no body")
    func everyBody() throws {
        let server = try TestServer { $0.maxBodySize = 1024 }
        let c = try server.connect()
        let key = [("Idempotency-Key", "k-1")]
        var answers: [(String, HTTPResponse)] = []
        func send(_ label: String, _ method: String, _ path: String, json: String? = nil, headers: [(String, String)] = []) throws {
            let response = if let json {
                try c.request(method, path, json: json, headers: headers)
            } else {
                try c.request(method, path, headers: headers)
            }
            answers.append((label, response))
        }
        try send("health", "GET", "/healthz")
        try send("models", "GET", "/v1/models")
        try send("model", "GET", "/v1/models/ios-app")
        try send("put 201", "PUT", "/v1/instances/a", json: "{}")
        try send("put 200", "PUT", "/v1/instances/a", json: "{}")
        try send("post 201", "POST", "/v1/instances", json: "{}", headers: key)
        try send("post 201 replayed", "POST", "/v1/instances", json: "{}", headers: key)
        try send("list", "GET", "/v1/instances")
        try send("instance", "GET", "/v1/instances/a")
        try send("event", "POST", "/v1/instances/a/events", json: #"{"event": "didFinishLaunching"}"#, headers: [("Idempotency-Key", "k-2")])
        try send("event replayed", "POST", "/v1/instances/a/events", json: #"{"event": "didFinishLaunching"}"#, headers: [("Idempotency-Key", "k-2")])
        try send("unexpected 409", "POST", "/v1/instances/a/events", json: #"{"event": "didBecomeActive"}"#)
        try send("action", "POST", "/v1/instances/a/actions", json: #"{"action": "openURL", "url": "https://example.com"}"#)
        try send("relaunch", "POST", "/v1/instances/a/relaunches", json: "{}")
        try send("history", "GET", "/v1/instances/a/history")
        try send("empty history", "GET", "/v1/instances/\(try #require(answers[5].1.json["id"] as? String))/history")
        try send("404", "GET", "/v1/nope")
        try send("405", "DELETE", "/v1/models")
        try send("400", "GET", "/v1/instances?state=nope")
        try send("400 stream", "GET", "/v1/stream?model=nope")
        try send("412", "POST", "/v1/instances/a/events", json: #"{"event": "didFinishLaunching"}"#, headers: [("If-Match", "\"99\"")])
        answers.append(("413", try server.connect().request("POST", "/v1/instances/a/events", json: #"{"event": "\#(String(repeating: "x", count: 2000))"}"#)))
        answers.append(("415", try server.connect().request("POST", "/v1/instances/a/events", body: Array("event".utf8), contentType: "text/plain")))
        try send("422", "POST", "/v1/instances/a/events", json: #"{"event": "didFinishLaunchin"}"#)
        try send("delete 204", "DELETE", "/v1/instances/a")
        // A refusal made by the connection, before any handler: a target over 8 KiB.
        answers.append(("414", try server.connect().request("GET", "/v1/instances/" + String(repeating: "x", count: 9000))))

        #expect(answers.map { $0.1.status } == [
            200, 200, 200, 201, 200, 201, 201, 200, 200, 200, 200, 409, 200, 200, 200, 200,
            404, 405, 400, 400, 412, 413, 415, 422, 204, 414,
        ])
        for (label, response) in answers where response.status != 204 {
            let type = response.header("content-type") ?? ""
            #expect(type == "application/json" || type == "application/problem+json", "\(label): \(type)")
            #expect(response.body.last == UInt8(ascii: "\n"), "\(label): \(response.text)")
            // One line: the newline ends the body and is the only one (JSON escapes any in strings).
            #expect(response.body.filter { $0 == UInt8(ascii: "\n") }.count == 1, "\(label): \(response.text)")
            #expect((try? JSONSerialization.jsonObject(with: Data(response.body))) is [String: Any], "\(label): \(response.text)")
        }
        let deleted = try #require(answers.last { $0.0 == "delete 204" }?.1)
        #expect(deleted.body.isEmpty)
        // A replay is the first answer byte for byte, newline included.
        #expect(answers[6].1.body == answers[5].1.body && answers[10].1.body == answers[9].1.body)
    }

    @Test("a record's answer is its history item and its stream data, with the newline that ends a body")
    func recordAnswerMatchesHistory() throws {
        let server = try TestServer()
        let c = server.router()
        try c.makeInstance("phone")
        let answered = try c.event("phone", #"{"event": "didFinishLaunching"}"#)
        let history = try c.request("GET", "/v1/instances/phone/history")
        let item = try #require(history.text.range(of: #"{"items":["#).map { history.text[$0.upperBound...] })
        let record = String(answered.text.dropLast())
        #expect(answered.text.hasSuffix("}\n"))
        #expect(item.hasPrefix(record + "]"))
    }
}
