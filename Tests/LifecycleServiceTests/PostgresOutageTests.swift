import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

/// Replicas while their PostgreSQL goes away and comes back (a cluster of this test's own,
/// stopped with a fast shutdown): no restart of lifecycled, nothing acknowledged lost.
@Suite("replicas through a PostgreSQL outage", .serialized, .sqliteOnly("its replicas run on a PostgreSQL of their own in either pass"))
struct PostgresOutageTests {
    @Test("PostgreSQL stopped: writes get 503 with a problem body and /healthz says why; started again: writes succeed and /healthz recovers without a restart; nothing acknowledged is lost")
    func outage() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        let replicas = try Replicas(2, databaseURL: try cluster.makeDatabase())
        let subscriber = try ReplicaSubscriber(port: replicas.ports[1], after: 0)
        defer { subscriber.stop() }
        let c = try replicas.ports.map { try WireClient(port: $0) }
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
    @Test("PostgreSQL hung (every process SIGSTOPped, its sockets held): a write gets 503 with Retry-After within --database-timeout, reads of unknown ids 503 within --database-read-timeout, /healthz answers within 1 s and then says why, known instances are read throughout; on SIGCONT everything recovers and nothing acknowledged is lost")
    func hang() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        // Two HTTP threads, which two reads waiting on the store would take. A read that waits
        // for the shared read connection and then connects anew can hold its thread for about
        // twice its bound, so the bound is a quarter of the 1 s in which /healthz must answer.
        let (timeout, readTimeout) = (2.0, 0.25)
        let replicas = try Replicas(
            2, databaseURL: try cluster.makeDatabase(),
            extra: ["--threads", "2", "--database-timeout", String(timeout), "--database-read-timeout", String(readTimeout)]
        )
        let c = try replicas.ports.map { try WireClient(port: $0) }
        #expect(try c[0].makeInstance("h-0", events: coldStart).status == 200)
        let action = { (key: String) in #"{"action": "openURL", "url": "https://example.com/\#(key)"}"# }
        var answered: [String: HTTPResponse] = [:]
        for index in 0..<10 {
            let key = "before-\(index)"
            let answer = try c[index % 2].request("POST", "/v1/instances/h-0/actions", json: action(key), headers: [("Idempotency-Key", key)])
            #expect(answer.status == 200, "\(key): \(answer.text)")
            answered[key] = answer
        }

        try cluster.freeze()
        let frozenAt = ContinuousClock.now
        let port = replicas.ports[0]
        let writing = PendingRequest(port: port, "POST", "/v1/instances/h-0/actions", json: action("during-0"), headers: [("Idempotency-Key", "during-0")])
        // Ids no replica has: only the store could answer them.
        let unknown = (0..<2).map { PendingRequest(port: port, "GET", "/v1/instances/nobody-\($0)") }
        // Until the write is answered (or should have been), /healthz and a known instance
        // answer within 1 s each time they are asked.
        var probes = 0
        probing: while writing.answer(within: 0) == nil, ContinuousClock.now - frozenAt < .seconds(timeout + readTimeout + 2) {
            for path in ["/healthz", "/v1/instances/h-0"] {
                guard let (answer, _) = PendingRequest(port: port, "GET", path).answer(within: 1) else {
                    Issue.record("GET \(path) got no answer within 1 s while PostgreSQL hangs")
                    break probing
                }
                let response = try answer.get()
                if path == "/healthz" {
                    #expect([200, 503].contains(response.status), "\(response.status) \(response.text)")
                } else {
                    #expect(response.status == 200, "a known instance while PostgreSQL hangs: \(response.status) \(response.text)")
                }
            }
            probes += 1
            usleep(100_000)
        }
        #expect(probes > 0)

        // The write: 503 within its bound (and the catch-up read the committer may be in).
        if let (answer, seconds) = writing.answer(within: max(0, timeout + readTimeout + 1 - (ContinuousClock.now - frozenAt) / .seconds(1))) {
            let refused = try answer.get()
            #expect(refused.status == 503, "a write while PostgreSQL hangs: \(refused.status) \(refused.text)")
            #expect(refused.header("content-type") == "application/problem+json")
            #expect(refused.header("retry-after").flatMap { Int($0) }.map { $0 >= 1 } == true, "Retry-After: \(refused.header("retry-after") ?? "none")")
            #expect(!(refused.json["detail"] as? String ?? "").isEmpty, "\(refused.text)")
            #expect(seconds < timeout + readTimeout + 1, "the write was answered after \(seconds) s")
        } else {
            Issue.record("a write got no answer within \(timeout + readTimeout + 1) s of PostgreSQL hanging")
        }
        for (index, read) in unknown.enumerated() {
            guard let (answer, seconds) = read.answer(within: 0.5) else {
                Issue.record("GET /v1/instances/nobody-\(index) got no answer while PostgreSQL hangs")
                continue
            }
            let refused = try answer.get()
            #expect(refused.status == 503, "an unknown id while PostgreSQL hangs: \(refused.status) \(refused.text)")
            #expect(refused.header("retry-after") != nil, "Retry-After on a read refused for storage")
            #expect(seconds < 2 * readTimeout + 1, "an unknown id was answered after \(seconds) s")
        }
        // A history page, which only the store holds: refused as quickly.
        if let (answer, seconds) = PendingRequest(port: port, "GET", "/v1/instances/h-0/history").answer(within: 2 * readTimeout + 1) {
            let refused = try answer.get()
            #expect(refused.status == 503 && refused.header("retry-after") != nil, "history while PostgreSQL hangs: \(refused.status) \(refused.text)")
            #expect(seconds < 2 * readTimeout + 1)
        } else {
            Issue.record("a history page got no answer within \(2 * readTimeout + 1) s of asking while PostgreSQL hangs")
        }
        // Both replicas say why; the idle one too, which no write has reached.
        for replica in 0..<2 {
            var health: HTTPResponse?
            #expect(
                try eventually(within: 5) {
                    guard let (answer, _) = PendingRequest(port: replicas.ports[replica], "GET", "/healthz").answer(within: 1) else { return false }
                    health = try answer.get()
                    return health?.status == 503
                },
                "replica \(replica)'s /healthz while PostgreSQL hangs: \(health.map { "\($0.status) \($0.text)" } ?? "no answer within 1 s")"
            )
            let detail = health?.json["detail"] as? String ?? ""
            #expect(detail.contains("storage cannot") && detail.contains("PostgreSQL"), "/healthz says why: \(detail)")
            #expect(try c[replica].request("GET", "/v1/instances/h-0").status == 200, "replica \(replica) reads a known instance")
        }

        try cluster.thaw()
        for replica in 0..<2 {
            var health: HTTPResponse?
            #expect(
                try eventually(within: 30) {
                    health = try c[replica].request("GET", "/healthz")
                    return health?.status == 200
                },
                "replica \(replica)'s /healthz recovers: \(health?.text ?? "")"
            )
        }
        // The refused write, sent again with its key: applied now, or answered as it was if it
        // committed after all.
        var retried: HTTPResponse?
        #expect(try eventually(within: 30) {
            retried = try c[0].request("POST", "/v1/instances/h-0/actions", json: action("during-0"), headers: [("Idempotency-Key", "during-0")])
            return retried?.status == 200
        }, "the refused write succeeds once PostgreSQL goes on: \(retried.map { "\($0.status) \($0.text)" } ?? "no answer")")
        answered["during-0"] = retried
        for index in 0..<10 {
            let key = "after-\(index)"
            let answer = try c[index % 2].request("POST", "/v1/instances/h-0/actions", json: action(key), headers: [("Idempotency-Key", key)])
            #expect(answer.status == 200, "\(key): \(answer.text)")
            answered[key] = answer
        }
        #expect(try c[1].request("GET", "/v1/instances/nobody-0").status == 404)
        #expect(replicas.alive == [0, 1], "neither replica restarted")

        // Every acknowledged write is stored once, as answered; nothing else was written.
        let history = try c[1].fullHistory("h-0")
        #expect(history.compactMap { $0["version"] as? Int } == Array(1...history.count), "versions contiguous")
        var stored: [String: [String: Any]] = [:]
        for record in history.dropFirst(coldStart.count) {
            let url = (record["parameters"] as? [String: Any])?["url"] as? String ?? ""
            let key = String(url.dropFirst("https://example.com/".count))
            #expect(stored[key] == nil, "\(key) stored once")
            stored[key] = record
        }
        #expect(Set(stored.keys) == Set(answered.keys))
        for (key, answer) in answered {
            #expect(stored[key].map { NSDictionary(dictionary: $0).isEqual(to: answer.json) } == true, "\(key) stored as answered")
        }
    }
}

/// A request on a connection and a thread of its own, answered (or not) while the test goes on.
final class PendingRequest: Sendable {
    private let outcome = LockedValue<(answer: Result<HTTPResponse, any Error>, seconds: Double)?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(port: UInt16, _ method: String, _ path: String, json: String? = nil, headers: [(String, String)] = []) {
        let started = ContinuousClock.now
        Thread.detachNewThread { [self] in
            let answer = Result { () throws -> HTTPResponse in
                let connection = try WireClient(port: port)
                return try json.map { try connection.request(method, path, json: $0, headers: headers) } ?? connection.request(method, path)
            }
            outcome.withLock { $0 = (answer, (ContinuousClock.now - started) / .seconds(1)) }
            done.signal()
        }
    }

    /// The answer and the seconds it took, if it has come or comes within `seconds` from now.
    func answer(within seconds: Double) -> (answer: Result<HTTPResponse, any Error>, seconds: Double)? {
        if let outcome = outcome.withLock({ $0 }) { return outcome }
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        done.signal()
        return outcome.withLock { $0 }
    }
}

@Suite("database timeout flags", .sqliteOnly("parses flags; opens no store"))
struct DatabaseTimeoutConfigurationTests {
    @Test("--database-timeout and --database-read-timeout, from flags or the environment, default to 5 s and 1 s and refuse no bound at all")
    func timeouts() throws {
        let defaults = try Configuration.parse(arguments: [], environment: [:])
        #expect(defaults.databaseTimeout == 5 && defaults.databaseReadTimeout == 1)
        let flags = try Configuration.parse(
            arguments: ["--database-timeout", "2.5", "--database-read-timeout=0.25"], environment: ["LIFECYCLED_DATABASE_TIMEOUT": "9"]
        )
        #expect(flags.databaseTimeout == 2.5 && flags.databaseReadTimeout == 0.25)
        let environment = try Configuration.parse(arguments: [], environment: ["LIFECYCLED_DATABASE_READ_TIMEOUT": "3"])
        #expect(environment.databaseReadTimeout == 3)
        for (flag, value) in [("--database-timeout", "0"), ("--database-read-timeout", "-1"), ("--database-timeout", "forever")] {
            #expect(throws: Configuration.ParseError.badValue(flag, value)) { try Configuration.parse(arguments: [flag, value], environment: [:]) }
        }
    }
}
