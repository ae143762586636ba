import Foundation
import Synchronization

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
                    if let url = ProcessInfo.processInfo.environment["LIFECYCLED_TEST_DATABASE_URL"], !url.isEmpty {
                        return PostgresCluster(url: url, directory: nil)
                    }
                    let started = try PostgresCluster.start()
                    atexit { PostgresCluster.stopShared() }
                    return started
                }
                cluster = started
                return try started.get()
            }
        }
    }

    private static let sharedCluster = Mutex<Result<PostgresCluster, any Error>?>(nil)

    private static func stopShared() {
        if case .success(let cluster)? = sharedCluster.withLock({ $0 }) { cluster.remove() }
    }

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

    /// Stops the server and removes its folder.
    public func remove() {
        guard let directory else { return }
        do {
            _ = try Self.runScript("stop", directory)
        } catch {
            FileHandle.standardError.write(Data("cannot stop the test PostgreSQL in \(directory): \(error)\n".utf8))
        }
        do {
            try FileManager.default.removeItem(atPath: directory)
        } catch {
            FileHandle.standardError.write(Data("cannot remove \(directory): \(error)\n".utf8))
        }
    }

    private static let databases = Atomic<Int>(0)

    /// A new empty database on this server; returns its URL.
    public func makeDatabase() throws -> String {
        let name = "test_\(getpid())_\(Self.databases.add(1, ordering: .relaxed).newValue)"
        _ = try Self.run("/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", "CREATE DATABASE \(name)"])
        return try Self.url(url, database: name)
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
    /// (Both are small: the one is read after the other without filling a pipe.)
    ///
    /// posix_spawn and waitpid, not Foundation's `Process`: its `waitUntilExit` relies on a
    /// SIGCHLD source served by Dispatch, which never fired in a test process whose threads
    /// were all busy (the child stayed a zombie and the test run hung).
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        var output: [Int32] = [0, 0]
        var errors: [Int32] = [0, 0]
        guard pipe(&output) == 0, pipe(&errors) == 0 else { throw Failure(description: "PostgreSQL for the tests: pipe: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        for fd in output + errors { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(output[1])
        close(errors[1])
        defer {
            close(output[0])
            close(errors[0])
        }
        guard spawned == 0 else {
            throw Failure(description: "PostgreSQL for the tests: cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        let printed = readToEnd(output[0])
        let complaint = readToEnd(errors[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitStatus == 0 else {
            throw Failure(description: """
                PostgreSQL for the tests: \(([executable] + arguments).joined(separator: " ")) failed \
                (status \(exitStatus)): \(String(decoding: complaint, as: UTF8.self))
                """)
        }
        return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func readToEnd(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += buffer[..<count]
            } else if count == 0 || errno != EINTR {
                return bytes
            }
        }
    }
}
