import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// `POST /v1/instances/{id}/gaps` and the batch kind `gap`: a reporter that dropped queued inputs says how many, and the
/// service records the hole, counts it, streams it and keeps both through a restart.
@Suite("gaps: inputs dropped on the device")
struct GapTests {
    /// A server with `my-iphone` in the foreground, an action buffered before it got there.
    static func foreground() throws -> (TestServer, WireClient) {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("my-iphone", events: ["didFinishLaunching"])
        _ = try c.request("POST", "/v1/instances/my-iphone/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#)
        _ = try c.event("my-iphone", #"{"event": "willConnectToWindow", "window": "main"}"#)
        return (server, c)
    }

    /// The instance without its `updatedAt`, `version` and `counters`, which a gap may change: what it must not.
    static func rest(_ instance: [String: Any]) -> NSDictionary {
        NSDictionary(dictionary: instance.filter { !["updatedAt", "version", "counters"].contains($0.key) })
    }

    @Test("a gap appends a record at the next version that changes no state, and counts what was dropped; If-Match and keys as on any input")
    func recorded() throws {
        let (server, c) = try Self.foreground()
        let before = try c.request("GET", "/v1/instances/my-iphone").json
        let coverage = try c.request("GET", "/v1/models/ios-app/coverage").text
        let scrape = try c.scrape()
        #expect(scrape.value("lifecycled_dropped_reports_total", ["model": "ios-app"]) == 0, "the series starts at 0")

        let gap = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 41, "occurredAt": "2026-12-02T05:00:00.123+01:00"}"#)
        #expect(gap.status == 200, "\(gap.text)")
        #expect(gap.text.contains(#""version":4,"kind":"gap","dropped":41,"from":"connected","to":"connected","outcome":"stayed","hooks":[],"time":"#), "\(gap.text)")
        #expect(gap.text.hasSuffix(#","occurredAt":"2026-12-02T05:00:00.123+01:00"}"# + "\n"), "\(gap.text)")
        let after = try c.request("GET", "/v1/instances/my-iphone")
        #expect(after.header("etag")?.hasPrefix("\"4-") == true, "version 4: \(after.header("etag") ?? "")")
        #expect(Self.rest(after.json) == Self.rest(before), "state, buffered action, window and breadcrumb as they were")
        #expect((after.json["counters"] as? [String: Any])?["dropped"] as? Int == 41)
        #expect((before["counters"] as? [String: Any])?["dropped"] as? Int == 0)

        // If-Match and Idempotency-Key as on the other inputs.
        let stale = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 2}"#, headers: [("If-Match", "\"3\"")])
        #expect(stale.status == 412)
        let keyed = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 2}"#, headers: [("If-Match", "\"4\""), ("Idempotency-Key", "gap-1")])
        let again = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 2}"#, headers: [("If-Match", "\"4\""), ("Idempotency-Key", "gap-1")])
        #expect(keyed.status == 200 && again.status == 200 && again.text == keyed.text, "the key replays the first answer")
        let reused = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 3}"#, headers: [("Idempotency-Key", "gap-1")])
        #expect(reused.status == 422, "a key is bound to its body")
        // The device goes on where it was: the buffered action reaches the foreground.
        let active = try c.event("my-iphone", #"{"event": "didBecomeActive"}"#)
        #expect(active.json["deliveredAction"] != nil && active.json["to"] as? String == "foreground")

        let history = try c.fullHistory("my-iphone")
        #expect(history.map { $0["kind"] as? String } == ["event", "action", "event", "gap", "gap", "event"])
        #expect(history.compactMap { $0["dropped"] as? Int } == [41, 2])
        #expect(try c.request("GET", "/v1/models/ios-app/coverage").text != coverage, "the event after counts")
        let scraped = try c.scrape()
        #expect(scraped.value("lifecycled_dropped_reports_total", ["model": "ios-app"]) == 43)
        #expect(scraped.families["lifecycled_dropped_reports"]?.type == "counter")

        // Through a restart: the count, the records, and the next version.
        try server.restart()
        let c2 = try server.connect()
        let restarted = try c2.request("GET", "/v1/instances/my-iphone")
        #expect((restarted.json["counters"] as? [String: Any])?["dropped"] as? Int == 43)
        #expect(try c2.fullHistory("my-iphone").map { $0["kind"] as? String } == ["event", "action", "event", "gap", "gap", "event"])
        let next = try c2.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 1000000000}"#)
        #expect(next.status == 200 && next.json["version"] as? Int == 7 && next.json["from"] as? String == "foreground")
    }

    @Test("a gap adds no coverage: no row taken, nothing unexpected")
    func noCoverage() throws {
        let (server, c) = try Self.foreground()
        defer { withExtendedLifetime(server) {} }
        let coverage = try c.request("GET", "/v1/models/ios-app/coverage").text
        #expect(try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 5}"#).status == 200)
        #expect(try c.request("GET", "/v1/models/ios-app/coverage").text == coverage)
    }

    @Test("a bad gap is refused, 400 for its shape and 422 for its numbers, and changes nothing")
    func refused() throws {
        let (server, c) = try Self.foreground()
        defer { withExtendedLifetime(server) {} }
        let before = try c.request("GET", "/v1/instances/my-iphone").text
        let history = try c.request("GET", "/v1/instances/my-iphone/history").text
        for (status, body) in [
            (400, nil), (400, "{}"), (400, #"{"dropped": null}"#), (400, #"{"dropped": "3"}"#), (400, #"{"dropped": 2.5}"#), (400, #"{"dropped": [3]}"#),
            (400, #"{"dropped": 3, "believedState": "connected"}"#), (400, #"{"dropped": 3, "ranHooks": []}"#), (400, #"{"dropped": 3, "count": 3}"#),
            (422, #"{"dropped": 0}"#), (422, #"{"dropped": -1}"#), (422, #"{"dropped": 1000000001}"#), (422, #"{"dropped": 1e30}"#),
            (422, #"{"dropped": 9223372036854775807}"#), (422, #"{"dropped": 3, "occurredAt": "yesterday"}"#),
        ] as [(Int, String?)] {
            let answer = try c.request("POST", "/v1/instances/my-iphone/gaps", headers: [], body: body.map { Array($0.utf8) }, contentType: "application/json")
            #expect(answer.status == status, "\(body ?? "no body"): \(answer.text)")
            #expect(answer.header("content-type") == "application/problem+json", "\(body ?? "no body")")
        }
        #expect(try c.request("POST", "/v1/instances/nobody/gaps", json: #"{"dropped": 3}"#).status == 404)
        #expect(try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 3.0}"#, headers: [("If-Match", "\"0\"")]).status == 412, "3.0 is the integer 3")
        #expect(try c.request("GET", "/v1/instances/my-iphone").text == before)
        #expect(try c.request("GET", "/v1/instances/my-iphone/history").text == history)
    }

    @Test("the batch kind gap answers and stores exactly as the single endpoint; a malformed gap refuses the batch")
    func batch() throws {
        let items = [
            BatchItemSpec(instance: "a", kind: .create, body: nil),
            BatchItemSpec(instance: "a", kind: .event, body: #"{"event":"didFinishLaunching"}"#),
            BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":12,"occurredAt":"2026-06-01T10:00:00.000+02:00"}"#, key: "g1"),
            BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":12,"occurredAt":"2026-06-01T10:00:00.000+02:00"}"#, key: "g1"),
            BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":0}"#),
            BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":3}"#, expectedVersion: 1),
            BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":3}"#, expectedVersion: 2),
            BatchItemSpec(instance: "ghost", kind: .gap, body: #"{"dropped":3}"#),
            BatchItemSpec(instance: "a", kind: .event, body: #"{"event":"willConnectToWindow","window":"main"}"#),
        ]
        let batchServer = try TestServer(), singleServer = try TestServer()
        let batch = try batchServer.connect(), single = try singleServer.connect()
        let answer = try batch.request("POST", "/v1/batch", json: batchBody(items))
        #expect(answer.status == 200, "\(answer.text)")
        var expected: [String] = []
        for item in items {
            let request = item.single
            let response = try single.request(request.method, request.path, headers: request.headers, body: request.body, contentType: request.body == nil ? nil : "application/json")
            expected.append(#"{"status":\#(response.status),"\#(item.member(status: response.status))":\#(response.text.dropLast())}"#)
        }
        #expect(withoutTimes(answer.text) == withoutTimes(#"{"results":["# + expected.joined(separator: ",") + "]}\n"))
        let statuses = (answer.json["results"] as? [[String: Any]] ?? []).map { $0["status"] as? Int }
        #expect(statuses == [201, 200, 200, 200, 422, 412, 200, 404, 200])
        let stored = try batch.request("GET", "/v1/instances/a")
        #expect((stored.json["counters"] as? [String: Any])?["dropped"] as? Int == 15)
        #expect(withoutTimes(stored.text) == withoutTimes(try single.request("GET", "/v1/instances/a").text))
        #expect(withoutTimes(try batch.request("GET", "/v1/instances/a/history").text) == withoutTimes(try single.request("GET", "/v1/instances/a/history").text))

        let history = try batch.request("GET", "/v1/instances/a/history").text
        for body in [#"{"dropped":"12"}"#, #"{"dropped":12,"believedState":"launching"}"#, #"{}"#] {
            let refused = try batch.request("POST", "/v1/batch", json: batchBody([BatchItemSpec(instance: "a", kind: .gap, body: #"{"dropped":1}"#), BatchItemSpec(instance: "a", kind: .gap, body: body)]))
            #expect(refused.status == 400 && refused.text.contains("items[1]"), "\(body): \(refused.text)")
        }
        #expect(try batch.request("GET", "/v1/instances/a/history").text == history, "nothing of a refused batch was stored")
    }

    /// The stream's next record, past its `retry:` and comments.
    static func nextRecord(_ stream: EventStream) -> StreamEvent? {
        while let event = stream.next() {
            if event.data != nil { return event }
        }
        return nil
    }

    /// Not `event: gap`: that one says the stream lost records to retention (`StreamGap`), which a listener resyncs on.
    @Test("streams carry a gap's record as event: dropped, live and replayed")
    func streamed() throws {
        let (server, c) = try Self.foreground()
        let live = try EventStream(port: server.port, path: "/v1/instances/my-iphone/stream")
        #expect(live.status == 200)
        let global = try EventStream(port: server.port, path: "/v1/stream")
        let gap = try c.request("POST", "/v1/instances/my-iphone/gaps", json: #"{"dropped": 9}"#)
        #expect(gap.status == 200)
        let sequence = try #require(gap.json["sequence"] as? Int)
        for stream in [live, global] {
            let event = try #require(Self.nextRecord(stream))
            #expect(event.type == "dropped" && event.id == Int64(sequence), "\(event)")
            #expect(event.json["dropped"] as? Int == 9 && event.isRecord)
            stream.disconnect()
        }
        let replayed = try EventStream(port: server.port, path: "/v1/instances/my-iphone/stream", headers: [("Last-Event-ID", String(sequence - 1))])
        let event = try #require(Self.nextRecord(replayed))
        #expect(event.type == "dropped" && event.data.map { Array($0.utf8) + [10] } == gap.body)
        replayed.disconnect()
    }
}
