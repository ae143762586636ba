import Foundation
import LifecycleHTTP
import LifecycleTestSupport
import Testing
@testable import LifecycleService
@testable import LifecycleStore

/// One request, one fingerprint (issue 31, point 8): a keyed input sent alone and the same
/// input as a batch item are the same request, however their JSON is spaced or ordered.
@Suite("idempotency fingerprints")
struct FingerprintTests {
    static let spaced = #"{ "ranHooks" : [ "Foreground.willLeave" ] ,"event":"willResignActive",  "believedState":"foreground" }"#
    static let compact = #"{"believedState":"foreground","event":"willResignActive","ranHooks":["Foreground.willLeave"]}"#
    static let reordered = "{\n  \"event\": \"willResignActive\",\n  \"ranHooks\": [\"Foreground.willLeave\"],\n  \"believedState\": \"fore\\u0067round\"\n}"

    static func server() throws -> (TestServer, RouterClient) {
        let server = try TestServer()
        let c = server.router()
        try c.makeInstance("phone", events: coldStart)
        return (server, c)
    }

    /// The single request's answer and the batch item's result for the same key, and the history after both.
    static func aloneThenBatch(alone: String, item: String, batchFirst: Bool) throws -> (alone: HTTPResponse, item: [String: Any], records: Int) {
        let (_, c) = try server()
        let key = "same-1"
        func sendAlone() throws -> HTTPResponse { try c.event("phone", alone, headers: [("Idempotency-Key", key)]) }
        func sendItem() throws -> [String: Any] {
            let batch = try c.request("POST", "/v1/batch", json: batchBody([BatchItemSpec(instance: "phone", kind: .event, body: item, key: key)]))
            return try #require((batch.json["results"] as? [[String: Any]])?.first, "\(batch.text)")
        }
        var single: HTTPResponse?
        var result: [String: Any] = [:]
        if batchFirst {
            result = try sendItem()
            single = try sendAlone()
        } else {
            single = try sendAlone()
            result = try sendItem()
        }
        return (try #require(single), result, try c.fullHistory("phone").count)
    }

    /// Two spellings of one body, neither the canonical one, each way round.
    static let spellings = [(spaced, reordered), (reordered, spaced), (spaced, compact)]

    @Test("a fingerprint's bytes are the single endpoint's method and path, a newline and the canonical body, as stored keys hold them")
    func fingerprintBytes() {
        let body: [String: JSONValue] = ["event": .string("willResignActive"), "believedState": .string("foreground")]
        let expected: [(API.BatchKind, String)] = [
            (.create, "PUT /v1/instances/phone-1\n"), (.event, "POST /v1/instances/phone-1/events\n"), (.action, "POST /v1/instances/phone-1/actions\n"),
            (.launch, "POST /v1/instances/phone-1/relaunches\n"), (.gap, "POST /v1/instances/phone-1/gaps\n"),
        ]
        for (kind, head) in expected {
            #expect(IdempotencyKey.fingerprint(endpoint: kind.endpoint("phone-1"), body: nil) == Array(head.utf8), "\(kind)")
        }
        #expect(IdempotencyKey.fingerprint(endpoint: API.BatchKind.event.endpoint("p"), body: body)
            == Array("POST /v1/instances/p/events\n{\"believedState\":\"foreground\",\"event\":\"willResignActive\"}".utf8))
        #expect(IdempotencyKey.fingerprint(endpoint: WriteEndpoint("POST /v1/instances"), body: [:]) == Array("POST /v1/instances\n{}".utf8))
    }

    @Test("sent alone, then as a batch item spelled otherwise: the item replays the single answer", arguments: 0..<spellings.count)
    func aloneThenItem(spelling: Int) throws {
        let (first, second) = Self.spellings[spelling]
        let (alone, item, records) = try Self.aloneThenBatch(alone: first, item: second, batchFirst: false)
        #expect(alone.status == 200, "\(alone.text)")
        #expect(item["status"] as? Int == 200, "\(item)")
        let record = try #require(item["record"] as? [String: Any])
        #expect(NSDictionary(dictionary: record) == NSDictionary(dictionary: alone.json), "the same record, not a second one")
        #expect(records == coldStart.count + 1)
    }

    @Test("sent as a batch item, then alone spelled otherwise: the single request replays the item", arguments: 0..<spellings.count)
    func itemThenAlone(spelling: Int) throws {
        let (first, second) = Self.spellings[spelling]
        let (alone, item, records) = try Self.aloneThenBatch(alone: second, item: first, batchFirst: true)
        #expect(item["status"] as? Int == 200, "\(item)")
        #expect(alone.status == 200, "\(alone.text)")
        let record = try #require(item["record"] as? [String: Any])
        #expect(NSDictionary(dictionary: record) == NSDictionary(dictionary: alone.json))
        #expect(records == coldStart.count + 1)
    }

    @Test("a different request with the same key is still 422, alone or as an item, and stores nothing")
    func differentRequest() throws {
        let other = #"{"event":"willResignActive","believedState":"background","ranHooks":["Foreground.willLeave"]}"#
        let (alone, item, records) = try Self.aloneThenBatch(alone: Self.compact, item: other, batchFirst: false)
        #expect(alone.status == 200)
        #expect(item["status"] as? Int == 422)
        #expect((item["problem"] as? [String: Any])?["detail"] as? String == #"Idempotency-Key "same-1" was used for a different request"#)
        let (second, _, after) = try Self.aloneThenBatch(alone: other, item: Self.compact, batchFirst: true)
        #expect(second.status == 422 && second.json["detail"] as? String == #"Idempotency-Key "same-1" was used for a different request"#)
        #expect(records == coldStart.count + 1 && after == coldStart.count + 1)
        // Another endpoint with the same body is another request too.
        let (_, c) = try Self.server()
        #expect(try c.event("phone", #"{"event":"willResignActive"}"#, headers: [("Idempotency-Key", "k")]).status == 200)
        let relaunch = try c.request("POST", "/v1/instances/phone/relaunches", json: "{}", headers: [("Idempotency-Key", "k")])
        #expect(relaunch.status == 422)
    }

    @Test("a key stored before fingerprints were canonical still replays the same request sent the same way",
          .sqliteOnly("writes the former fingerprint into the SQLite file"))
    func formerFingerprint() throws {
        let (server, c) = try Self.server()
        let first = try c.event("phone", Self.spaced, headers: [("Idempotency-Key", "old-1")])
        #expect(first.status == 200)
        server.service?.stop()
        server.service = nil
        // What versions before stored: the method and path as sent, then the body's bytes.
        let database = try Database(path: server.dataDirectory + "/" + SQLiteStore.fileName, isReadOnly: false)
        let former = Array("POST /v1/instances/phone/events\n\(Self.spaced)".utf8)
        var updated: [String] = []
        try database.prepare("UPDATE idempotency SET fingerprint = $1 WHERE key LIKE '% old-1' RETURNING key")
            .forEachRow([.bytes(former)]) { row in updated.append(row.text(0) ?? "") }
        #expect(updated.count == 1, "the key's row holds the former fingerprint")
        try server.restart()
        let c2 = server.router()
        let replay = try c2.event("phone", Self.spaced, headers: [("Idempotency-Key", "old-1")])
        #expect(replay.status == 200 && replay.body == first.body, "\(replay.text)")
        #expect(try c2.fullHistory("phone").count == coldStart.count + 1)
        let other = try c2.event("phone", #"{"event":"didEnterBackground"}"#, headers: [("Idempotency-Key", "old-1")])
        #expect(other.status == 422)
    }
}
