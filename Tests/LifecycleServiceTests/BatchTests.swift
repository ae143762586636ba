import Foundation
import LifecycleLocks
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import LifecycleService

/// One item of a batch, and the single request it stands for.
struct BatchItemSpec {
    enum Kind: String { case create, event, action, launch, gap }

    var instance: String
    var kind: Kind
    /// The body's JSON, or `nil` for none.
    var body: String?
    var key: String?
    var expectedVersion: Int?

    /// The item as the batch carries it.
    var json: String {
        var members = [#""instance":\#(quoted(instance))"#, #""kind":"\#(kind.rawValue)""#]
        if let body { members.append(#""body":\#(body)"#) }
        if let key { members.append(#""idempotencyKey":\#(quoted(key))"#) }
        if let expectedVersion { members.append(#""expectedVersion":\#(expectedVersion)"#) }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// The single endpoint's request for the item: method, path, headers and body.
    var single: (method: String, path: String, headers: [(String, String)], body: [UInt8]?) {
        var headers: [(String, String)] = []
        if let key { headers.append(("Idempotency-Key", key)) }
        if let expectedVersion { headers.append(("If-Match", "\"\(expectedVersion)\"")) }
        let path = switch kind {
        case .create: "/v1/instances/\(instance)"
        case .event: "/v1/instances/\(instance)/events"
        case .action: "/v1/instances/\(instance)/actions"
        case .launch: "/v1/instances/\(instance)/relaunches"
        case .gap: "/v1/instances/\(instance)/gaps"
        }
        return (kind == .create ? "PUT" : "POST", path, headers, body.map { Array($0.utf8) })
    }

    /// The result member the single answer's body goes in.
    func member(status: Int) -> String {
        switch status {
        case 201: "instance"
        case 200: kind == .create ? "instance" : "record"
        default: "problem"
        }
    }
}

private func quoted(_ text: String) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed), as: UTF8.self)
}

func batchBody(_ items: [BatchItemSpec]) -> String {
    #"{"items":["# + items.map(\.json).joined(separator: ",") + "]}"
}

/// A body or history with what differs between two servers given the same inputs taken out:
/// times (the server's clock in a too-early `occurredAt`'s 422 too) and sequence numbers (and
/// a history page's continuations, which are sequences).
func withoutTimes(_ text: String) -> String {
    text.replacingOccurrences(of: #"server's clock \([^)]*\)"#, with: "server's clock ()", options: .regularExpression)
        .replacingOccurrences(of: #""(time|createdAt|updatedAt)":"[^"]*""#, with: #""$1":"""#, options: .regularExpression)
        .replacingOccurrences(of: #""(sequence|nextAfter|oldestRetainedSequence)":[0-9]+"#, with: #""$1":0"#, options: .regularExpression)
        // A 412's detail names the current ETag, whose second part is the creation time.
        .replacingOccurrences(of: #"\(ETag \\"([0-9]+)-[0-9]+\\"\)"#, with: #"(ETag \\"$1-\\")"#, options: .regularExpression)
}

/// The number on the line of `/metrics` that starts with `name` and a space.
func metricValue(_ text: String, _ name: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
}

/// `count` items of every kind, seeded: creates (found, other model, unknown model), events
/// expected and not, actions, launches, instances that do not exist, stale `expectedVersion`s
/// (412), inputs the machine refuses and a nested parameter (422), keyed items, some sent
/// again with their key (replays) and keys reused for another item (422).
func mixedItems(_ count: Int, seed: UInt64) -> [BatchItemSpec] {
    var random = SeededGenerator(state: seed)
    let events = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground", "bogus"]
    var items: [BatchItemSpec] = []
    var keyed: [BatchItemSpec] = []
    for index in 0..<count {
        let instance = Int.random(in: 0..<12, using: &random) == 0 ? "ghost-\(Int.random(in: 0..<3, using: &random))" : "i\(Int.random(in: 0..<30, using: &random))"
        if !keyed.isEmpty, Int.random(in: 0..<20, using: &random) == 0 {
            items.append(keyed.randomElement(using: &random)!)  // sent again: a replay
            continue
        }
        var item: BatchItemSpec
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<3:
            let body = [#"{"model":"ios-app"}"#, #"{"model":"ios-app"}"#, nil, #"{"model":"android-activity"}"#, #"{"model":"nope"}"#].randomElement(using: &random)!
            item = BatchItemSpec(instance: instance, kind: .create, body: body)
        case 3..<14:
            let event = events.randomElement(using: &random)!
            let body = switch event {
            case "willConnectToWindow": #"{"event":"willConnectToWindow","window":"main"}"#
            case "didFinishLaunching" where index % 3 == 0: #"{"event":"didFinishLaunching","isTesting":true}"#
            case "didBecomeActive" where index % 17 == 0: #"{"event":"didBecomeActive","extra":{"nested":1}}"#
            // What the app reports and the device's clock, parsed by the single endpoint's code: a
            // belief and hooks (diverging or not), a time, one a day too far ahead (422), a bad report (422).
            case "didBecomeActive" where index % 5 == 0: #"{"event":"didBecomeActive","believedState":"foreground","ranHooks":["Foreground.onTransition","Foreground.didReturn"]}"#
            case "willResignActive" where index % 5 == 0: #"{"event":"willResignActive","believedState":"background","ranHooks":[],"occurredAt":"2026-06-01T10:00:00.000+02:00"}"#
            case "didEnterBackground" where index % 7 == 0: #"{"event":"didEnterBackground","occurredAt":"2999-01-01T00:00:00.000Z"}"#
            case "willEnterForeground" where index % 7 == 0: #"{"event":"willEnterForeground","ranHooks":"Background.willLeave"}"#
            default: #"{"event":"\#(event)"}"#
            }
            item = BatchItemSpec(instance: instance, kind: .event, body: body)
        case 14..<18:
            let body = [
                #"{"action":"openURL","url":"https://example.com/\#(index)"}"#, #"{"action":"openURL","url":""}"#,
                #"{"action":"handleShortcutItem","type":"newTab"}"#, #"{"action":"launchRocket"}"#,
            ].randomElement(using: &random)!
            item = BatchItemSpec(instance: instance, kind: .action, body: body)
        default:
            item = BatchItemSpec(instance: instance, kind: .launch, body: index % 9 == 0 ? #"{"occurredAt":"2026-06-01T10:00:00.000-05:00"}"# : nil)
        }
        if item.kind != .create, Int.random(in: 0..<7, using: &random) == 0 { item.expectedVersion = Int.random(in: 0..<9, using: &random) }
        // Keys on inputs only: PUT ignores Idempotency-Key, so a replayed create would differ one by one.
        if item.kind != .create, Int.random(in: 0..<5, using: &random) == 0 {
            item.key = "k\(Int.random(in: 0..<150, using: &random))"
            keyed.append(item)
        }
        items.append(item)
    }
    return items
}

@Suite("POST /v1/batch", .serialized)
struct BatchTests {
    @Test("1,000 mixed items are answered and stored exactly as the same items posted one by one, in one transaction")
    func sameAsOneByOne() throws {
        let items = mixedItems(1000, seed: 19)
        let batchServer = try TestServer()
        let singleServer = try TestServer()
        let batch = try batchServer.connect()
        let single = try singleServer.connect()

        let metricsBefore = try batch.request("GET", "/metrics").text
        let answer = try batch.request("POST", "/v1/batch", json: batchBody(items))
        #expect(answer.status == 200, "\(answer.text.prefix(500))")
        #expect(answer.header("content-type") == "application/json")
        let metricsAfter = try batch.request("GET", "/metrics").text
        let transactions = (metricValue(metricsAfter, "lifecycled_store_commit_writes_count") ?? 0) - (metricValue(metricsBefore, "lifecycled_store_commit_writes_count") ?? 0)
        let writes = (metricValue(metricsAfter, "lifecycled_store_commit_writes_sum") ?? 0) - (metricValue(metricsBefore, "lifecycled_store_commit_writes_sum") ?? 0)
        #expect(transactions == 1, "the batch committed in one transaction")
        #expect(writes > 900, "holding its items (all but those refused before the store)")

        var expected: [String] = []
        var statuses: [Int: Int] = [:]
        for item in items {
            let request = item.single
            let response = try single.request(request.method, request.path, headers: request.headers, body: request.body, contentType: request.body == nil ? nil : "application/json")
            statuses[response.status, default: 0] += 1
            var body = response.text
            if body.hasSuffix("\n") { body.removeLast() }
            expected.append(#"{"status":\#(response.status),"\#(item.member(status: response.status))":\#(body)}"#)
        }
        // The mix holds every answer the endpoints give.
        for status in [200, 201, 404, 409, 412, 422] { #expect(statuses[status, default: 0] > 0, "a \(status) among the items") }
        for member in ["\"divergence\"", "\"believedState\"", "\"ranHooks\"", "\"occurredAt\"", "more than 24 hours ahead"] {
            #expect(answer.text.contains(member), "the batch's answer shows \(member)")
        }
        let keys = items.compactMap(\.key)
        #expect(keys.count > Set(keys).count, "some keys come more than once")

        let results = try #require(answer.json["results"] as? [Any])
        #expect(results.count == items.count)
        let expectedBody = #"{"results":["# + expected.joined(separator: ",") + "]}\n"
        if withoutTimes(answer.text) != withoutTimes(expectedBody) {
            // Name the first item that differs.
            let got = try JSONSerialization.jsonObject(with: Data(answer.body)) as! [String: Any]
            let want = try JSONSerialization.jsonObject(with: Data(expectedBody.utf8)) as! [String: Any]
            let gotResults = got["results"] as! [Any], wantResults = want["results"] as! [Any]
            for index in items.indices {
                let a = withoutTimes(String(decoding: try JSONSerialization.data(withJSONObject: gotResults[index], options: .sortedKeys), as: UTF8.self))
                let b = withoutTimes(String(decoding: try JSONSerialization.data(withJSONObject: wantResults[index], options: .sortedKeys), as: UTF8.self))
                if a != b {
                    Issue.record("items[\(index)] \(items[index].json): batch answered \(a), one by one \(b)")
                    break
                }
            }
            Issue.record("the batch's answer differs from the answers one by one")
        }

        for instance in Set(items.map(\.instance)).sorted() {
            let a = try batch.request("GET", "/v1/instances/\(instance)"), b = try single.request("GET", "/v1/instances/\(instance)")
            #expect(a.status == b.status && withoutTimes(a.text) == withoutTimes(b.text), "instance \(instance) as stored")
            let historyA = try batch.request("GET", "/v1/instances/\(instance)/history?limit=1000")
            let historyB = try single.request("GET", "/v1/instances/\(instance)/history?limit=1000")
            #expect(historyA.status == historyB.status)
            #expect(withoutTimes(historyA.text) == withoutTimes(historyB.text), "history of \(instance), byte for byte but for times and sequences")
        }
    }

    @Test("a batch sent again replays every keyed item as first answered, a keyed create's 201 too; its unkeyed items apply again")
    func retryReplays() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let items = [
            BatchItemSpec(instance: "app", kind: .create, body: #"{"model":"ios-app"}"#, key: "create-app"),
            BatchItemSpec(instance: "app", kind: .event, body: #"{"event":"didFinishLaunching"}"#, key: "e1"),
            BatchItemSpec(instance: "app", kind: .event, body: #"{"event": "willConnectToWindow", "window": "main"}"#, key: "e2", expectedVersion: 1),
            BatchItemSpec(instance: "app", kind: .event, body: #"{"event":"didBecomeActive"}"#),
            BatchItemSpec(instance: "app", kind: .action, body: #"{"action":"openURL","url":"https://duckduckgo.com"}"#, key: "a1"),
            BatchItemSpec(instance: "app", kind: .launch, key: "l1"),
        ]
        let first = try c.request("POST", "/v1/batch", json: batchBody(items))
        let statuses = (first.json["results"] as? [[String: Any]])?.map { $0["status"] as? Int }
        #expect(statuses == [201, 200, 200, 200, 200, 200], "\(first.text)")
        let again = try c.request("POST", "/v1/batch", json: batchBody(items))
        let firstResults = try #require(first.json["results"] as? [[String: Any]])
        let againResults = try #require(again.json["results"] as? [[String: Any]])
        for index in [0, 1, 2, 4, 5] {
            #expect(NSDictionary(dictionary: firstResults[index]) == NSDictionary(dictionary: againResults[index]), "keyed items[\(index)] replays, times and sequences alike")
        }
        #expect(againResults[3]["status"] as? Int == 409, "the unkeyed didBecomeActive is sent again: unexpected in foreground")
        let history = try c.fullHistory("app")
        #expect(history.count == 6, "the replays stored nothing: five records, and the unkeyed event's second")

        // A key reused for another item is that item's 422, and the rest go on.
        var changed = items
        changed[1].body = #"{"event":"didEnterBackground"}"#
        let reused = try c.request("POST", "/v1/batch", json: batchBody([changed[1], changed[3]]))
        let reusedResults = try #require(reused.json["results"] as? [[String: Any]])
        #expect(reusedResults.map { $0["status"] as? Int } == [422, 409])
        #expect((reusedResults[0]["problem"] as? [String: Any])?["detail"] as? String == #"Idempotency-Key "e1" was used for a different request"#)
        // The same body spelled otherwise is the same item: its fingerprint is the body's canonical form.
        var respelled = items[2]
        respelled.body = #"{ "window":"main","event":"willConnectToWindow" }"#
        let replayed = try c.request("POST", "/v1/batch", json: batchBody([respelled]))
        let replayedResult = try #require((replayed.json["results"] as? [[String: Any]])?.first)
        #expect(NSDictionary(dictionary: replayedResult) == NSDictionary(dictionary: firstResults[2]))
    }

    @Test("a batch of new keys, one repeated inside it and one sent in an earlier batch, is answered and stored as one by one")
    func keysNewRepeatedAndReplayed() throws {
        let batchServer = try TestServer()
        let singleServer = try TestServer()
        let batch = try batchServer.connect()
        let single = try singleServer.connect()
        func oneByOne(_ items: [BatchItemSpec]) throws -> String {
            var answers: [String] = []
            for item in items {
                let request = item.single
                let response = try single.request(request.method, request.path, headers: request.headers, body: request.body, contentType: request.body == nil ? nil : "application/json")
                var body = response.text
                if body.hasSuffix("\n") { body.removeLast() }
                answers.append(#"{"status":\#(response.status),"\#(item.member(status: response.status))":\#(body)}"#)
            }
            return #"{"results":["# + answers.joined(separator: ",") + "]}\n"
        }
        let earlier = [
            BatchItemSpec(instance: "old", kind: .create, body: #"{"model":"ios-app"}"#),
            BatchItemSpec(instance: "old", kind: .event, body: #"{"event":"didFinishLaunching"}"#, key: "old-1"),
        ]
        let first = try batch.request("POST", "/v1/batch", json: batchBody(earlier))
        #expect(withoutTimes(first.text) == withoutTimes(try oneByOne(earlier)))

        // More rows of each table than one multi-row INSERT holds; keyed creates as the reporter sends them.
        var items: [BatchItemSpec] = []
        for i in 0..<70 {
            items.append(BatchItemSpec(instance: "n\(i)", kind: .create, body: #"{"model":"ios-app"}"#, key: "n\(i)-c"))
            items.append(BatchItemSpec(instance: "n\(i)", kind: .event, body: #"{"event":"didFinishLaunching"}"#, key: "n\(i)-1"))
            items.append(BatchItemSpec(instance: "n\(i)", kind: .event, body: #"{"event":"willConnectToWindow","window":"main"}"#, key: "n\(i)-2"))
        }
        items.insert(items[1], at: 100)  // its key again, inside the batch: a replay
        items.insert(earlier[1], at: 150)  // a key an earlier batch stored: a replay
        items.append(BatchItemSpec(instance: "old", kind: .event, body: #"{"event":"willConnectToWindow","window":"main"}"#, key: "old-2"))
        let answer = try batch.request("POST", "/v1/batch", json: batchBody(items))
        let expected = try oneByOne(items)
        #expect(withoutTimes(answer.text) == withoutTimes(expected))
        let results = try #require(answer.json["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? Int } == items.map { $0.kind == .create ? 201 : 200 })
        #expect(NSDictionary(dictionary: results[100]) == NSDictionary(dictionary: results[1]), "the repeated key replays its first answer")
        let firstResults = try #require(first.json["results"] as? [[String: Any]])
        #expect(NSDictionary(dictionary: results[150]) == NSDictionary(dictionary: firstResults[1]), "the earlier batch's key replays its answer")
        #expect(try batch.fullHistory("old").count == 2 && batch.fullHistory("n0").count == 2, "each keyed input stored once")
        // Sent again whole, every item replays.
        let again = try batch.request("POST", "/v1/batch", json: batchBody(items))
        #expect(again.text == answer.text)
    }

    @Test("an empty batch answers no results and stores nothing")
    func empty() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let answer = try c.request("POST", "/v1/batch", json: #"{"items": []}"#)
        #expect(answer.status == 200)
        #expect(answer.text == "{\"results\":[]}\n")
    }

    @Test("a batch whose every item is answered at once, none committed, answers each item as its endpoint answers it")
    func everyItemAnsweredAtOnce() throws {
        let server = try TestServer(.router)
        let c = server.router()
        #expect(try c.request("PUT", "/v1/instances/a").status == 201)
        let single = try c.request("POST", "/v1/instances/a/events", json: #"{"event":"didBecomeActive","extra":{"nested":1}}"#)
        #expect(single.status == 422)
        let item = #"{"instance":"a","kind":"event","body":{"event":"didBecomeActive","extra":{"nested":1}}}"#
        let answer = try c.request("POST", "/v1/batch", json: #"{"items":[\#(item),\#(item)]}"#)
        #expect(answer.status == 200)
        let result = #"{"status":422,"problem":"# + single.text.dropLast() + "}"
        #expect(answer.text == #"{"results":["# + result + "," + result + "]}\n")
        #expect(try c.request("GET", "/v1/instances/a/history").text.contains("didBecomeActive") == false)
    }

    @Test("a malformed batch, or one with an item its endpoint would answer 400, is refused whole with 400 naming it, and nothing is stored")
    func malformed() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        let good = #"{"instance":"new","kind":"create"},{"instance":"app","kind":"event","body":{"event":"willResignActive"}}"#
        let tooMany = #"{"items":["# + Array(repeating: #"{"instance":"app","kind":"launch"}"#, count: 1001).joined(separator: ",") + "]}"
        let cases: [(String, String, String)] = [
            ("not JSON", "{items", "not valid JSON"),
            ("not an object", "[]", "must be a JSON object"),
            ("no items", "{}", "\"items\""),
            ("items not an array", #"{"items": {}}"#, "\"items\""),
            ("unknown envelope member", #"{"items": [], "atomic": true}"#, "unknown member \"atomic\""),
            ("more than 1,000 items", tooMany, "at most 1000 items"),
            ("item not an object", #"{"items": [\#(good), 3]}"#, "items[2]: an item must be a JSON object"),
            ("unknown item member", #"{"items": [\#(good), {"instance":"app","kind":"launch","when":1}]}"#, "items[2]: unknown member \"when\""),
            ("no instance", #"{"items": [\#(good), {"kind":"launch"}]}"#, "items[2]: \"instance\""),
            ("instance not a string", #"{"items": [\#(good), {"instance":7,"kind":"launch"}]}"#, "items[2]: \"instance\""),
            ("instance no path could name", #"{"items": [\#(good), {"instance":"..","kind":"launch"}]}"#, "items[2]: instance id must be"),
            ("expectedVersion past 18 digits", #"{"items": [\#(good), {"instance":"app","kind":"launch","expectedVersion":1000000000000000000}]}"#, "items[2]: \"expectedVersion\""),
            ("expectedVersion with a fraction", #"{"items": [\#(good), {"instance":"app","kind":"launch","expectedVersion":2.5}]}"#, "items[2]: \"expectedVersion\""),
            ("no kind", #"{"items": [\#(good), {"instance":"app"}]}"#, "items[2]: \"kind\""),
            ("bad kind", #"{"items": [\#(good), {"instance":"app","kind":"delete"}]}"#, "items[2]: \"kind\""),
            ("body not an object", #"{"items": [\#(good), {"instance":"app","kind":"event","body":"x"}]}"#, "items[2]: \"body\""),
            ("bad key", #"{"items": [\#(good), {"instance":"app","kind":"launch","idempotencyKey":""}]}"#, "items[2]: \"idempotencyKey\" must be 1 to 255"),
            ("key not a string", #"{"items": [\#(good), {"instance":"app","kind":"launch","idempotencyKey":5}]}"#, "items[2]: \"idempotencyKey\""),
            ("negative expectedVersion", #"{"items": [\#(good), {"instance":"app","kind":"launch","expectedVersion":-1}]}"#, "items[2]: \"expectedVersion\""),
            ("expectedVersion not an integer", #"{"items": [\#(good), {"instance":"app","kind":"launch","expectedVersion":"3"}]}"#, "items[2]: \"expectedVersion\""),
            ("expectedVersion on a create", #"{"items": [\#(good), {"instance":"x","kind":"create","expectedVersion":0}]}"#, "items[2]: a create takes no"),
            ("event without a body", #"{"items": [\#(good), {"instance":"app","kind":"event"}]}"#, "items[2]: the request needs a JSON object body"),
            ("event without a name", #"{"items": [\#(good), {"instance":"app","kind":"event","body":{}}]}"#, "items[2]: the body needs \"event\""),
            ("action name not a string", #"{"items": [\#(good), {"instance":"app","kind":"action","body":{"action":1}}]}"#, "items[2]: \"action\" must be a string"),
            ("launch with a body member", #"{"items": [\#(good), {"instance":"app","kind":"launch","body":{"fast":true}}]}"#, "items[2]: unknown field \"fast\""),
            ("create with a bad id", #"{"items": [\#(good), {"instance":"a b","kind":"create"}]}"#, "items[2]: instance id must be"),
            ("create with an unknown member", #"{"items": [\#(good), {"instance":"x","kind":"create","body":{"id":"x"}}]}"#, "items[2]: unknown field \"id\""),
        ]
        let before = try c.fullHistory("app").count
        for (name, body, detail) in cases {
            let answer = try c.request("POST", "/v1/batch", json: body)
            #expect(answer.status == 400, "\(name): \(answer.status) \(answer.text.prefix(300))")
            #expect(answer.header("content-type") == "application/problem+json", "\(name)")
            let said = answer.json["detail"] as? String ?? ""
            #expect(said.contains(detail), "\(name): \(said)")
        }
        #expect(try c.request("GET", "/v1/instances/new").status == 404, "no item of a refused batch was stored")
        #expect(try c.fullHistory("app").count == before)
        let listed = try c.request("GET", "/v1/instances").json["items"] as? [Any]
        #expect(listed?.count == 1)
        // JSON has one kind of number: 3.0 is the version 3.
        let whole = try c.request("POST", "/v1/batch", json: #"{"items": [{"instance":"app","kind":"launch","expectedVersion":3.0}]}"#)
        #expect((whole.json["results"] as? [[String: Any]])?.first?["status"] as? Int == 200, "\(whole.text)")
    }

    @Test("a batch body has its own limit, --max-batch-body, answered 413 at once; other bodies keep --max-body")
    func bodyLimit() throws {
        let server = try TestServer { $0.maxBatchBodySize = 200_000 }
        let c = try server.connect()
        try c.makeInstance("app", events: coldStart)
        // About 100 KiB: past --max-body (64 KiB) but within the batch's limit.
        let items = (0..<1000).map { BatchItemSpec(instance: "app", kind: .action, body: #"{"action":"openURL","url":"https://example.com/\#(String(repeating: "p", count: 40))/\#($0)"}"#) }
        let body = batchBody(items)
        #expect(body.utf8.count > 64 * 1024 && body.utf8.count < 200_000)
        let answer = try c.request("POST", "/v1/batch", json: body)
        #expect(answer.status == 200)
        #expect((answer.json["results"] as? [Any])?.count == 1000)
        // Sent chunked, with no Content-Length, it is held to the batch's limit as it arrives.
        let chunked = try server.connect()
        let hex = String(body.utf8.count, radix: 16)
        try #require(chunked.send(Array("POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\(hex)\r\n\(body)\r\n0\r\n\r\n".utf8)))
        #expect(try chunked.readResponse().status == 200)

        // Past the limits: refused on the Content-Length alone, before any body is sent.
        func head(_ path: String, length: Int) throws -> HTTPResponse {
            let fresh = try server.connect()
            try #require(fresh.send("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n"))
            return try fresh.readResponse()
        }
        #expect(try head("/v1/instances/app/actions", length: 64 * 1024 + 1).status == 413, "the single endpoint keeps --max-body")
        let refused = try head("/v1/batch", length: 200_001)
        #expect(refused.status == 413)
        #expect(refused.json["detail"] as? String == "request body is larger than the limit of 200000 bytes")
        // A chunked batch that outgrows the limit is refused as it does.
        let overgrown = try server.connect()
        let chunk = String(repeating: " ", count: 150_000)
        let size = String(chunk.utf8.count, radix: 16)
        _ = overgrown.send(Array("POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\n\(chunk)\r\n\(size)\r\n\(chunk)\r\n0\r\n\r\n".utf8))
        #expect(try overgrown.readResponse().status == 413)
        #expect(try c.fullHistory("app").count == 3 + 2000)
        }
}

@Suite("POST /v1/batch across a kill -9", .serialized)
struct BatchCrashTests {
    @Test("batches sent again after a kill -9 mid-batch apply nothing twice: every keyed item is stored once, acknowledged answers replay", arguments: [7, 23, 61] as [UInt64])
    func killNine(seed: UInt64) throws {
        var random = SeededGenerator(state: seed)
        let data = TemporaryDirectory("lifecycled-batch-crash")
        var server = try LifecycledProcess.serving(dataDirectory: data.path)
        let setup = try WireClient(port: server.port)
        let instances = 10
        for index in 0..<instances { try setup.makeInstance("app-\(index)", events: coldStart) }
        // Each batch: a keyed create and 100 keyed actions, each with a URL of its own so that
        // its record can be counted; every fourth action also an unexpected (keyed) event.
        let batches = (0..<30).map { batch in
            batchBody([BatchItemSpec(instance: "new-\(batch)", kind: .create, body: #"{"model":"ios-app"}"#, key: "create-\(batch)")] + (0..<100).flatMap { item in
                let action = BatchItemSpec(
                    instance: "app-\(item % instances)", kind: .action, body: #"{"action":"openURL","url":"https://example.com/\#(batch)/\#(item)"}"#, key: "a-\(batch)-\(item)"
                )
                let event = BatchItemSpec(instance: "app-\(item % instances)", kind: .event, body: #"{"event":"didBecomeActive"}"#, key: "e-\(batch)-\(item)")
                return item % 4 == 0 ? [action, event] : [action]
            })
        }
        let answered = LockedValue<[Int: HTTPResponse]>([:])
        let port = server.port
        let sender = startClients(1, port: port) { _, c in
            for (index, body) in batches.enumerated() {
                guard let response = try? c.request("POST", "/v1/batch", json: body) else { return }  // the server is gone
                guard response.status == 200 else {
                    Issue.record("batch \(index) answered \(response.status): \(response.text.prefix(300))")
                    return
                }
                answered.withLock { $0[index] = response }
            }
        }
        // A seeded moment: after a few batches are answered, and some microseconds into the next.
        let answeredFirst = Int.random(in: 2..<8, using: &random)
        #expect(eventually(within: 60) { answered.withLock { $0.count } >= answeredFirst })
        usleep(UInt32.random(in: 0..<30_000, using: &random))
        server.signal(SIGKILL)
        sender.wait()
        #expect(server.finish().status == 9)
        let acknowledged = answered.withLock { $0 }
        #expect(acknowledged.count < batches.count, "killed before the last batch")

        server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        for (index, body) in batches.enumerated() {
            let retry = try c.request("POST", "/v1/batch", json: body)
            #expect(retry.status == 200)
            if let first = acknowledged[index] {
                let replays = retry.text == first.text
                #expect(replays, "batch \(index), acknowledged before the kill, replays byte for byte")
            } else {
                let statuses = Set((retry.json["results"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? Int })
                #expect(statuses.isSubset(of: [200, 201, 409]), "batch \(index): \(statuses)")
            }
        }
        // Each keyed item once: every URL in one record, each create once, versions contiguous.
        var urls: [String: Int] = [:]
        for index in 0..<instances {
            let history = try c.fullHistory("app-\(index)")
            #expect(history.compactMap { $0["version"] as? Int } == Array(1...history.count), "versions of app-\(index) are contiguous")
            for record in history {
                if let url = (record["parameters"] as? [String: Any])?["url"] as? String { urls[url, default: 0] += 1 }
            }
            // coldStart's three, then each batch's actions and events for the instance.
            let inputs = (0..<100).filter { $0 % instances == index }.reduce(0) { $0 + ($1 % 4 == 0 ? 2 : 1) }
            #expect(history.count == 3 + batches.count * inputs, "app-\(index) holds each keyed input once")
        }
        #expect(urls.count == batches.count * 100 && urls.values.allSatisfy { $0 == 1 }, "each action stored once")
        let listed = try c.request("GET", "/v1/instances?limit=1000").json["items"] as? [[String: Any]] ?? []
        #expect(listed.count == instances + batches.count, "each batch's create made its instance once")
        server.signal(SIGTERM)
        #expect(server.finish().status == 0)
    }
}
