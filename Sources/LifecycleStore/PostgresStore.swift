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
public final class PostgresStore: InstanceStore, @unchecked Sendable {
    // @unchecked: the connections and the state beside them are guarded by `writeLock` and
    // `readLock`. A Mutex cannot hold them: a read hands its connection to the caller's
    // closure, and a write its transaction, which region checking refuses for a Mutex's
    // `inout sending` state ("cannot be task-isolated at end of function").

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
            tombstoneLifetime: TimeInterval = SQLiteStore.defaultTombstoneLifetime, listenURL: String? = nil,
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

    /// The schema, one list of statements per version; `meta.schema_version` says how many
    /// have run. Integers are `bigint` throughout, times whole milliseconds since 1970 (as in
    /// SQLite), so that every integer reads back the same way.
    static let migrations: [[String]] = [
        [
            // Its one row's lock serialises write transactions across replicas.
            """
            CREATE TABLE commit_counter (
                id smallint PRIMARY KEY CHECK (id = 1),
                last_sequence bigint NOT NULL,
                instance_count bigint NOT NULL
            )
            """,
            "INSERT INTO commit_counter (id, last_sequence, instance_count) VALUES (1, 0, 0)",
            """
            CREATE TABLE instances (
                id text PRIMARY KEY,
                model text NOT NULL,
                state text NOT NULL,
                version bigint NOT NULL,
                launch_count bigint NOT NULL,
                buffered_action text,
                window_name text,
                breadcrumb_step text,
                scene_connected boolean NOT NULL,
                unexpected bigint NOT NULL,
                ignored bigint NOT NULL,
                incomplete_launches bigint NOT NULL,
                created_at bigint NOT NULL,
                updated_at bigint NOT NULL
            )
            """,
            // UNIQUE (instance, version): the backstop against two replicas deciding on the
            // same state of an instance.
            """
            CREATE TABLE records (
                seq bigint PRIMARY KEY,
                instance text NOT NULL,
                version bigint NOT NULL,
                kind bigint NOT NULL,
                outcome bigint,
                body bytea NOT NULL,
                UNIQUE (instance, version)
            )
            """,
            """
            CREATE TABLE tombstones (
                seq bigint PRIMARY KEY,
                instance text NOT NULL,
                model text NOT NULL,
                deleted_at bigint NOT NULL,
                body bytea NOT NULL
            )
            """,
            "CREATE INDEX tombstones_by_age ON tombstones (deleted_at)",
            """
            CREATE TABLE idempotency (
                key text PRIMARY KEY,
                fingerprint bytea NOT NULL,
                result bigint NOT NULL,
                instance text,
                model text,
                instance_created_at bigint,
                body bytea NOT NULL,
                created_at bigint NOT NULL
            )
            """,
            "CREATE INDEX idempotency_by_age ON idempotency (created_at)",
            """
            CREATE TABLE coverage (
                model text NOT NULL,
                kind bigint NOT NULL,
                name text NOT NULL,
                count bigint NOT NULL,
                PRIMARY KEY (model, kind, name)
            )
            """,
        ]
    ]

    public let options: Options
    private let url: String
    private let report: @Sendable (StoreEvent) -> Void
    /// Writes: one transaction at a time from this process, on this connection.
    private let writeLock = NSLock()
    private var writer: Link
    private var writesSincePurge = 0
    private var isClosed = false
    /// Reads of committed data, never on the write connection (a read must not wait for a
    /// batch, nor see one half written).
    private let readLock = NSLock()
    private var reader: Link
    private var isReaderClosed = false
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
        writer = Link(url: url, role: "write", report: report)
        reader = Link(url: url, role: "read", report: report)
        let connection: Connection
        do {
            connection = try writer.connection(by: Deadline(options.timeout))
        } catch {
            throw StoreError(error, doing: "cannot open the PostgreSQL store")
        }
        let sequence = try Self.checked("cannot open the PostgreSQL store") { () throws(PostgreSQLError) in
            try Self.transaction(connection) { () throws(PostgreSQLError) in
                try Self.migrate(connection)
                // The counter's lock, as in a write: purging beside another replica's purge
                // could otherwise deadlock on the rows both delete.
                let sequence = try connection.execute("SELECT last_sequence FROM commit_counter WHERE id = 1 FOR UPDATE").integer(0, 0)
                try connection.execute(Self.purgeExpired(options: options))
                return sequence
            }
        }
        knownSequence.withLock { $0 = sequence }
    }

    deinit {
        listeners.withLock { $0.forEach { $0.stop() } }
    }

    /// Stops listening and closes the connections. Call when done with the store; later
    /// operations are refused.
    public func close() {
        writeLock.withLock {
            isClosed = true
            writer.disconnect()
        }
        readLock.withLock {
            isReaderClosed = true
            reader.disconnect()
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
        guard current <= migrations.count else {
            throw PostgreSQLError(
                sqlState: nil, message: "schema version \(current) is newer than this lifecycled knows (\(migrations.count))", isConnectionLost: false
            )
        }
        guard current < migrations.count else { return }
        for statement in migrations[current...].joined() { try connection.execute(statement) }
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
    private static func purgeExpired(options: Options) -> [Connection.Statement] {
        let now = Date()
        return [
            Connection.Statement(
                "DELETE FROM idempotency WHERE created_at < $1",
                [.integer(SQLiteStore.milliseconds(now.addingTimeInterval(-options.idempotencyLifetime)))]
            ),
            Connection.Statement(
                raisingDroppedFloor("DELETE FROM tombstones WHERE deleted_at < $1 RETURNING seq"),
                [.integer(SQLiteStore.milliseconds(now.addingTimeInterval(-options.tombstoneLifetime)))]
            ),
        ]
    }

    /// A statement that runs `delete` (a DELETE returning `seq`) and raises the floor of
    /// dropped records (`meta.dropped_through`) to the largest number it deleted: one
    /// statement, so it can wait in a pipeline for nothing.
    private static func raisingDroppedFloor(_ delete: String) -> String {
        """
        WITH gone AS (\(delete))
        INSERT INTO meta (key, value) SELECT 'dropped_through', max(seq) FROM gone HAVING count(*) > 0
        ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, excluded.value)
        """
    }

    // MARK: Sequence numbers and other replicas' commits

    public var lastSequence: Int64 { knownSequence.withLock { $0 } }

    private func learned(_ sequence: Int64) {
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
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !isClosed else { throw StoreError("the store is closed; nothing was changed") }
        let transaction = try begin(by: Deadline(options.timeout))
        let connection = transaction.connection
        let result: T
        let closing: [Connection.Statement]
        let purging: Bool
        do throws(StoreError) {
            result = try body(transaction)
            if let failure = transaction.failure {
                // The body went on after a failed statement: PostgreSQL aborted the
                // transaction then, and its COMMIT would only roll back.
                throw StoreError(failure, doing: "cannot commit after a failed statement")
            }
            purging = writesSincePurge + 1 >= 1000
            closing = try transaction.closingStatements(purging: purging)
        } catch {
            rollBack(connection)
            throw error
        }
        // What waited, the counter and COMMIT: one round trip.
        do {
            try connection.execute(closing + [Connection.Statement("COMMIT")])
        } catch {
            if error.isConnectionLost {
                writer.dropIfLost(error)
                throw StoreError(
                    "cannot commit: PostgreSQL is unreachable: \(error.message); whether the transaction committed is unknown", isUnreachable: true,
                    isOutcomeUnknown: true
                )
            }
            // A statement failed, and PostgreSQL skipped the COMMIT after it.
            rollBack(connection)
            throw StoreError(error, doing: "cannot commit")
        }
        writesSincePurge = purging ? 0 : writesSincePurge + 1
        learned(transaction.sequence)
        return result
    }

    /// Begins a transaction and takes the counter row's lock (waiting for a transaction of
    /// another replica that holds it). A connection found lost here lost nothing: it is made
    /// again once at once, so the first write after PostgreSQL comes back succeeds.
    private func begin(by deadline: Deadline) throws(StoreError) -> Transaction {
        var retried = false
        while true {
            let connection: Connection
            do {
                connection = try writer.connection(by: deadline)
            } catch {
                throw StoreError(error, doing: "cannot begin a transaction")
            }
            do throws(PostgreSQLError) {
                let counter = try connection.execute([
                    Connection.Statement("BEGIN"),
                    Connection.Statement("SELECT last_sequence, instance_count FROM commit_counter WHERE id = 1 FOR UPDATE"),
                ])[1]
                guard counter.rowCount == 1 else {
                    throw PostgreSQLError(sqlState: "XX001", message: "commit_counter has no row: the database is damaged", isConnectionLost: false)
                }
                return Transaction(
                    store: self, connection: connection, sequence: counter.integer(0, 0), instanceCount: counter.integer(0, 1)
                )
            } catch {
                if error.isConnectionLost {
                    writer.dropIfLost(error)
                    if !retried, !error.isTimedOut {
                        retried = true
                        continue
                    }
                } else {
                    rollBack(connection)
                }
                throw StoreError(error, doing: "cannot begin a transaction")
            }
        }
    }

    /// Rolls back the open transaction. If that fails, the connection is closed instead,
    /// which rolls back on the server all the same.
    private func rollBack(_ connection: Connection) {
        do {
            try connection.execute("ROLLBACK")
        } catch {
            writer.disconnect()
        }
    }

    /// One write transaction's view of the store; valid only inside ``write(_:)``.
    ///
    /// Instances, records and idempotency keys wait in memory until the transaction ends (or a
    /// delete needs the database up to date first), then go as one multi-row statement per
    /// table over `unnest`, all in one round trip with the COMMIT: a batch of events costs
    /// two round trips (the second with the commit's flush) rather than two per event.
    /// Reads through the transaction look at what waits first.
    private final class Transaction: StoreTransaction {
        let connection: Connection
        let options: Options
        let startSequence: Int64
        /// The last sequence number assigned in this transaction.
        private(set) var sequence: Int64
        private let startInstanceCount: Int64
        private var instancesAdded: Int64 = 0
        /// The first statement that failed: PostgreSQL aborted the transaction there.
        private(set) var failure: PostgreSQLError?

        /// Instances to write, newest state of each; `isNew` for those to insert.
        private var instances: [String: (instance: StoredInstance, isNew: Bool)] = [:]
        /// Records to insert, in the order they were numbered.
        private var records: [(sequence: Int64, instance: String, version: Int64, kind: RecordKind, outcome: Outcome?, body: [UInt8])] = []
        /// Per instance, the newest version the history limit drops (with all before it).
        private var drops: [String: Int64] = [:]
        /// Idempotency keys to store, by key.
        private var keys: [String: (fingerprint: [UInt8], write: RememberedWrite, createdAt: Date)] = [:]

        init(store: PostgresStore, connection: Connection, sequence: Int64, instanceCount: Int64) {
            self.connection = connection
            options = store.options
            startSequence = sequence
            self.sequence = sequence
            startInstanceCount = instanceCount
        }

        /// Runs a statement, keeping its failure (which aborts the transaction).
        @discardableResult
        private func run(_ what: @autoclosure () -> String, _ sql: String, _ parameters: [Connection.Parameter] = []) throws(StoreError) -> QueryResult {
            do {
                return try connection.execute(sql, parameters)
            } catch {
                failure = failure ?? error
                throw StoreError(error, doing: what())
            }
        }

        func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
            var found = ids.compactMap { instances[$0]?.instance }
            let unwritten = ids.filter { instances[$0] == nil }
            guard !unwritten.isEmpty else { return found }
            let rows = try run("cannot read instances", "SELECT \(PostgresStore.instanceColumns) FROM instances WHERE id = ANY($1::text[])", [.texts(unwritten)])
            for row in 0..<rows.rowCount {
                found.append(try PostgresStore.checked("cannot read instances") { () throws(PostgreSQLError) in try PostgresStore.instance(rows, row) })
            }
            return found
        }

        func instanceCount() throws(StoreError) -> Int { Int(startInstanceCount + instancesAdded) }

        func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
            // One waiting under this id exists already (the database would refuse the insert
            // with the primary key; the one multi-row insert would not see the second).
            guard instances[instance.id] == nil else {
                throw StoreError("cannot store instance \(instance.id): it exists already (within this transaction)", isSpecificToWrite: true)
            }
            let numbered = sequence + 1
            instances[instance.id] = (instance, true)
            records.append((numbered, instance.id, 0, .created, nil, encode(numbered)))
            instancesAdded += 1
            sequence = numbered
            return numbered
        }

        func update(_ instance: StoredInstance) throws(StoreError) {
            instances[instance.id] = (instance, instances[instance.id]?.isNew ?? false)
        }

        func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
            let numbered = sequence + 1
            // What waits may concern this instance: it goes first, and the delete takes it along.
            let statements = try waitingStatements() + [
                Connection.Statement("DELETE FROM instances WHERE id = $1", [.text(instance.id)]),
                Connection.Statement("DELETE FROM records WHERE instance = $1", [.text(instance.id)]),
                Connection.Statement(
                    "INSERT INTO tombstones (seq, instance, model, deleted_at, body) VALUES ($1, $2, $3, $4, $5)",
                    [.integer(numbered), .text(instance.id), .text(instance.model), .integer(SQLiteStore.milliseconds(time)), .bytes(encode(numbered))]
                ),
            ]
            let results: [QueryResult]
            do {
                results = try connection.execute(statements)
            } catch {
                failure = failure ?? error
                throw StoreError(error, doing: "cannot delete instance \(instance.id)")
            }
            instancesAdded -= Int64(results[statements.count - 3].changedRows)
            sequence = numbered
            return numbered
        }

        func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord {
            var numbered = record
            numbered.sequence = sequence + 1
            numbered.instance = instanceID
            let encoded = EncodedRecord(sequence: numbered.sequence, recordJSON: encode(numbered))
            records.append((numbered.sequence, instanceID, record.version, RecordKind(record.kind), record.outcome, encoded.recordJSON))
            let limit = Int64(options.historyLimit)
            if record.version > limit { drops[instanceID] = max(drops[instanceID] ?? 0, record.version - limit) }
            sequence = numbered.sequence
            return encoded
        }

        func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError) {
            keys[key.key] = (key.fingerprint, write, Date())
        }

        /// Keys on PostgreSQL were always stored scoped: ``IdempotencyKey/unscopedKey`` is
        /// never looked up.
        func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
            let what = "cannot read an idempotency key"
            let stored: (fingerprint: [UInt8], write: RememberedWrite, createdAt: Date)
            if let waiting = keys[key.key] {
                stored = waiting
            } else {
                let found = try run(
                    what, "SELECT fingerprint, result, instance, model, instance_created_at, body, created_at FROM idempotency WHERE key = $1",
                    [.text(key.key)]
                )
                guard found.rowCount > 0 else { return .unused }
                stored = (
                    found.bytes(0, 0),
                    try PostgresStore.checked(what) { () throws(PostgreSQLError) in try Self.remembered(found, key: key.key) },
                    SQLiteStore.date(found.integer(0, 6))
                )
            }
            guard stored.createdAt.addingTimeInterval(options.idempotencyLifetime) > now else { return .unused }
            return stored.fingerprint == key.fingerprint ? .replay(stored.write) : .conflict
        }

        func addCoverage(_ counts: CoverageCounts) throws(StoreError) {
            guard !counts.isEmpty else { return }
            let counters = Array(counts.counts)
            try run(
                "cannot count coverage",
                """
                INSERT INTO coverage (model, kind, name, count)
                SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[])
                ON CONFLICT (model, kind, name) DO UPDATE SET count = coverage.count + excluded.count
                """,
                [.texts(counters.map(\.key.model)), .integers(counters.map(\.key.kind.rawValue)), .texts(counters.map(\.key.name)), .integers(counters.map(\.value))]
            )
        }

        /// Statements that write what waits (new instances, changed instances, records, the
        /// history limit's drops, idempotency keys; at most one each), which no longer waits.
        private func waitingStatements() throws(StoreError) -> [Connection.Statement] {
            var statements: [Connection.Statement] = []
            let new = instances.values.filter(\.isNew).map(\.instance)
            let changed = instances.values.filter { !$0.isNew }.map(\.instance)
            instances = [:]
            if !new.isEmpty {
                statements.append(Connection.Statement(
                    """
                    INSERT INTO instances (\(PostgresStore.instanceColumns))
                    SELECT * FROM unnest(\(PostgresStore.instanceArrays))
                    """,
                    try PostgresStore.columns(new)
                ))
            }
            if !changed.isEmpty {
                statements.append(Connection.Statement(
                    """
                    UPDATE instances SET model = u.model, state = u.state, version = u.version, launch_count = u.launch_count,
                      buffered_action = u.buffered_action, window_name = u.window_name, breadcrumb_step = u.breadcrumb_step,
                      scene_connected = u.scene_connected, unexpected = u.unexpected, ignored = u.ignored,
                      incomplete_launches = u.incomplete_launches, created_at = u.created_at, updated_at = u.updated_at
                    FROM unnest(\(PostgresStore.instanceArrays)) AS u(\(PostgresStore.instanceColumns))
                    WHERE instances.id = u.id
                    """,
                    try PostgresStore.columns(changed)
                ))
            }
            if !records.isEmpty {
                statements.append(Connection.Statement(
                    """
                    INSERT INTO records (seq, instance, version, kind, outcome, body)
                    SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
                    """,
                    [
                        .integers(records.map(\.sequence)), .texts(records.map(\.instance)), .integers(records.map(\.version)),
                        .integers(records.map(\.kind.rawValue)), .integers(records.map { $0.outcome?.storedCode }), .byteas(records.map(\.body)),
                    ]
                ))
                records = []
            }
            if !drops.isEmpty {
                // After the records: those of this transaction below the limit go too, as
                // they would have one at a time.
                statements.append(Connection.Statement(
                    PostgresStore.raisingDroppedFloor("""
                        DELETE FROM records USING unnest($1::text[], $2::bigint[]) AS d(instance, through)
                        WHERE records.instance = d.instance AND records.version <= d.through RETURNING records.seq
                        """),
                    [.texts(drops.map(\.key)), .integers(drops.map(\.value))]
                ))
                drops = [:]
            }
            if !keys.isEmpty {
                var (results, instances, models, createdAts, bodies): ([Int64?], [String?], [String?], [Int64?], [[UInt8]]) = ([], [], [], [], [])
                for key in keys.values {
                    switch key.write {
                    case .created(let id, let model, let createdAt, let json):
                        results.append(0)
                        instances.append(id)
                        models.append(model)
                        createdAts.append(SQLiteStore.milliseconds(createdAt))
                        bodies.append(json)
                    case .applied(let json, let isUnexpected):
                        results.append(isUnexpected ? 2 : 1)
                        instances.append(nil)
                        models.append(nil)
                        createdAts.append(nil)
                        bodies.append(json)
                    }
                }
                statements.append(Connection.Statement(
                    """
                    INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
                    SELECT * FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bytea[], $8::bigint[])
                    ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, result = excluded.result,
                      instance = excluded.instance, model = excluded.model, instance_created_at = excluded.instance_created_at,
                      body = excluded.body, created_at = excluded.created_at
                    """,
                    [
                        .texts(Array(keys.keys)), .byteas(keys.values.map(\.fingerprint)), .integers(results), .texts(instances),
                        .texts(models), .integers(createdAts), .byteas(bodies), .integers(keys.values.map { SQLiteStore.milliseconds($0.createdAt) }),
                    ]
                ))
                keys = [:]
            }
            return statements
        }

        /// The statements that end the transaction before its COMMIT: what waits, expired keys
        /// and deletion records now and then, and the counter row with a notification.
        func closingStatements(purging: Bool) throws(StoreError) -> [Connection.Statement] {
            var statements = try waitingStatements()
            if purging { statements += PostgresStore.purgeExpired(options: options) }
            if sequence != startSequence {
                statements.append(Connection.Statement(
                    """
                    WITH counted AS (UPDATE commit_counter SET last_sequence = $1, instance_count = $2 WHERE id = 1)
                    SELECT pg_notify('\(PostgresStore.channel)', '')
                    """,
                    [.integer(sequence), .integer(startInstanceCount + instancesAdded)]
                ))
            }
            return statements
        }

        /// Columns 1 to 5 of a key's row, as SQLite's schema version 3 keeps them.
        private static func remembered(_ found: QueryResult, key: String) throws(PostgreSQLError) -> RememberedWrite {
            switch found.integer(0, 1) {
            case 0:
                guard !found.isNull(0, 4) else {
                    throw PostgreSQLError(
                        sqlState: "XX001", message: "idempotency.instance_created_at of key \(key) is NULL for a created instance: the database is damaged",
                        isConnectionLost: false
                    )
                }
                return .created(
                    id: try found.text(0, 2, named: "idempotency.instance of key \(key)"),
                    model: try found.text(0, 3, named: "idempotency.model of key \(key)"),
                    createdAt: SQLiteStore.date(found.integer(0, 4)), json: found.bytes(0, 5)
                )
            case 1, 2:
                return .applied(recordJSON: found.bytes(0, 5), isUnexpected: found.integer(0, 1) == 2)
            case let result:
                throw PostgreSQLError(sqlState: "XX001", message: "idempotency key \(key) has result \(result), which no lifecycled writes", isConnectionLost: false)
            }
        }
    }

    /// The arrays a multi-row statement over `unnest` takes for ``instanceColumns``, in order.
    static let instanceArrays = """
        $1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[],
        $9::boolean[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[]
        """

    /// The parameters of ``instanceArrays``: one array per column, one element per instance.
    fileprivate static func columns(_ instances: [StoredInstance]) throws(StoreError) -> [Connection.Parameter] {
        var actions: [String?] = []
        for instance in instances {
            guard let pending = instance.state.bufferedAction else {
                actions.append(nil)
                continue
            }
            do {
                actions.append(String(decoding: try JSONEncoder().encode(pending), as: UTF8.self))
            } catch {
                throw StoreError("the buffered action of instance \(instance.id) does not encode: \(error)", isSpecificToWrite: true)
            }
        }
        let states = instances.map(\.state)
        return [
            .texts(instances.map(\.id)), .texts(instances.map(\.model)), .texts(states.map(\.state)), .integers(states.map(\.version)),
            .integers(states.map(\.launchCount)), .texts(actions), .texts(states.map(\.window)), .texts(states.map(\.breadcrumb.step)),
            .booleans(states.map(\.breadcrumb.isSceneConnected)), .integers(states.map(\.counters.unexpected)),
            .integers(states.map(\.counters.ignored)), .integers(states.map(\.counters.incompleteLaunches)),
            .integers(instances.map { SQLiteStore.milliseconds($0.createdAt) }), .integers(instances.map { SQLiteStore.milliseconds($0.updatedAt) }),
        ]
    }

    // MARK: Reads

    /// The columns ``instance(_:_:)`` reads, in its order.
    static let instanceColumns = """
        id, model, state, version, launch_count, buffered_action, window_name, breadcrumb_step,
        scene_connected, unexpected, ignored, incomplete_launches, created_at, updated_at
        """

    /// The instance in row `row` of a result of ``instanceColumns``.
    static func instance(_ found: QueryResult, _ row: Int) throws(PostgreSQLError) -> StoredInstance {
        let id = try found.text(row, 0, named: "instances.id")
        var action: PendingAction?
        if let json = found.text(row, 5) {
            do {
                action = try JSONDecoder().decode(PendingAction.self, from: Data(json.utf8))
            } catch {
                throw PostgreSQLError(sqlState: "XX001", message: "the buffered action of instance \(id) does not decode (\(error)): \(json)", isConnectionLost: false)
            }
        }
        let state = InstanceState(
            state: try found.text(row, 2, named: "instances.state of \(id)"), version: found.integer(row, 3), launchCount: found.integer(row, 4),
            bufferedAction: action, window: found.text(row, 6),
            breadcrumb: Breadcrumb(step: found.text(row, 7), isSceneConnected: found.boolean(row, 8)),
            counters: Counters(unexpected: found.integer(row, 9), ignored: found.integer(row, 10), incompleteLaunches: found.integer(row, 11))
        )
        return StoredInstance(
            id: id, model: try found.text(row, 1, named: "instances.model of \(id)"), createdAt: SQLiteStore.date(found.integer(row, 12)),
            updatedAt: SQLiteStore.date(found.integer(row, 13)), state: state
        )
    }

    /// Runs `body` on the read connection, by `bound` (``Options/readTimeout`` unless
    /// given) from now, the wait for a read ahead of it included. Each read is one statement,
    /// so it sees one snapshot. A connection found lost is made again once at once: reads
    /// change nothing, so trying again is safe.
    private func read<T>(_ what: String, within bound: Duration? = nil, _ body: (Connection) throws(PostgreSQLError) -> T) throws(StoreError) -> T {
        let deadline = Deadline(bound ?? options.readTimeout)
        guard readLock.lock(before: deadline.date) else { throw StoreError(deadline.passed("waiting for the read ahead of it"), doing: what) }
        defer { readLock.unlock() }
        guard !isReaderClosed else { throw StoreError("\(what): the store is closed") }
        var retried = false
        while true {
            let connection: Connection
            do {
                connection = try reader.connection(by: deadline)
            } catch {
                throw StoreError(error, doing: what)
            }
            do {
                return try body(connection)
            } catch {
                reader.dropIfLost(error)
                if error.isConnectionLost, !error.isTimedOut, !retried {
                    retried = true
                    continue
                }
                throw StoreError(error, doing: what)
            }
        }
    }

    /// Instances one statement of ``loadInstances()`` reads.
    static let loadPageSize = 10_000

    /// In pages by id, each bounded by ``Options/timeout``: a page waits as long as a write
    /// may, however many instances there are. Pages are read in different snapshots, which
    /// a replica's catch-up reconciles: everything committed after the sequence number it
    /// starts from, which it learned before this, is read again by it.
    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        var loaded: [StoredInstance] = []
        while true {
            let after = loaded.last?.id ?? ""
            let page = try read("cannot load instances", within: options.timeout) { (connection) throws(PostgreSQLError) in
                let found = try connection.execute(
                    "SELECT \(Self.instanceColumns) FROM instances WHERE id > $1 ORDER BY id LIMIT $2", [.text(after), .integer(Int64(Self.loadPageSize))]
                )
                return try (0..<found.rowCount).map { (row) throws(PostgreSQLError) in try Self.instance(found, row) }
            }
            loaded += page
            if page.count < Self.loadPageSize { return loaded }
        }
    }

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        guard !ids.isEmpty else { return [] }
        return try read("cannot load instances") { (connection) throws(PostgreSQLError) in
            let found = try connection.execute("SELECT \(Self.instanceColumns) FROM instances WHERE id = ANY($1::text[])", [.texts(ids)])
            return try (0..<found.rowCount).map { (row) throws(PostgreSQLError) in try Self.instance(found, row) }
        }
    }

    public func history(instanceID: String, after: Int64, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { (connection) throws(PostgreSQLError) in
            // One statement, so the page and its oldest record agree. A page's records have
            // versions above 0, so without an oldest record there is no page either. A client
            // pages with the last sequence number it saw, which belongs to this instance: the
            // range starts right after that record's version. One row more than the page holds
            // says whether more follow; the result, which libpq holds whole, stops at the first
            // row past the page's bytes (`before`: the bytes of the rows ahead of it), or at the
            // second when the first alone is bigger than they are.
            let found = try connection.execute(
                """
                WITH oldest AS (
                  SELECT version, seq FROM records WHERE instance = $1 AND version > 0 ORDER BY version LIMIT 1
                ), page AS (
                  SELECT seq, version, body, row_number() OVER (ORDER BY version) AS n,
                    sum(octet_length(body)) OVER (ORDER BY version) - octet_length(body) AS before
                  FROM records
                  WHERE instance = $1
                    AND version > coalesce((SELECT version FROM records WHERE seq = $2 AND instance = $1), 0)
                    AND seq > $2
                  ORDER BY version LIMIT $3
                )
                SELECT oldest.version, oldest.seq, page.seq, page.body FROM oldest LEFT JOIN page ON page.before <= $4 OR page.n <= 2 ORDER BY page.version
                """,
                [.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1), .integer(Int64(limit.bytes))]
            )
            var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
            var fill = PageFill(limit)
            for row in 0..<found.rowCount {
                page.oldestRetainedVersion = found.integer(row, 0)
                page.oldestRetainedSequence = found.integer(row, 1)
                guard !found.isNull(row, 2), fill.admits(size: found.byteCount(row, 3)) else { continue }
                page.records.append(found.bytes(row, 3))
                page.lastSequence = found.integer(row, 2)
            }
            page.hasMore = fill.turnedAway
            return page
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { (connection) throws(PostgreSQLError) in
            var counts = CoverageCounts()
            let found = try connection.execute("SELECT model, kind, name, count FROM coverage")
            for row in 0..<found.rowCount {
                guard let kind = CoverageCounts.Kind(rawValue: found.integer(row, 1)) else {
                    throw PostgreSQLError(
                        sqlState: "XX001", message: "a coverage counter has kind \(found.integer(row, 1)), which no lifecycled writes", isConnectionLost: false
                    )
                }
                let key = CoverageCounts.Key(
                    model: try found.text(row, 0, named: "coverage.model"), kind: kind, name: try found.text(row, 2, named: "coverage.name")
                )
                counts.add(found.integer(row, 3), to: key)
            }
            return counts
        }
    }

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        // As on SQLite: without an instance filter a page examines a bounded range of
        // sequence numbers, so a rare filter costs a bounded scan per page.
        let upper = filter.instances == nil ? min(through, after + SQLiteStore.replayScanRows) : through
        var parameters: [Connection.Parameter] = [.integer(after), .integer(upper), .integer(Int64(limit.records)), .integer(Int64(limit.bytes))]
        var recordConditions = ""
        var tombstoneConditions = ""
        if let instances = filter.instances {
            parameters.append(.texts(instances.sorted()))
            recordConditions += " AND instance = ANY($\(parameters.count)::text[])"
            tombstoneConditions += " AND instance = ANY($\(parameters.count)::text[])"
        }
        if let model = filter.model {
            parameters.append(.text(model))
            recordConditions += " AND (SELECT model FROM instances WHERE id = records.instance) = $\(parameters.count)"
            tombstoneConditions += " AND model = $\(parameters.count)"
        }
        var page = """
            SELECT seq, kind, body, instance, outcome, (SELECT model FROM instances WHERE id = records.instance) AS model
            FROM records WHERE seq > $1 AND seq <= $2\(recordConditions)
            """
        if let outcomes = filter.outcomes {
            // Codes, not client text: safe to write into the statement.
            page += " AND outcome IN (\(outcomes.map { String($0.storedCode) }.sorted().joined(separator: ", ")))"
        } else {
            page += """

                UNION ALL SELECT seq, \(RecordKind.deleted.rawValue), body, instance, NULL, model
                FROM tombstones WHERE seq > $1 AND seq <= $2\(tombstoneConditions)
                """
        }
        // One statement, so the page and its bounds agree. As for history, the result stops
        // at the first row past the page's bytes.
        let sql = """
            WITH rows AS (\(page) ORDER BY 1 LIMIT $3),
            page AS (
              SELECT *, row_number() OVER (ORDER BY seq) AS n, sum(octet_length(body)) OVER (ORDER BY seq) - octet_length(body) AS before
              FROM rows
            ),
            bounds AS (
              SELECT (SELECT coalesce(max(value), 0) FROM meta WHERE key = 'dropped_through') AS dropped_through,
                (SELECT min(seq) FROM records) AS oldest_record, (SELECT min(seq) FROM tombstones) AS oldest_tombstone
            )
            SELECT bounds.dropped_through, bounds.oldest_record, bounds.oldest_tombstone,
              page.seq, page.kind, page.body, page.instance, page.outcome, page.model
            FROM bounds LEFT JOIN page ON page.before <= $4 OR page.n <= 2 ORDER BY page.seq
            """
        return try read("cannot replay records after \(after)") { (connection) throws(PostgreSQLError) in
            let found = try connection.execute(sql, parameters)
            var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
            var fill = PageFill(limit)
            for row in 0..<found.rowCount {
                page.droppedThrough = found.integer(row, 0)
                page.oldestKept = [1, 2].compactMap { found.isNull(row, $0) ? nil : found.integer(row, $0) }.min()
                guard !found.isNull(row, 3), fill.admits(size: found.byteCount(row, 5)) else { continue }
                let sequence = found.integer(row, 3)
                guard let kind = RecordKind(rawValue: found.integer(row, 4)) else {
                    throw PostgreSQLError(
                        sqlState: "XX001", message: "record \(sequence) has kind \(found.integer(row, 4)), which no lifecycled writes", isConnectionLost: false
                    )
                }
                var outcome: Outcome?
                if !found.isNull(row, 7) {
                    guard let stored = Outcome(storedCode: found.integer(row, 7)) else {
                        throw PostgreSQLError(
                            sqlState: "XX001", message: "record \(sequence) has outcome \(found.integer(row, 7)), which no lifecycled writes",
                            isConnectionLost: false
                        )
                    }
                    outcome = stored
                }
                page.records.append(ReplayedRecord(
                    sequence: sequence, kind: kind, instance: try found.text(row, 6, named: "records.instance of \(sequence)"),
                    model: try found.text(row, 8, named: "the model of record \(sequence)"), outcome: outcome, json: found.bytes(row, 5)
                ))
            }
            if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
            return page
        }
    }

    // MARK: Support

    /// Runs PostgreSQL work, turning its error into a ``StoreError`` that says what was being done.
    private static func checked<T>(_ what: String, _ body: () throws(PostgreSQLError) -> T) throws(StoreError) -> T {
        do {
            return try body()
        } catch {
            throw StoreError(error, doing: what)
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

extension StoreError {
    init(_ error: PostgreSQLError, doing what: String) {
        if error.isConnectionLost {
            self.init("\(what): PostgreSQL is unreachable: \(error.message)", isUnreachable: true)
        } else {
            self.init(
                "\(what): \(error.message)\(error.sqlState.map { " (SQLSTATE \($0))" } ?? "")", isDiskFull: error.isDiskFull,
                isSpecificToWrite: error.isSpecificToWrite, isDamage: error.isDamage
            )
        }
    }
}

/// A connection made again when lost, no more often than a backoff allows: after a failed
/// attempt the next waits 100 ms, then twice as long each time up to 2 s. In between, asking
/// for the connection fails at once with the last attempt's reason. Reports the start and the
/// end of each outage, once each.
struct Link {
    let url: String
    /// Which connection this is, in reports: `write`, `read` or `listen`.
    let role: String
    private let report: @Sendable (StoreEvent) -> Void
    private var current: Connection?
    private var retryAt: ContinuousClock.Instant?
    private var delay = Self.firstDelay
    /// Why the connection is down, while it is.
    private var outage: String?

    static let firstDelay: Duration = .milliseconds(100)
    static let longestDelay: Duration = .seconds(2)

    init(url: String, role: String, report: @escaping @Sendable (StoreEvent) -> Void) {
        self.url = url
        self.role = role
        self.report = report
    }

    /// The connection for an operation that must be over by `deadline`, made now (by then)
    /// if there is none and the backoff allows.
    mutating func connection(by deadline: Deadline) throws(PostgreSQLError) -> Connection {
        if let current, !current.isLost {
            current.deadline = deadline
            return current
        }
        if current != nil { lost("the connection is closed") }
        let now = ContinuousClock.now
        if let retryAt, now < retryAt {
            let wait = Int((retryAt - now) / .milliseconds(1))
            throw PostgreSQLError(sqlState: nil, message: "\(outage ?? "") (next attempt in \(wait) ms)", isConnectionLost: true)
        }
        do {
            let made = try Connection(url: url, deadline: deadline)
            current = made
            retryAt = nil
            delay = Self.firstDelay
            if outage != nil {
                report(StoreEvent(.info, "PostgreSQL connection restored", ["connection": role]))
                outage = nil
            }
            return made
        } catch {
            if outage == nil { report(StoreEvent(.warning, "PostgreSQL unreachable", ["connection": role, "error": error.message])) }
            outage = error.message
            retryAt = now + delay
            delay = min(delay * 2, Self.longestDelay)
            throw error
        }
    }

    /// Forgets the connection if `error` says it is gone.
    mutating func dropIfLost(_ error: PostgreSQLError) {
        if error.isConnectionLost || current?.isLost == true { lost(error.message) }
    }

    private mutating func lost(_ why: String) {
        if current != nil, outage == nil { report(StoreEvent(.warning, "PostgreSQL connection lost", ["connection": role, "error": why])) }
        current = nil
        outage = outage ?? why
    }

    /// Closes the connection; the next use makes a new one.
    mutating func disconnect() {
        current = nil
    }
}

/// `LISTEN lifecycled_commits` on a connection of its own, on a thread of its own, calling
/// `wake` for each notification and after each (re)connection. A lost connection is made again with ``Link``'s backoff.
final class CommitListener: Sendable {
    private let stopped = Atomic<Bool>(false)

    /// `timeout`: the bound on connecting and on `LISTEN`.
    init(url: String, timeout: Duration, report: @escaping @Sendable (StoreEvent) -> Void, wake: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [self] in
            run(url: url, timeout: timeout, report: report, wake: wake)
        }
    }

    /// Ends the thread within a tenth of a second or so.
    func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private var isStopped: Bool { stopped.load(ordering: .relaxed) }

    /// How long one wait on the socket lasts at most, so that ``stop()`` takes effect soon.
    private static let slice: Duration = .milliseconds(100)

    private func run(url: String, timeout: Duration, report: @escaping @Sendable (StoreEvent) -> Void, wake: () -> Void) {
        var link = Link(url: url, role: "listen", report: report)
        while !isStopped {
            let connection: Connection
            do {
                connection = try link.connection(by: Deadline(timeout))
                try connection.execute("LISTEN \(PostgresStore.channel)")
            } catch {
                link.dropIfLost(error)
                Thread.sleep(forTimeInterval: Self.seconds(Self.slice))
                continue
            }
            // Whatever was notified while there was no connection is lost.
            wake()
            while !isStopped {
                var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, Int32(Self.slice / .milliseconds(1)))
                do throws(PostgreSQLError) {
                    if ready < 0 && errno != EINTR {
                        throw PostgreSQLError(sqlState: nil, message: "poll: \(String(cString: strerror(errno)))", isConnectionLost: true)
                    }
                    if ready > 0, try connection.takeNotifications() > 0 { wake() }
                } catch {
                    link.dropIfLost(error)
                    break
                }
            }
        }
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension PostgresStore {
    /// PostgreSQL checks its own data: there is no start-up check to wait for.
    public func verifyIntegrity() throws(StoreError) {}

    /// There is no start-up check whose result could explain a failure.
    public func reason(for failure: StoreError) -> StoreError { failure }

    /// The data is in PostgreSQL, not in a file of this process's.
    public var databaseFile: String? { nil }
}
