import Foundation
import PostgresSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Debian's PgBouncer in transaction mode in front of a PostgreSQL cluster of the test's own,
/// on a Unix socket in a temporary folder, trusting every client (a test's, on loopback only).
final class PgBouncer {
    let directory: String
    /// Names the socket file only (`directory/.s.PGSQL.port`): it listens on no TCP port.
    let port: UInt16 = 6432
    /// The most server connections per database and user: fewer than the replicas' clients,
    /// so that clients take turns on them, as transaction mode allows.
    let poolSize = 2
    private let process: SpawnedProcess

    /// Starts PgBouncer for the cluster whose socket is in `clusterDirectory`, as the
    /// `postgres` user (PgBouncer refuses to run as root), and waits until it answers.
    init(clusterDirectory: String) throws {
        directory = NSTemporaryDirectory() + "lifecycled-bouncer-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try """
            [databases]
            * = host=\(clusterDirectory) port=5432

            [pgbouncer]
            listen_addr =
            listen_port = \(port)
            unix_socket_dir = \(directory)
            auth_type = trust
            auth_file = \(directory)/users.txt
            admin_users = postgres
            pool_mode = transaction
            default_pool_size = \(poolSize)
            max_client_conn = 200
            server_reset_query =
            ignore_startup_parameters = extra_float_digits,application_name

            """.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"postgres\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        var arguments = ["/usr/sbin/pgbouncer", directory + "/pgbouncer.ini"]
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else { throw HTTPClientError(description: "no postgres user to run PgBouncer as") }
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
            // setpriv runs PgBouncer in its own place (no process between), so a signal reaches it.
            arguments = ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"] + arguments
        }
        process = try SpawnedProcess(arguments, output: directory + "/pgbouncer.log")
        guard eventually(within: 20, { (try? admin("SHOW VERSION")) != nil || !process.isRunning }), process.isRunning else {
            throw HTTPClientError(description: "PgBouncer did not start: \(log)")
        }
    }

    deinit {
        if !process.stop() { Issue.record("PgBouncer did not stop on SIGTERM: \(log)") }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The URL of `database` through PgBouncer.
    func url(database: String) -> String {
        "postgresql:///\(database)?host=\(directory)&port=\(port)&user=postgres"
    }

    /// A command of PgBouncer's admin console (SHOW ...), its rows as columns by name.
    func admin(_ command: String) throws -> [[String: String]] {
        let output = try runPSQL(url(database: "pgbouncer"), command)
        let lines = output.split(separator: "\n", omittingEmptySubsequences: true).map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        guard let header = lines.first else { return [] }
        return lines.dropFirst().map { Dictionary(zip(header, $0)) { first, _ in first } }
    }

    /// What PgBouncer wrote so far (for a failure's message).
    var log: String { (try? String(contentsOfFile: directory + "/pgbouncer.log", encoding: .utf8)) ?? "" }
}

/// A child process made with posix_spawn, every signal unblocked and at its default:
/// Foundation's Process passes on the spawning thread's blocked signals, and a server that
/// does not unblock them itself (PgBouncer) then never sees its SIGTERM. Its standard output
/// and error go to a file.
final class SpawnedProcess {
    let pid: pid_t
    private var exitStatus: Int32?

    init(_ arguments: [String], output: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = arguments.map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv + [nil], environ)
        guard spawned == 0 else { throw HTTPClientError(description: "cannot run \(arguments[0]): \(String(cString: strerror(spawned)))") }
        self.pid = pid
    }

    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        exitStatus = status
        return false
    }

    /// SIGTERM, then waits (at most `seconds`); SIGKILL if it is still there. Whether it stopped on SIGTERM.
    func stop(within seconds: Double = 10) -> Bool {
        guard isRunning else { return true }
        kill(pid, SIGTERM)
        if eventually(within: seconds, { !isRunning }) { return true }
        kill(pid, SIGKILL)
        _ = eventually(within: seconds) { !isRunning }
        return false
    }

    deinit { _ = stop() }
}

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

@Suite("replicas through PgBouncer", .serialized)
struct PgBouncerTests {
    @Test("two replicas write and read through PgBouncer in transaction mode, LISTEN on a direct connection: a stream on one replica gets the other's records at once")
    func throughPgBouncer() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        let direct = try cluster.makeDatabase()
        let database = try #require(URLComponents(string: direct)?.path.dropFirst().description)
        let bouncer = try PgBouncer(clusterDirectory: try #require(cluster.directory))
        // Polling only once a minute: what replica 0 commits reaches replica 1's stream within
        // this test's deadlines only through NOTIFY, on the direct connection.
        let replicas = try Replicas(2, databaseURL: bouncer.url(database: database), listenURL: direct, extra: ["--poll-interval", "60"])
        let subscriber = try ReplicaSubscriber(port: replicas.ports[1], after: 0)
        defer { subscriber.stop() }
        #expect(try HTTPConnection(port: replicas.ports[0]).makeInstance("b-0", events: coldStart).status == 200)
        #expect(try HTTPConnection(port: replicas.ports[1]).makeInstance("b-1", events: coldStart).status == 200)

        let writers = ReplicaWriters(4, ports: replicas.ports, writes: 50) { "b-\($0 % 2)" }
        #expect(writers.wait(within: 240))
        #expect(writers.failures == [] && writers.unavailableAnswers == [], "\(writers.failures) \(writers.unavailableAnswers)")
        let answers = writers.acknowledged
        #expect(answers.count == 200)

        // Reads on each replica: histories hold exactly the answered records, in contiguous versions.
        for (replica, port) in replicas.ports.enumerated() {
            let c = try HTTPConnection(port: port)
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
        let last = try HTTPConnection(port: replicas.ports[0]).request(
            "POST", "/v1/instances/b-0/actions", json: #"{"action": "openURL", "url": "https://example.com/last"}"#
        )
        let lastSequence = try #require(committedRecord(last)?.sequence, "\(last.text)")
        #expect(subscriber.waitForRecord(Int64(lastSequence), within: 20), "replica 1's stream got \(lastSequence) through NOTIFY; it is at \(subscriber.lastRecordID)")
        subscriber.stop()
        #expect(subscriber.records.map(\.id) == (1...Int64(lastSequence)).map { Optional($0) }, "every record once, in order")

        // The writes went through PgBouncer: its clients outnumber its server connections, which carried the transactions.
        let stats = try #require(try bouncer.admin("SHOW STATS").first { $0["database"] == database }, "PgBouncer has stats for \(database): \(bouncer.log)")
        #expect(Int(stats["total_xact_count"] ?? "") ?? 0 > 0, "transactions through PgBouncer: \(stats)")
        let clients = try bouncer.admin("SHOW CLIENTS").filter { $0["database"] == database }
        let servers = try bouncer.admin("SHOW SERVERS").filter { $0["database"] == database }
        #expect(clients.count > bouncer.poolSize && servers.count <= bouncer.poolSize, "\(clients.count) clients on \(servers.count) server connections")
    }
}
