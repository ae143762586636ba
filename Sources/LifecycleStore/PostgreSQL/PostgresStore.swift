import Foundation
import LifecycleKit
import Synchronization

/// The store for several replicas on one PostgreSQL: each process writes and reads the same
/// database, and learns of the others' commits through `LISTEN`/`NOTIFY` and polling.
///
/// Write transactions are serialised across every replica by a row lock on a one-row counter
/// table (`commit_counter`) taken first in each: the transaction that holds it numbers its
/// records after the counter's `last_sequence` and writes the new value once before it
/// commits. Sequence numbers are therefore dense and in commit order, which a PostgreSQL
/// sequence is not (its values are taken out of commit order and lost on rollback), so
/// "everything up to N" keeps its meaning for every replica's streams.
///
/// Every statement is an unnamed `PQexecParams` one and nothing sets session state, so `url`
/// may lead through PgBouncer in transaction mode. `LISTEN` needs a session of its own:
/// ``Options/listenURL`` names a direct connection for it.
///
/// When PostgreSQL cannot be reached, operations fail at once with a ``StoreError`` saying
/// so (not ``StoreError/isSpecificToWrite``), and the next operation connects again, no more
/// often than a backoff from 100 ms to 2 s allows: the service answers 503 quickly and
/// recovers by itself once PostgreSQL is back. A server that holds its connections but does
/// not answer fails each operation once its bound has passed (``Options/timeout`` for
/// writes, ``Options/readTimeout`` for reads), waiting for the connection included.
public final class PostgresStore: InstanceStore, Sendable {
    /// How the store keeps and forgets, and where it listens.
    public struct Options: Sendable {
        /// Records kept per instance; older ones are dropped as new ones arrive.
        public var historyLimit: Int
        /// How long idempotency keys are kept.
        public var idempotencyLifetime: TimeInterval
        /// How long a deleted instance's deletion record stays replayable.
        public var tombstoneLifetime: TimeInterval
        /// A direct connection (not through PgBouncer in transaction mode, which cannot carry
        /// `LISTEN`) for learning of other replicas' commits; `nil`: the store's URL.
        public var listenURL: String?
        /// The longest a write transaction (connecting, taking the counter's lock, every
        /// statement and the COMMIT together), the opening of the store, or one page of the
        /// instances loaded at start, may wait on PostgreSQL.
        public var timeout: Duration
        /// The longest a read may wait on PostgreSQL, waiting for the read connection (which
        /// reads share) and connecting included: reads are answered on HTTP threads, which a
        /// server that does not answer must not hold.
        public var readTimeout: Duration

        public init(
            historyLimit: Int = 10_000, idempotencyLifetime: TimeInterval = 24 * 3600,
            tombstoneLifetime: TimeInterval = RecordKind.deletionRecordLifetime, listenURL: String? = nil,
            timeout: Duration = .seconds(5), readTimeout: Duration = .seconds(1)
        ) {
            self.historyLimit = max(1, historyLimit)
            self.idempotencyLifetime = idempotencyLifetime
            self.tombstoneLifetime = tombstoneLifetime
            self.listenURL = listenURL
            self.timeout = timeout
            self.readTimeout = readTimeout
        }
    }

    /// The channel each committed write transaction notifies, with an empty payload: only a
    /// wake-up hint (a payload would make every commit carry more through NOTIFY's queue,
    /// which serialises commits cluster-wide).
    static let channel = "lifecycled_commits"

    /// The key of the advisory lock held while the schema is created or migrated, so that
    /// replicas starting together do not race ("lifecycled" in ASCII).
    static let schemaLockKey: Int64 = 0x6c_6966_6563_7963

    /// The schema's migrations, in order (see ``PostgresMigrations``).
    static let migrations = PostgresMigrations.all

    /// The write connection: one transaction at a time from this process.
    struct Writer {
        var link: Link
        var writesSincePurge = 0
        var isClosed = false
    }

    /// The read connection, which reads share, one at a time.
    struct Reader {
        var link: Link
        var isClosed = false
    }

    public let options: Options
    private let url: String
    private let report: @Sendable (StoreEvent) -> Void
    private let writer: Mutex<Writer>
    /// Reads of committed data, never on the write connection (a read must not wait for a
    /// batch, nor see one half written).
    let reader: Mutex<Reader>
    // NSLock: a read waits for the one ahead of it no longer than its bound, and Mutex has no timed lock.
    let readGate = NSLock()
    /// The largest sequence number this process committed or read.
    private let knownSequence = Mutex<Int64>(0)
    private let listeners = Mutex<[CommitListener]>([])

    /// Connects to `url` (a libpq URI or `key=value` string) and creates or migrates the
    /// schema. Throws if PostgreSQL cannot be reached now: a service should not start on a
    /// database it has never seen. `report` receives what an operator should see.
    public init(
        url: String, options: Options = Options(), report: @escaping @Sendable (StoreEvent) -> Void = StoreEvent.writeToStandardError
    ) throws(StoreError) {
        self.url = url
        self.options = options
        self.report = report
        var link = Link(url: url, role: "write", report: report)
        let connection: Connection
        do {
            connection = try link.connection(by: Deadline(options.timeout))
        } catch {
            throw StoreError(error, doing: "cannot open the PostgreSQL store")
        }
        let sequence = try checked("cannot open the PostgreSQL store") { () throws(PostgreSQLError) in
            try Self.transaction(connection) { () throws(PostgreSQLError) in
                try Self.migrate(connection)
                // The counter's lock, as in a write: purging beside another replica's purge
                // could otherwise deadlock on the rows both delete.
                let sequence = try connection.execute("SELECT last_sequence FROM commit_counter WHERE id = 1 FOR UPDATE").integer(0, 0)
                try connection.execute(Self.purgeExpired(options: options))
                return sequence
            }
        }
        writer = Mutex(Writer(link: link))
        reader = Mutex(Reader(link: Link(url: url, role: "read", report: report)))
        knownSequence.withLock { $0 = sequence }
    }

    deinit {
        listeners.withLock { $0.forEach { $0.stop() } }
    }

    /// Stops listening and closes the connections. Call when done with the store; later
    /// operations are refused.
    public func close() {
        writer.withLock {
            $0.isClosed = true
            $0.link.disconnect()
        }
        reader.withLock {
            $0.isClosed = true
            $0.link.disconnect()
        }
        listeners.withLock { $0.forEach { $0.stop() } }
    }

    /// Brings the schema up to the newest version. Inside a transaction: the advisory lock
    /// holds until it ends, so a replica starting at the same moment waits, then finds the
    /// schema made.
    private static func migrate(_ connection: Connection) throws(PostgreSQLError) {
        try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(schemaLockKey)])
        try connection.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value bigint NOT NULL)")
        let found = try connection.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        let current = found.rowCount == 0 ? 0 : Int(found.integer(0, 0))
        let pending = try migrations.pending(after: current) { PostgreSQLError(sqlState: nil, message: $0, isConnectionLost: false) }
        guard !pending.isEmpty else { return }
        for statement in pending.flatMap(\.statements) { try connection.execute(statement) }
        try connection.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [.integer(Int64(migrations.count))]
        )
    }

    /// The schema version the database is at.
    public func schemaVersion() throws(StoreError) -> Int {
        try read("cannot read the schema version") { (connection) throws(PostgreSQLError) in
            let found = try connection.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            return found.rowCount == 0 ? 0 : Int(found.integer(0, 0))
        }
    }

    /// Drops idempotency keys and deletion records older than their lifetimes, raising the
    /// floor that tells replays records were dropped: statements for the caller's transaction.
    static func purgeExpired(options: Options) -> [Connection.Statement] {
        let now = Date()
        return [
            Connection.Statement(
                "DELETE FROM idempotency WHERE created_at < $1", [.integer(Codec.milliseconds(now.addingTimeInterval(-options.idempotencyLifetime)))]
            ),
            Connection.Statement(
                raisingDroppedFloor("DELETE FROM tombstones WHERE deleted_at < $1 RETURNING seq"),
                [.integer(Codec.milliseconds(now.addingTimeInterval(-options.tombstoneLifetime)))]
            ),
        ]
    }

    /// A statement that runs `delete` (a DELETE returning `seq`) and raises the floor of
    /// dropped records (`meta.dropped_through`) to the largest number it deleted: one
    /// statement, so it can wait in a pipeline for nothing.
    static func raisingDroppedFloor(_ delete: String) -> String {
        """
        WITH gone AS (\(delete))
        INSERT INTO meta (key, value) SELECT 'dropped_through', max(seq) FROM gone HAVING count(*) > 0
        ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, excluded.value)
        """
    }

    // MARK: Sequence numbers and other replicas' commits

    public var lastSequence: Int64 { knownSequence.withLock { $0 } }

    func learned(_ sequence: Int64) {
        knownSequence.withLock { $0 = max($0, sequence) }
    }

    public func latestSequence() throws(StoreError) -> Int64 {
        let sequence = try read("cannot read the last sequence number") { (connection) throws(PostgreSQLError) in
            try connection.execute("SELECT last_sequence FROM commit_counter WHERE id = 1").integer(0, 0)
        }
        learned(sequence)
        return sequence
    }

    /// Listens on a connection of its own to ``Options/listenURL`` (on a thread of its own)
    /// and calls `wake` for each notification of a commit (this process's too) and after each
    /// (re)connection, since notifications sent while it was away are lost. Polling for a
    /// notification lost otherwise is the caller's (the protocol says so): the registry asks
    /// ``latestSequence()`` every `--poll-interval`.
    public func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void) {
        let listener = CommitListener(url: options.listenURL ?? url, timeout: options.timeout, report: report, wake: wake)
        listeners.withLock { $0.append(listener) }
    }

    // MARK: Writes

    /// Runs `body` in one transaction that holds the counter row's lock from its start, so no
    /// other replica writes until it ends.
    ///
    /// Acknowledged means committed with `synchronous_commit` as the server has it (`on` by
    /// default: in the server's WAL on disk). If the connection drops during `COMMIT`, whether
    /// the transaction committed is unknown: it is reported as a failure all the same (the
    /// service answers 503), and a client that retries with its idempotency key gets the
    /// outcome of the first attempt if it did commit. That is what the keys are for. A
    /// transaction still waiting on PostgreSQL when ``Options/timeout`` has passed is given up
    /// the same way: if its COMMIT had been sent, it may yet commit once the server goes on.
    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        // nonisolated(unsafe): `body` runs only here, under the writer's lock, and keeps nothing of
        // it; region checking cannot see that of a caller's closure given the Mutex's `inout sending` state.
        nonisolated(unsafe) let body = body
        nonisolated(unsafe) var result: T?
        let sequence = try writer.withLock { (writer: inout Writer) throws(StoreError) -> Int64 in
            guard !writer.isClosed else { throw StoreError("the store is closed; nothing was changed") }
            let transaction = try Self.begin(by: Deadline(options.timeout), &writer.link, options: options)
            let connection = transaction.connection
            let closing: [Connection.Statement]
            let purging: Bool
            do throws(StoreError) {
                result = try body(transaction)
                if let failure = transaction.failure {
                    // The body went on after a failed statement: PostgreSQL aborted the
                    // transaction then, and its COMMIT would only roll back.
                    throw StoreError(failure, doing: "cannot commit after a failed statement")
                }
                purging = writer.writesSincePurge + 1 >= 1000
                closing = try transaction.closingStatements(purging: purging)
            } catch {
                Self.rollBack(connection, &writer.link)
                throw error
            }
            // What waited, the counter and COMMIT: one round trip.
            do throws(PostgreSQLError) {
                try connection.execute(closing + [Connection.Statement("COMMIT")])
            } catch {
                if error.isConnectionLost {
                    writer.link.dropIfLost(error)
                    throw StoreError(
                        "cannot commit: PostgreSQL is unreachable: \(error.message); whether the transaction committed is unknown", isUnreachable: true,
                        isOutcomeUnknown: true
                    )
                }
                // A statement failed, and PostgreSQL skipped the COMMIT after it.
                Self.rollBack(connection, &writer.link)
                throw StoreError(error, doing: "cannot commit")
            }
            writer.writesSincePurge = purging ? 0 : writer.writesSincePurge + 1
            return transaction.sequence
        }
        learned(sequence)
        return result!
    }

    /// Begins a transaction and takes the counter row's lock (waiting for a transaction of
    /// another replica that holds it). A connection found lost here lost nothing: it is made
    /// again once at once, so the first write after PostgreSQL comes back succeeds.
    private static func begin(by deadline: Deadline, _ link: inout Link, options: Options) throws(StoreError) -> PostgresTransaction {
        var retried = false
        while true {
            let connection: Connection
            do {
                connection = try link.connection(by: deadline)
            } catch {
                throw StoreError(error, doing: "cannot begin a transaction")
            }
            do throws(PostgreSQLError) {
                let counter = try connection.execute([
                    Connection.Statement("BEGIN"),
                    Connection.Statement("SELECT last_sequence, instance_count FROM commit_counter WHERE id = 1 FOR UPDATE"),
                ])[1]
                guard counter.rowCount == 1 else { throw ResultRow.damaged("commit_counter has no row: the database is damaged") }
                return PostgresTransaction(connection: connection, options: options, sequence: counter.integer(0, 0), instanceCount: counter.integer(0, 1))
            } catch {
                if error.isConnectionLost {
                    link.dropIfLost(error)
                    if !retried, !error.isTimedOut {
                        retried = true
                        continue
                    }
                } else {
                    rollBack(connection, &link)
                }
                throw StoreError(error, doing: "cannot begin a transaction")
            }
        }
    }

    /// Rolls back the open transaction. If that fails, the connection is closed instead,
    /// which rolls back on the server all the same.
    private static func rollBack(_ connection: Connection, _ link: inout Link) {
        do {
            try connection.execute("ROLLBACK")
        } catch {
            link.disconnect()
        }
    }

    /// Runs `body` in a transaction of its own on `connection`.
    private static func transaction<T>(_ connection: Connection, _ body: () throws(PostgreSQLError) -> T) throws(PostgreSQLError) -> T {
        try connection.execute("BEGIN")
        do {
            let result = try body()
            try connection.execute("COMMIT")
            return result
        } catch {
            if !error.isConnectionLost {
                do {
                    try connection.execute("ROLLBACK")
                } catch let failure {
                    throw PostgreSQLError(
                        sqlState: error.sqlState, message: "\(error.message); the rollback after it failed too: \(failure.message)",
                        isConnectionLost: failure.isConnectionLost
                    )
                }
            }
            throw error
        }
    }
}
