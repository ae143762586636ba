import Foundation
import LifecycleLocks

/// A real PostgreSQL for the tests: a throwaway cluster (Tests/postgres/cluster.sh) on a Unix
/// socket in a temporary folder, or the server `LIFECYCLED_TEST_DATABASE_URL` names.
///
/// Tests never skip for want of PostgreSQL: a cluster that cannot start fails them, saying why.
public final class PostgresCluster: Sendable {
    /// What a test failing to get PostgreSQL sees.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The URL of the cluster's `postgres` database.
    public let url: String
    /// The cluster's folder; `nil` for a server the environment names.
    public let directory: String?

    /// The cluster the tests of this process share, started at first use and stopped when
    /// the process exits; or the server `LIFECYCLED_TEST_DATABASE_URL` names.
    public static var shared: PostgresCluster {
        get throws {
            try sharedCluster.withLock { (cluster) throws -> PostgresCluster in
                if let cluster { return try cluster.get() }
                let started = Result { () throws -> PostgresCluster in
                    let started: PostgresCluster
                    if let url = ProcessInfo.processInfo.environment["LIFECYCLED_TEST_DATABASE_URL"], !url.isEmpty {
                        started = PostgresCluster(url: url, directory: nil)
                    } else {
                        started = try PostgresCluster.start()
                    }
                    atexit { PostgresCluster.stopShared() }
                    return started
                }
                cluster = started
                return try started.get()
            }
        }
    }

    private static let sharedCluster = LockedValue<Result<PostgresCluster, any Error>?>(nil)

    /// At exit: the tests' own cluster goes with its folder; on a server the environment
    /// names, the databases the tests made are dropped.
    private static func stopShared() {
        guard case .success(let cluster)? = sharedCluster.withLock({ $0 }) else { return }
        guard cluster.directory == nil else { return cluster.remove() }
        for name in cluster.made.withLock({ $0 }) {
            do {
                try execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", on: cluster.url)
            } catch {
                FileHandle.standardError.write(Data("cannot drop the test database \(name): \(error)\n".utf8))
            }
        }
    }

    /// The databases ``makeDatabase()`` made.
    private let made = LockedValue<[String]>([])

    private init(url: String, directory: String?) {
        self.url = url
        self.directory = directory
    }

    /// Starts a cluster of the caller's own in a new temporary folder: for a test that stops
    /// and starts it. Call ``remove()`` when done (a watcher removes it anyway once this
    /// process is gone).
    public static func start() throws -> PostgresCluster {
        let directory = NSTemporaryDirectory() + "lifecycled-pg-\(UUID().uuidString.prefix(8))"
        let url = try runScript("start", directory, String(getpid()))
        return PostgresCluster(url: url, directory: directory)
    }

    /// Stops the server (fast shutdown), keeping its data.
    public func stop() throws {
        guard let directory else { throw Failure(description: "the server LIFECYCLED_TEST_DATABASE_URL names is not the tests' to stop") }
        _ = try Self.runScript("stop", directory)
    }

    /// Starts the server again after ``stop()``, on the same data and socket.
    public func restart() throws {
        guard let directory else { throw Failure(description: "the server LIFECYCLED_TEST_DATABASE_URL names is not the tests' to start") }
        _ = try Self.runScript("start", directory)
    }

    /// Stops every process of the server with SIGSTOP: a server that hangs (stopped, swapping,
    /// stuck on a disk) with its sockets open, so that its clients' connections stay up and
    /// the kernel goes on taking what they send and new connections to its socket, but
    /// nothing answers. ``thaw()`` lets it go on.
    /// ``remove()`` lets a frozen server go on first, so a test that fails while the server is
    /// frozen needs no cleanup of its own.
    public func freeze() throws {
        frozen.withLock { $0 = true }
        for pid in try processes() { kill(pid, SIGSTOP) }
    }

    /// Lets the processes ``freeze()`` stopped go on (SIGCONT).
    public func thaw() throws {
        for pid in try processes() { kill(pid, SIGCONT) }
        frozen.withLock { $0 = false }
    }

    /// Whether ``freeze()`` stopped the server and ``thaw()`` has not yet let it go on.
    public var isFrozen: Bool { frozen.withLock { $0 } }
    private let frozen = LockedValue<Bool>(false)

    /// The postmaster (the first line of its `postmaster.pid`) and every process it started.
    private func processes() throws -> [pid_t] {
        guard let directory else { throw Failure(description: "the server LIFECYCLED_TEST_DATABASE_URL names is not the tests' to stop") }
        let file = directory + "/data/postmaster.pid"
        let text = try String(contentsOfFile: file, encoding: .utf8)
        guard let first = text.split(separator: "\n").first, let postmaster = pid_t(first.trimmingCharacters(in: .whitespaces)) else {
            throw Failure(description: "\(file) names no pid: \(text)")
        }
        var found = [postmaster]
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
            // A process gone since the listing has no stat to read, and is none of the server's.
            guard let pid = pid_t(entry), let stat = FileManager.default.contents(atPath: "/proc/\(entry)/stat") else { continue }
            let text = String(decoding: stat, as: UTF8.self)
            // pid (command) state ppid ...: the command may hold spaces and parentheses, the fields after its last ")" do not.
            guard let end = text.lastIndex(of: ")") else { continue }
            let fields = text[text.index(after: end)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { found.append(pid) }
        }
        return found
    }

    /// Starts PgBouncer in transaction mode before this cluster (two server connections per
    /// database, which its clients share).
    public func startPgBouncer() throws {
        guard let directory else { throw Failure(description: "PgBouncer runs only before a cluster of the tests' own") }
        _ = try Self.runScript("bouncer", directory)
    }

    /// `url` (a database of this cluster) through PgBouncer: the same socket folder, its port.
    public func throughPgBouncer(_ url: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw Failure(description: "cannot parse the database URL \(url)") }
        components.queryItems = components.queryItems?.map { $0.name == "port" ? URLQueryItem(name: "port", value: "6432") : $0 }
        guard let pooled = components.string else { throw Failure(description: "cannot rebuild the database URL \(url)") }
        return pooled
    }

    /// Stops the server and removes its folder. The stop is immediate: what the cluster holds
    /// is never read again, so the shutdown checkpoint (which after a whole test run writes
    /// out every test database's pages) is not waited for.
    public func remove() {
        guard let directory else { return }
        if isFrozen {
            do {
                try thaw()
            } catch {
                FileHandle.standardError.write(Data("cannot let the test PostgreSQL in \(directory) go on: \(error)\n".utf8))
            }
        }
        do {
            _ = try Self.runScript("stop", directory, "immediate")
        } catch {
            FileHandle.standardError.write(Data("cannot stop the test PostgreSQL in \(directory): \(error)\n".utf8))
        }
        do {
            try FileManager.default.removeItem(atPath: directory)
        } catch {
            FileHandle.standardError.write(Data("cannot remove \(directory): \(error)\n".utf8))
        }
    }

    private static let databases = LockedValue<Int>(0)

    /// A new empty database on this server; returns its URL.
    public func makeDatabase() throws -> String {
        let name = "test_\(getpid())_\(Self.databases.withLock { $0 += 1; return $0 })"
        try Self.execute("CREATE DATABASE \(name)", on: url)
        made.withLock { $0.append(name) }
        return try Self.url(url, database: name)
    }

    /// Runs `sql` with psql on the database `url` names.
    public static func execute(_ sql: String, on url: String) throws {
        _ = try run("/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
    }

    /// `url` with its database replaced by `name`: a URI's path, or a `dbname=` appended to a
    /// `key=value` string (the last value of a key wins).
    static func url(_ url: String, database name: String) throws -> String {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else { return url + " dbname=\(name)" }
        guard var components = URLComponents(string: url) else { throw Failure(description: "cannot parse the database URL \(url)") }
        components.path = "/" + name
        guard let changed = components.string else { throw Failure(description: "cannot rebuild the database URL \(url)") }
        return changed
    }

    /// Tests/postgres/cluster.sh, beside this file's folder.
    private static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("postgres/cluster.sh").path

    private static func runScript(_ arguments: String...) throws -> String {
        try run("/bin/bash", [script] + arguments)
    }

    /// Runs a program to its end; its standard output, trimmed. Fails with its standard error.
    ///
    /// posix_spawn and waitpid rather than Foundation's Process, whose wait needs a Dispatch
    /// thread that the tests' blocked threads can starve (the shared cluster starts under a
    /// lock). The script closes the other descriptors it inherits (see there).
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let capture = NSTemporaryDirectory() + "lifecycled-pg-run-\(UUID().uuidString.prefix(8))"
        let (outputPath, errorPath) = (capture + ".out", capture + ".err")
        defer {
            for path in [outputPath, errorPath] { unlink(path) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Signals as a new process has them: the test process blocks some (SIGTERM among
        // them), and a daemon started from here (PgBouncer) would inherit that and never stop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv + [nil], environ)
        guard spawned == 0 else {
            throw Failure(description: "PostgreSQL for the tests: cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(description: "PostgreSQL for the tests: waitpid: \(String(cString: strerror(errno)))") }
        }
        let printed = FileManager.default.contents(atPath: outputPath) ?? Data()
        guard status == 0 else {
            let complaint = FileManager.default.contents(atPath: errorPath) ?? Data()
            throw Failure(description: """
                PostgreSQL for the tests: \(([executable] + arguments).joined(separator: " ")) failed \
                (wait status \(status)): \(String(decoding: complaint, as: UTF8.self))
                """)
        }
        return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
