import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs `sql` with psql on `url`; its rows unaligned (`|` between columns, a header first).
func runPSQL(_ url: String, _ sql: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
    process.arguments = ["-X", "-A", "-P", "footer=off", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql]
    let output = PipeCollector()
    let errors = PipeCollector()
    process.standardOutput = output.writeEnd
    process.standardError = errors.writeEnd
    try process.run()
    try output.writeEnd.close()
    try errors.writeEnd.close()
    let printed = output.finish()
    let complaint = errors.finish()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw HTTPClientError(description: "psql \(sql): \(complaint)") }
    return printed
}

@Suite("replicas through PgBouncer", .serialized, .sqliteOnly("its replicas run on a PostgreSQL of their own in either pass"))
struct PgBouncerTests {
    @Test("two replicas write and read through PgBouncer in transaction mode, LISTEN on a direct connection: a stream on one replica gets the other's records at once")
    func throughPgBouncer() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        try cluster.startPgBouncer()
        let direct = try cluster.makeDatabase()
        let database = try #require(URLComponents(string: direct)?.path.dropFirst().description)
        // Polling only once a minute: what replica 0 commits reaches replica 1's stream within
        // this test's deadlines only through NOTIFY, on the direct connection.
        let replicas = try Replicas(2, databaseURL: try cluster.throughPgBouncer(direct), listenURL: direct, extra: ["--poll-interval", "60"])
        let subscriber = try ReplicaSubscriber(port: replicas.ports[1], after: 0)
        defer { subscriber.stop() }
        #expect(try WireClient(port: replicas.ports[0]).makeInstance("b-0", events: coldStart).status == 200)
        #expect(try WireClient(port: replicas.ports[1]).makeInstance("b-1", events: coldStart).status == 200)

        let writers = ReplicaWriters(4, ports: replicas.ports, writes: 50) { "b-\($0 % 2)" }
        #expect(writers.wait(within: 240))
        #expect(writers.failures == [] && writers.unavailableAnswers == [], "\(writers.failures) \(writers.unavailableAnswers)")
        let answers = writers.acknowledged
        #expect(answers.count == 200)

        // Reads on each replica: histories hold exactly the answered records, in contiguous versions.
        for (replica, port) in replicas.ports.enumerated() {
            let c = try WireClient(port: port)
            for id in ["b-0", "b-1"] {
                let history = try c.fullHistory(id, pageSize: 30)
                let versions = history.compactMap { $0["version"] as? Int }
                #expect(versions == Array(1...max(1, versions.count)), "\(id) on replica \(replica)")
                #expect(
                    Set(history.dropFirst(coldStart.count).compactMap { $0["sequence"] as? Int }) == Set(answers.filter { $0.instance == id }.map(\.sequence)),
                    "\(id) on replica \(replica): the answered records"
                )
                #expect(try eventually(within: 20) { try c.request("GET", "/v1/instances/\(id)").json["version"] as? Int == versions.last })
            }
        }

        // One more write on replica 0 alone: replica 1's stream has it well before its next poll.
        let last = try WireClient(port: replicas.ports[0]).request(
            "POST", "/v1/instances/b-0/actions", json: #"{"action": "openURL", "url": "https://example.com/last"}"#
        )
        let lastSequence = try #require(committedRecord(last)?.sequence, "\(last.text)")
        #expect(subscriber.waitForRecord(Int64(lastSequence), within: 20), "replica 1's stream got \(lastSequence) through NOTIFY; it is at \(subscriber.lastRecordID)")
        subscriber.stop()
        #expect(subscriber.records.map(\.id) == (1...Int64(lastSequence)).map { Optional($0) }, "every record once, in order")

        // The writes went through PgBouncer: the server has at most its two pooled connections
        // to the database besides the replicas' two direct LISTEN ones (each replica's write
        // and read connections, made directly, would be four more).
        let backends = try runPSQL(cluster.url, "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)'")
            .split(separator: "\n").compactMap { Int($0) }.first
        #expect(backends.map { $0 >= 3 && $0 <= 4 } == true, "connections to \(database) on the server: \(backends.map(String.init) ?? "none")")
    }
}
