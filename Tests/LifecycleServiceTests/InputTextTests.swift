import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// What an input's strings and times may hold, the same on both stores (issue 31, points 1
/// and 9): U+0000 is refused, every other character reads back as sent after a restart.
@Suite("input text: NUL, control characters and leap seconds")
struct InputTextTests {
    /// A server with `phone` in the foreground, on the pass's store.
    static func foreground() throws -> (TestServer, RouterClient) {
        let server = try TestServer()
        let c = server.router()
        try c.makeInstance("phone", events: coldStart)
        return (server, c)
    }

    /// The instance as stored: its JSON and its whole history, to show a refusal changed nothing.
    static func stored(_ c: RouterClient, _ id: String = "phone") throws -> String {
        try c.request("GET", "/v1/instances/\(id)").text + "\n" + c.request("GET", "/v1/instances/\(id)/history?limit=1000").text
    }

    /// Bodies with a NUL (`\u0000` in JSON) in each member that reaches the store, and the member the refusal names.
    static let nulBodies: [(path: String, body: String, member: String)] = [
        ("events", #"{"event": "willResignActive", "believedState": "fore\u0000ground"}"#, #""believedState""#),
        ("events", #"{"event": "willResignActive", "ranHooks": ["Foreground.willLeave", "a\u0000"]}"#, #""ranHooks"[1]"#),
        ("events", #"{"event": "willConnectToWindow", "window": "main\u0000two"}"#, #""window""#),
        ("events", #"{"event": "willResign\u0000Active"}"#, #""event""#),
        ("events", #"{"event": "willResignActive", "note\u0000": 1}"#, #"the name of member "note\u0000""#),
        ("actions", #"{"action": "openURL", "url": "https://duckduckgo.com/\u0000"}"#, #""url""#),
        ("relaunches", #"{"occurredAt": "2026-12-02T05:00:00Z\u0000"}"#, #""occurredAt""#),
    ]

    @Test("a NUL in any string of a single input is refused with 422 naming the member, and nothing is stored")
    func nulRefusedAlone() throws {
        let (_, c) = try Self.foreground()
        let before = try Self.stored(c)
        for (path, body, member) in Self.nulBodies {
            let answer = try c.request("POST", "/v1/instances/phone/\(path)", json: body, headers: [("Idempotency-Key", "nul-\(path)")])
            #expect(answer.status == 422, "\(body): \(answer.text)")
            #expect(answer.header("content-type") == "application/problem+json")
            #expect((answer.json["detail"] as? String)?.hasPrefix("\(member) holds U+0000") == true, "\(body): \(answer.text)")
        }
        #expect(try Self.stored(c) == before)
        // A create's model, on either create endpoint.
        let put = try c.request("PUT", "/v1/instances/other", json: #"{"model": "ios-app\u0000"}"#)
        #expect(put.status == 422 && (put.json["detail"] as? String)?.hasPrefix(#""model" holds U+0000"#) == true, "\(put.text)")
        let post = try c.request("POST", "/v1/instances", json: #"{"id": "other", "model": "ios-app\u0000"}"#)
        #expect(post.status == 422 && (post.json["detail"] as? String)?.hasPrefix(#""model" holds U+0000"#) == true, "\(post.text)")
        #expect(try c.request("GET", "/v1/instances/other").status == 404)
    }

    @Test("a NUL in a batch item is that item's 422 naming the member; the items around it are stored")
    func nulRefusedInBatch() throws {
        let (server, c) = try Self.foreground()
        var items = [BatchItemSpec(instance: "phone", kind: .event, body: #"{"event": "willResignActive"}"#, key: "first")]
        for (index, (path, body, _)) in Self.nulBodies.enumerated() {
            let kind: BatchItemSpec.Kind = path == "events" ? .event : path == "actions" ? .action : .launch
            items.append(BatchItemSpec(instance: "phone", kind: kind, body: body, key: "nul-\(index)"))
        }
        items.append(BatchItemSpec(instance: "phone", kind: .event, body: #"{"event": "didEnterBackground"}"#, key: "last"))
        items.append(BatchItemSpec(instance: "other", kind: .create, body: #"{"model": "ios-app\u0000"}"#))
        let answer = try c.request("POST", "/v1/batch", json: batchBody(items))
        #expect(answer.status == 200, "\(answer.text)")
        let results = try #require(answer.json["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? Int } == [200] + Self.nulBodies.map { _ in 422 } + [200, 422])
        for (index, (_, _, member)) in Self.nulBodies.enumerated() {
            let detail = (results[index + 1]["problem"] as? [String: Any])?["detail"] as? String
            #expect(detail?.hasPrefix("\(member) holds U+0000") == true, "\(detail ?? "")")
        }
        // Stored: the two good items and nothing of the others, and so after a restart.
        try server.restart()
        let events = try server.router().fullHistory("phone").compactMap { $0["event"] as? String }
        #expect(events == coldStart + ["willResignActive", "didEnterBackground"])
        #expect(try server.router().request("GET", "/v1/instances/other").status == 404)
    }

    /// Every C0 control but NUL, DEL, C1's NEL, the line and paragraph separators, a BOM and a
    /// character outside the BMP: what a device may send and must read back byte for byte.
    static let controls: String = {
        var text = "a"
        for scalar in (0x01...0x1F).map({ Unicode.Scalar($0)! }) { text.unicodeScalars.append(scalar) }
        text += "\u{7F}\u{85}\u{2028}\u{2029}\u{FEFF}\u{1F600}z"
        return text
    }()

    @Test("every other control character is stored and reads back byte for byte after a restart")
    func controlsKept() throws {
        let (server, c) = try Self.foreground()
        func json(_ text: String) -> String {
            String(decoding: try! JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed), as: UTF8.self)
        }
        let text = Self.controls
        let event = try c.event("phone", #"{"event": "willResignActive", "ranHooks": [\#(json(text))]}"#)
        #expect(event.status == 200, "\(event.text)")
        let action = try c.request("POST", "/v1/instances/phone/actions", json: #"{"action": "openURL", "url": \#(json("https://duckduckgo.com/" + text))}"#)
        #expect(action.status == 200, "\(action.text)")
        let batch = try c.request("POST", "/v1/batch", json: batchBody([
            BatchItemSpec(instance: "phone", kind: .event, body: #"{"event": "didEnterBackground"}"#),
            BatchItemSpec(instance: "phone", kind: .event, body: #"{"event": "willEnterForeground"}"#),
            BatchItemSpec(instance: "phone", kind: .event, body: #"{"event": "willConnectToWindow", "window": \#(json(text))}"#),
        ]))
        #expect((batch.json["results"] as? [[String: Any]])?.map { $0["status"] as? Int } == [200, 200, 200], "\(batch.text)")
        func check(_ records: [[String: Any]], _ when: String) {
            let last = records.suffix(5).map { $0 }
            #expect((last.first?["ranHooks"] as? [String]) == [text], "\(when)")
            #expect((last.dropFirst().first?["parameters"] as? [String: Any])?["url"] as? String == "https://duckduckgo.com/" + text, "\(when)")
            #expect((last.last?["parameters"] as? [String: Any])?["window"] as? String == text, "\(when)")
        }
        check(try c.fullHistory("phone"), "as stored")
        try server.restart()
        check(try server.router().fullHistory("phone"), "after a restart")
    }

    @Test("an occurredAt with a leap second (23:59:60) is taken, and reads back as :59.999 in its offset after a restart")
    func leapSecond() throws {
        let (server, c) = try Self.foreground()
        let answer = try c.event("phone", #"{"event": "willResignActive", "occurredAt": "2016-12-31T23:59:60+01:00"}"#)
        #expect(answer.status == 200, "\(answer.text)")
        #expect(answer.json["occurredAt"] as? String == "2016-12-31T23:59:59.999+01:00")
        let next = try c.event("phone", #"{"event": "didEnterBackground", "occurredAt": "2016-12-31T23:00:00.000Z"}"#)
        #expect(next.status == 200, "\(next.text)")
        try server.restart()
        let times = try server.router().fullHistory("phone").suffix(2).map { $0["occurredAt"] as? String }
        #expect(times == ["2016-12-31T23:59:59.999+01:00", "2016-12-31T23:00:00.000Z"])
    }
}
