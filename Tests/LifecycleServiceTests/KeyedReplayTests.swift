import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService
@testable import LifecycleStore

/// A keyed input replayed late: after its instance was deleted and made again (refused, never answered with a record no
/// history holds), and after the key store has aged past a day (answered as the first time, never applied twice).
@Suite("keyed replays across deletion and age")
struct KeyedReplayTests {
    /// One keyed input of each kind on `app`.
    static let inputs = [
        BatchItemSpec(instance: "app", kind: .event, body: #"{"event":"didFinishLaunching"}"#, key: "e1"),
        BatchItemSpec(instance: "app", kind: .action, body: #"{"action":"openURL","url":"https://example.com"}"#, key: "a1"),
        BatchItemSpec(instance: "app", kind: .launch, key: "l1"),
        BatchItemSpec(instance: "app", kind: .gap, body: #"{"dropped":3}"#, key: "g1"),
    ]

    static func send(_ item: BatchItemSpec, to c: RouterClient) throws -> HTTPResponse {
        let request = item.single
        return try c.request(request.method, request.path, headers: request.headers, body: request.body, contentType: request.body == nil ? nil : "application/json")
    }

    /// Deletes `app` and makes it again with the same model at once, most often within the millisecond of the deletion
    /// (and of the first creation, in a test): its creation time, a millisecond later then, is what tells it from the
    /// one deleted.
    static func remake(on c: RouterClient) throws {
        let before = try c.request("GET", "/v1/instances/app").header("etag")
        #expect(try c.request("DELETE", "/v1/instances/app").status == 204)
        let made = try c.request("PUT", "/v1/instances/app", json: #"{"model":"ios-app"}"#)
        #expect(made.status == 201 && made.header("etag") != before, "\(String(describing: before)) again")
    }

    /// `problem` is the refusal of a replay on the instance made again.
    static func expectStaleReplay(_ problem: [String: Any]?, key: String) {
        #expect(problem?["status"] as? Int == 409)
        #expect(problem?["type"] as? String == "/problems/replayed-instance-deleted")
        #expect(problem?["instance"] as? String == "app")
        #expect(problem?["detail"] as? String
            == "the input first sent with Idempotency-Key \"\(key)\" went to an instance \"app\" since deleted; nothing was applied to the one made again under its id")
        #expect(problem?["record"] == nil)
    }

    @Test("made, deleted and made again in one transaction, so in one millisecond: the two instances' ETags and keys tell them apart")
    func remadeWithinAMillisecond() throws {
        let server = try TestServer(.router)
        let registry = server.service!.registry
        let key = IdempotencyKey(key: "app e1", fingerprint: Array("e1".utf8))
        let keyed = InstanceRegistry.Write.apply(.event("didFinishLaunching", [:]), id: "app", expected: nil, key: key)
        let put = InstanceRegistry.Write.create(id: "app", model: "ios-app", isPut: true, key: nil)
        let answers = try commitAsOneBatch(registry, [put, keyed, .delete(id: "app", expected: nil), put, .delete(id: "app", expected: nil), put])
        #expect(answers.map(\.status) == [201, 200, 204, 201, 204, 201])
        // What an ETag ("VERSION-CREATED") and a key's binding name each by.
        let created = [answers[0], answers[3], answers[5]].compactMap { $0.json["createdAt"] as? String }
        #expect(created.count == 3 && Set(created).count == 3, "\(created)")
        let replay = try commitAsOneBatch(registry, [keyed])[0]
        #expect(replay.status == 409 && replay.detail?.contains("since deleted") == true, "\(replay.detail ?? "")")
        #expect(try server.router().fullHistory("app").isEmpty, "nothing applied to the instance made last")
    }

    @Test("a keyed input replayed alone after its instance was deleted and made again is 409 replayed-instance-deleted, and applies nothing")
    func singleAfterRemake() throws {
        let server = try TestServer(.router)
        var c = server.router()
        #expect(try c.request("PUT", "/v1/instances/app", json: #"{"model":"ios-app"}"#).status == 201)
        var first: [HTTPResponse] = []
        for item in Self.inputs { first.append(try Self.send(item, to: c)) }
        #expect(first.map(\.status) == [200, 200, 200, 200], "\(first.map(\.text))")
        #expect(try Self.inputs.map { try Self.send($0, to: c).body } == first.map(\.body), "replayed while the instance lives: as first answered")

        try Self.remake(on: c)
        for round in ["at once", "after a restart"] {
            for item in Self.inputs {
                let replay = try Self.send(item, to: c)
                #expect(replay.status == 409 && replay.header("content-type") == "application/problem+json", "\(round): \(replay.text)")
                Self.expectStaleReplay(replay.json, key: item.key!)
            }
            #expect(try c.fullHistory("app").isEmpty, "\(round): nothing applied to the instance made again")
            #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == 0)
            try server.restart()
            c = server.router()
        }
        // A new key is a new input, applied to the instance as it is now.
        #expect(try c.event("app", #"{"event":"didFinishLaunching"}"#, headers: [("Idempotency-Key", "e2")]).status == 200)
    }

    @Test("a batch replayed after its instance was deleted and made again refuses each keyed item, the create's and the inputs', and applies nothing")
    func batchAfterRemake() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let items = [BatchItemSpec(instance: "app", kind: .create, body: #"{"model":"ios-app"}"#, key: "c1")] + Self.inputs
        let first = try c.request("POST", "/v1/batch", json: batchBody(items))
        #expect((first.json["results"] as? [[String: Any]])?.map { $0["status"] as? Int } == [201, 200, 200, 200, 200], "\(first.text)")

        try Self.remake(on: c)
        let replay = try c.request("POST", "/v1/batch", json: batchBody(items))
        let results = try #require(replay.json["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? Int } == [409, 409, 409, 409, 409], "\(replay.text)")
        #expect((results[0]["problem"] as? [String: Any])?["type"] as? String == "/problems/created-instance-deleted")
        for (item, result) in zip(items, results).dropFirst() {
            #expect(result["record"] == nil)
            Self.expectStaleReplay(result["problem"] as? [String: Any], key: item.key!)
        }
        #expect(try c.fullHistory("app").isEmpty, "nothing applied to the instance made again")
    }

    /// Makes every idempotency key `server`'s store holds look `hours` older, with the service stopped, then starts it
    /// again (which purges what has expired).
    static func ageKeys(of server: TestServer, byHours hours: Int64) throws {
        server.service?.stop()
        server.service = nil
        let sql = "UPDATE idempotency SET created_at = created_at - \(hours * 3_600_000)"
        if let url = server.configuration.databaseURL {
            try PostgresCluster.execute(sql, on: url)
        } else {
            try Database(path: server.dataDirectory + "/" + SQLiteStore.fileName).execute(sql)
        }
        try server.restart()
    }

    @Test("a batch and a single input replayed after the key store aged 25 hours are answered as the first time, applied once")
    func replayAfterADay() throws {
        let server = try TestServer(.router)
        var c = server.router()
        let items = [BatchItemSpec(instance: "app", kind: .create, body: #"{"model":"ios-app"}"#, key: "c1")] + Self.inputs
        let first = try c.request("POST", "/v1/batch", json: batchBody(items))
        let firstResults = try #require(first.json["results"] as? [[String: Any]])
        #expect(firstResults.map { $0["status"] as? Int } == [201, 200, 200, 200, 200], "\(first.text)")
        let single = BatchItemSpec(instance: "app", kind: .gap, body: #"{"dropped":5}"#, key: "g2")
        let firstSingle = try Self.send(single, to: c)
        #expect(firstSingle.status == 200)
        let history = try c.fullHistory("app")

        try Self.ageKeys(of: server, byHours: 25)
        c = server.router()
        let again = try c.request("POST", "/v1/batch", json: batchBody(items))
        let againResults = try #require(again.json["results"] as? [[String: Any]])
        for (index, result) in againResults.enumerated() {
            #expect(NSDictionary(dictionary: result) == NSDictionary(dictionary: firstResults[index]), "items[\(index)] answered as the first time")
        }
        #expect(try Self.send(single, to: c).body == firstSingle.body)
        #expect(try c.fullHistory("app").count == history.count, "nothing applied twice")
    }
}
