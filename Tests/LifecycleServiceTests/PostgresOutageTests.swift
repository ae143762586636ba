import Foundation
import PostgresSupport
import Testing

/// Replicas while their PostgreSQL goes away and comes back (a cluster of this test's own,
/// stopped with a fast shutdown): no restart of lifecycled, nothing acknowledged lost.
@Suite("replicas through a PostgreSQL outage", .serialized)
struct PostgresOutageTests {
    @Test("PostgreSQL stopped: writes get 503 with a problem body and /healthz says why; started again: writes succeed and /healthz recovers without a restart; nothing acknowledged is lost")
    func outage() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        let replicas = try Replicas(2, databaseURL: try cluster.makeDatabase())
        let subscriber = try ReplicaSubscriber(port: replicas.ports[1], after: 0)
        defer { subscriber.stop() }
        let c = try replicas.ports.map { try HTTPConnection(port: $0) }
        #expect(try c[0].makeInstance("o-0", events: coldStart).status == 200)
        #expect(try c[1].makeInstance("o-1", events: coldStart).status == 200)

        var answered: [String: HTTPResponse] = [:]
        /// An `openURL` action named by its key, on replica `replica`: valid in any state these instances reach.
        func write(_ key: String, on replica: Int, instance: String) throws -> HTTPResponse {
            try c[replica].request(
                "POST", "/v1/instances/\(instance)/actions", json: #"{"action": "openURL", "url": "https://example.com/\#(key)"}"#,
                headers: [("Idempotency-Key", key)]
            )
        }
        for index in 0..<20 {
            let key = "before-\(index)"
            let answer = try write(key, on: index % 2, instance: "o-\(index % 2)")
            #expect(answer.status == 200, "\(key): \(answer.text)")
            answered[key] = answer
        }

        try cluster.stop()
        // Both replicas refuse writes, saying why; neither restarts.
        for replica in 0..<2 {
            let key = "during-\(replica)"
            let refused = try write(key, on: replica, instance: "o-\(replica)")
            #expect(refused.status == 503, "\(key) on replica \(replica) while PostgreSQL is down: \(refused.status) \(refused.text)")
            #expect(refused.header("content-type") == "application/problem+json")
            #expect(refused.json["status"] as? Int == 503 && !(refused.json["detail"] as? String ?? "").isEmpty, "\(refused.text)")
            let health = try c[replica].request("GET", "/healthz")
            #expect(health.status == 503, "replica \(replica) /healthz while PostgreSQL is down: \(health.text)")
            #expect(health.header("content-type") == "application/problem+json")
            let detail = health.json["detail"] as? String ?? ""
            #expect(detail.contains("storage cannot") && detail.contains("PostgreSQL"), "/healthz says why: \(detail)")
            #expect(health.json["failingSince"] is String, "\(health.text)")
        }
        // A read that the cache answers still works.
        #expect(try c[1].request("GET", "/v1/instances/o-0").status == 200)

        try cluster.restart()
        // Replica 1 gets no write now: its /healthz must recover all the same (a load balancer
        // that routes by /healthz would never send it the write that clears it otherwise).
        var health1: HTTPResponse?
        #expect(
            try eventually(within: 30) {
                health1 = try c[1].request("GET", "/healthz")
                return health1?.status == 200
            },
            "replica 1's /healthz recovers without a write: \(health1?.text ?? "")"
        )
        // Replica 0: the refused write, sent again with its key, now succeeds (without a restart).
        var retried: HTTPResponse?
        #expect(try eventually(within: 30) {
            retried = try write("during-0", on: 0, instance: "o-0")
            return retried?.status == 200
        }, "replica 0 writes again once PostgreSQL is back: \(retried.map { "\($0.status) \($0.text)" } ?? "no answer")")
        answered["during-0"] = retried
        #expect(try c[0].request("GET", "/healthz").status == 200)
        answered["during-1"] = try write("during-1", on: 1, instance: "o-1")
        #expect(answered["during-1"]?.status == 200, "\(answered["during-1"]?.text ?? "")")
        for index in 0..<20 {
            let key = "after-\(index)"
            let answer = try write(key, on: index % 2, instance: "o-\(index % 2)")
            #expect(answer.status == 200, "\(key): \(answer.text)")
            answered[key] = answer
        }
        #expect(replicas.alive == [0, 1], "neither replica restarted")

        // Every acknowledged write is stored once; nothing else was written.
        var stored: [String: [String: Any]] = [:]
        var lastSequence: Int64 = 0
        for instance in ["o-0", "o-1"] {
            let history = try c[0].fullHistory(instance)
            let versions = history.compactMap { $0["version"] as? Int }
            #expect(versions == Array(1...max(1, versions.count)), "\(instance): versions contiguous")
            #expect(history.count == coldStart.count + answered.keys.filter { answered[$0]?.json["instance"] as? String == instance }.count, "\(instance): one record per acknowledged write")
            for record in history.dropFirst(coldStart.count) {
                let url = (record["parameters"] as? [String: Any])?["url"] as? String ?? ""
                stored[String(url.dropFirst("https://example.com/".count))] = record
                lastSequence = max(lastSequence, Int64(record["sequence"] as? Int ?? 0))
            }
        }
        #expect(Set(stored.keys) == Set(answered.keys))
        for (key, answer) in answered {
            #expect(stored[key].map { NSDictionary(dictionary: $0).isEqual(to: answer.json) } == true, "\(key) stored as answered")
        }
        // Replica 1's stream went on across the outage: every record, in order, once.
        #expect(subscriber.waitForRecord(lastSequence), "the stream on replica 1 reached \(lastSequence); it is at \(subscriber.lastRecordID)")
        subscriber.stop()
        #expect(subscriber.records.map(\.id) == (1...lastSequence).map { Optional($0) })
        #expect(subscriber.connections.count == 1, "one connection throughout")
    }
}
