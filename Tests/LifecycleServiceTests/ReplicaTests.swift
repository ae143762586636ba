import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Several `lifecycled` processes on one PostgreSQL database, as replicas behind a load
/// balancer: any replica takes any write, and every replica's stream carries every record.
@Suite("replicas on one PostgreSQL", .serialized, .sqliteOnly("its replicas run on a PostgreSQL of their own in either pass"))
struct ReplicaTests {
    static let writers = 8
    static let instances = 4
    static let writesPerWriter = 100

    @Test("3 replicas, 8 writers spread over them on 4 shared instances: every stream has every record once, in one order; histories are contiguous; a retry on any replica is answered as the original")
    func threeReplicas() throws {
        try writeAcrossReplicas(killing: nil)
    }

    @Test("kill -9 of a replica in the middle of the writes: its writers retry elsewhere with the same key and are answered as the original, no acknowledged record is lost, its subscriber resumes on another replica exactly")
    func killOneReplica() throws {
        try writeAcrossReplicas(killing: 2)
    }

    /// Writes over three replicas; `killing`: the replica killed once 250 writes are answered.
    private func writeAcrossReplicas(killing victim: Int?) throws {
        let replicas = try Replicas(3, databaseURL: try PostgresCluster.shared.makeDatabase())
        // Subscribed before anything is written, from the start: each must see sequence numbers 1, 2, 3, ...
        let subscribers = try replicas.ports.map { try ReplicaSubscriber(port: $0, after: 0) }
        defer { subscribers.forEach { $0.stop() } }
        for index in 0..<Self.instances {
            // Each instance is made on another replica than the one before.
            let made = try WireClient(port: replicas.ports[index % replicas.count]).makeInstance("rep-\(index)", events: coldStart)
            #expect(made.status == 200, "rep-\(index): \(made.text)")
        }

        let writers = ReplicaWriters(Self.writers, ports: replicas.ports, writes: Self.writesPerWriter) { "rep-\($0 % Self.instances)" }
        var resumedOn: UInt16?
        if let victim {
            #expect(eventually(within: 120) { writers.acknowledged.count >= 250 }, "the writers were busy when the replica died")
            let killed = replicas.kill(victim)
            #expect(killed.status == SIGKILL, "killed, not exited: \(killed.stderr.suffix(1000))")
            #expect(eventually(within: 20) { subscribers[victim].isCut }, "the killed replica's stream was cut")
            resumedOn = replicas.ports[(victim + 1) % replicas.count]
            subscribers[victim].resume(on: resumedOn!)
        }
        #expect(writers.wait(within: 300), "every writer finished")
        #expect(writers.failures == [], "writes answered with neither a record nor 5xx")
        #expect(writers.unavailableAnswers == [], "writes answered 5xx by a replica that lives")
        let answers = writers.acknowledged
        try #require(answers.count == Self.writers * Self.writesPerWriter, "every write answered with a record")
        #expect(Set(answers.map(\.key)).count == answers.count)
        #expect(Set(answers.map(\.sequence)).count == answers.count, "no two writes were answered with the same record")
        if victim != nil {
            #expect(answers.contains { $0.attempts > 1 }, "writers of the killed replica retried elsewhere")
        }
        let last = Int64(answers.map(\.sequence).max()!)

        // Streams: every subscriber, the resumed one too, has records 1...last, the same ones in the same order.
        for (index, subscriber) in subscribers.enumerated() {
            #expect(subscriber.waitForRecord(last), "subscriber \(index) reached \(last); it is at \(subscriber.lastRecordID), \(subscriber.failure ?? "")")
        }
        subscribers.forEach { $0.stop() }
        let reference = subscribers[0].records
        #expect(reference.map(\.id) == (1...last).map { Optional($0) }, "subscriber 0: sequence numbers dense from 1 to \(last), each once")
        for (index, subscriber) in subscribers.enumerated() {
            #expect(subscriber.failure == nil, "subscriber \(index): \(subscriber.failure ?? "")")
            #expect(subscriber.events.filter { !$0.isRecord } == [], "subscriber \(index): no gap, reset or other event")
            if let difference = firstDifference(subscriber.records, reference) {
                Issue.record("subscriber \(index) differs from subscriber 0 at \(difference)")
            }
        }
        if let victim {
            let connections = subscribers[victim].connections
            #expect(connections.count == 2, "the killed replica's subscriber connected twice: \(connections)")
            if connections.count == 2 {
                #expect(connections[1].port == resumedOn)
                #expect(connections[1].lastEventID > 0, "it had records before the replica died")
                let resumed = subscribers[victim].records.filter { ($0.id ?? 0) > connections[1].lastEventID }
                #expect(resumed.first?.id == connections[1].lastEventID + 1, "the resumed stream starts right after Last-Event-ID")
            }
        }

        // Histories: contiguous versions; past the cold start, exactly the answered writes' records.
        let alive = replicas.alive
        let reader = try WireClient(port: replicas.ports[alive[0]])
        var historySizes: [String: Int] = [:]
        for index in 0..<Self.instances {
            let id = "rep-\(index)"
            let history = try reader.fullHistory(id)
            historySizes[id] = history.count
            let versions = history.compactMap { $0["version"] as? Int }
            #expect(versions == Array(1...max(1, versions.count)), "\(id): versions contiguous from 1")
            let written = Dictionary(history.filter { ($0["version"] as? Int ?? 0) > coldStart.count }.map { ($0["sequence"] as? Int ?? 0, $0) }) { first, _ in first }
            let answered = answers.filter { $0.instance == id }
            #expect(written.count == history.count - coldStart.count, "\(id): no sequence number twice in its history")
            #expect(Set(written.keys) == Set(answered.map(\.sequence)), "\(id): the records past the cold start are those answered, each once")
            for answer in answered {
                guard let stored = written[answer.sequence] else {
                    Issue.record("\(id): the record of \(answer.key) (sequence \(answer.sequence), answered \(answer.status) by replica \(answer.replica)) is missing")
                    continue
                }
                #expect(NSDictionary(dictionary: stored).isEqual(to: answer.record), "\(id): the stored record of \(answer.key) is the one answered")
                if let url = (stored["parameters"] as? [String: Any])?["url"] as? String {
                    #expect(url == "https://example.com/\(answer.key)", "an action's record names its own key")
                }
            }
            // Every replica's cached instance catches up with the store.
            for replica in alive {
                let c = try WireClient(port: replicas.ports[replica])
                #expect(
                    try eventually(within: 20) { try c.request("GET", "/v1/instances/\(id)").json["version"] as? Int == versions.last },
                    "replica \(replica) shows \(id) at version \(versions.last ?? 0)"
                )
            }
        }

        // Every write sent again, with its key, to another replica than the one that answered
        // it: the same answer, byte for byte, and nothing written.
        let connections = try alive.map { try WireClient(port: replicas.ports[$0]) }
        for (index, answer) in answers.enumerated() {
            let writer = Int(answer.key.dropFirst().prefix { $0 != "-" })!
            let (path, json) = ReplicaWriters.body(writer: writer, index: Int(answer.key.split(separator: "-")[1])!, key: answer.key)
            var target = index % alive.count
            if alive[target] == answer.replica { target = (target + 1) % alive.count }
            let again = try connections[target].request("POST", "/v1/instances/\(answer.instance)/\(path)", json: json, headers: [("Idempotency-Key", answer.key)])
            #expect(again.status == answer.status && again.body == answer.body, "\(answer.key) again on replica \(alive[target]): \(again.status) \(again.text)")
        }
        for (id, size) in historySizes {
            #expect(try reader.fullHistory(id).count == size, "\(id): the retries wrote nothing")
        }
        if let victim {
            // The survivors stop cleanly; the killed one is already gone.
            #expect(replicas.alive == (0..<replicas.count).filter { $0 != victim })
        }
    }

    @Test("a replica that hears no notification still gets another's records, by polling every --poll-interval")
    func pollingFallback() throws {
        let cluster = try PostgresCluster.shared
        // Replica 1 listens on another database, whose channel no commit here notifies.
        let replicas = try Replicas(
            2, databaseURL: try cluster.makeDatabase(), perReplica: [[], ["--database-listen-url", try cluster.makeDatabase(), "--poll-interval", "0.2"]]
        )
        let writer = try WireClient(port: replicas.ports[0])
        let deaf = try ReplicaSubscriber(port: replicas.ports[1], after: 0)
        defer { deaf.stop() }
        try writer.makeInstance("p", events: coldStart)
        #expect(deaf.waitForRecord(4, within: 20), "the stream on the replica without notifications reached 4; it is at \(deaf.lastRecordID)")
        let listed = try WireClient(port: replicas.ports[1]).request("GET", "/v1/instances").json["items"] as? [[String: Any]]
        #expect(listed?.first?["state"] as? String == "foreground", "its copy caught up too: \(String(describing: listed))")
        // Its coverage counters too, a divergence's with the rows'.
        #expect(try writer.event("p", #"{"event": "willResignActive", "ranHooks": []}"#).status == 200)
        let coverage = try writer.request("GET", "/v1/models/ios-app/coverage")
        let foreground = (coverage.json["states"] as? [[String: Any]])?.first { $0["state"] as? String == "foreground" }
        #expect(foreground?["divergences"] as? Int == 1, "\(coverage.text)")
        let reader = try WireClient(port: replicas.ports[1])
        #expect(try eventually(within: 20) { try reader.request("GET", "/v1/models/ios-app/coverage").body == coverage.body }, "the replica's coverage caught up")
    }

    @Test("a stream resumed on a replica that has not yet read what the client saw on another gets exactly what follows, once it has")
    func resumeOnReplicaBehind() throws {
        let cluster = try PostgresCluster.shared
        let url = try cluster.makeDatabase()
        // Replica 1 listens on another database, whose channel no commit here notifies, and
        // polls once a minute: it learns of replica 0's commits only when it commits itself.
        let replicas = try Replicas(2, databaseURL: url, perReplica: [[], ["--database-listen-url", try cluster.makeDatabase(), "--poll-interval", "60"]])
        let ahead = try WireClient(port: replicas.ports[0])
        let behind = try WireClient(port: replicas.ports[1])
        let seen = try ReplicaSubscriber(port: replicas.ports[0], after: 0)
        defer { seen.stop() }
        try ahead.makeInstance("r", events: coldStart)
        for event in ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"] {
            #expect(try ahead.event("r", #"{"event": "\#(event)"}"#).status == 200)
        }
        #expect(seen.waitForRecord(8))
        // The client saw up to 6 on replica 0 and comes back on replica 1, which has read nothing yet.
        // (Its list comes from its copy, which has not caught up; a GET of the instance would
        // read it from the database.)
        try #require(try (behind.request("GET", "/v1/instances").json["items"] as? [Any])?.isEmpty == true, "replica 1 is behind")
        let resumed = try ReplicaSubscriber(port: replicas.ports[1], after: 6)
        defer { resumed.stop() }
        // Replica 1 commits: it reads what replica 0 committed first, then publishes its own record.
        let own = try behind.event("r", #"{"event": "willResignActive"}"#)
        #expect(own.status == 200 && own.json["version"] as? Int == 8, "replica 1 decided on the committed instance: \(own.text)")
        #expect(resumed.waitForRecord(9, within: 20), "the resumed stream reached 9; it is at \(resumed.lastRecordID)")
        #expect(seen.waitForRecord(9, within: 20))
        seen.stop()
        resumed.stop()
        #expect(resumed.records.map(\.id) == [7, 8, 9], "exactly the records after Last-Event-ID 6: \(resumed.events)")
        #expect(firstDifference(resumed.records, Array(seen.records.dropFirst(6))) == nil, "the same records as replica 0's stream")
        #expect(resumed.events.filter { !$0.isRecord } == [], "no reset or gap")
    }

    @Test("a write on one replica, then at once the next on another: each decides on what the other committed")
    func writeThenWriteElsewhere() throws {
        let replicas = try Replicas(3, databaseURL: try PostgresCluster.shared.makeDatabase())
        let c = try replicas.ports.map { try WireClient(port: $0) }
        for round in 0..<20 {
            let id = "x-\(round)"
            let created = try c[0].request("PUT", "/v1/instances/\(id)", json: "{}")
            #expect(created.status == 201, "\(id): \(created.text)")
            // Read at once through another replica (before it has caught up, as a rule): found, as created.
            let read = try c[2].request("GET", "/v1/instances/\(id)")
            #expect(read.status == 200 && read.body == created.body, "\(id) GET on replica 2 right after the PUT on replica 0: \(read.status) \(read.text)")
            let history = try c[2].request("GET", "/v1/instances/\(id)/history")
            #expect(history.status == 200, "\(id) history on replica 2 right after the PUT on replica 0: \(history.status) \(history.text)")
            // A PUT of the same id on another replica finds it (a second create would be a second instance).
            let found = try c[1].request("PUT", "/v1/instances/\(id)", json: "{}")
            #expect(found.status == 200 && found.body == created.body, "\(id) PUT again on replica 1: \(found.status) \(found.text)")
            let steps: [(replica: Int, body: String, from: String)] = [
                (1, #"{"event": "didFinishLaunching"}"#, "initializing"),
                (2, #"{"event": "willConnectToWindow", "window": "main"}"#, "launching"),
                (0, #"{"event": "didBecomeActive"}"#, "connected"),
                (1, #"{"event": "willResignActive"}"#, "foreground"),
            ]
            for (version, step) in steps.enumerated() {
                let answer = try c[step.replica].event(id, step.body)
                #expect(answer.status == 200, "\(id) step \(version + 1) on replica \(step.replica): \(answer.text)")
                #expect(answer.json["version"] as? Int == version + 1 && answer.json["from"] as? String == step.from, "\(id) on replica \(step.replica): \(answer.text)")
            }
            // Deleted on one replica, then an event on another at once: the instance is gone there too.
            let deleted = try c[2].request("DELETE", "/v1/instances/\(id)")
            #expect(deleted.status == 204, "\(id) DELETE on replica 2: \(deleted.text)")
            let afterDelete = try c[0].event(id, #"{"event": "didBecomeActive"}"#)
            #expect(afterDelete.status == 404, "\(id) event on replica 0 after the delete on replica 2: \(afterDelete.status) \(afterDelete.text)")
            let remade = try c[1].request("PUT", "/v1/instances/\(id)", json: "{}")
            #expect(remade.status == 201 && remade.json["version"] as? Int == 0, "\(id) made again on replica 1: \(remade.status) \(remade.text)")
        }
        for replica in 0..<replicas.count {
            #expect(
                try eventually(within: 20) { try c[replica].request("GET", "/v1/instances?limit=1000").json["items"].map { ($0 as? [Any])?.count } == 20 },
                "replica \(replica) lists the 20 instances"
            )
        }
    }
}

/// Where two streams' records first differ (id, type or data), or `nil` if they are the same.
func firstDifference(_ records: [StreamEvent], _ reference: [StreamEvent]) -> String? {
    for (index, (a, b)) in zip(records, reference).enumerated() where a.id != b.id || a.type != b.type || a.data != b.data {
        return "record \(index): \(a) instead of \(b)"
    }
    guard records.count == reference.count else {
        return "\(records.count) records instead of \(reference.count); the first extra: \(records.count > reference.count ? records[reference.count] : reference[records.count])"
    }
    return nil
}
