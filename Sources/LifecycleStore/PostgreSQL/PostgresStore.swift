import Foundation
import LifecycleKit
import LifecycleLog
import LifecycleLocks

/// The store for several replicas on one PostgreSQL, which learn of each other's commits through `LISTEN`/`NOTIFY` and
/// polling. A write locks the one row of `commit_counter` and numbers its records after its `last_sequence`: dense and in
/// commit order across replicas, as a PostgreSQL sequence's are not. When PostgreSQL cannot be reached (or does not answer
/// within ``Options/timeout`` or ``Options/readTimeout``), operations fail at once and the next connect again (see ``Link``).
public final class PostgresStore: InstanceStore, Sendable {
    /// How the store keeps and forgets, and where it listens.
    public struct Options: Sendable {
        /// Records kept per instance; older ones are dropped as new ones arrive.
        public var historyLimit: Int
        /// How long a deleted instance's deletion record stays replayable, and its idempotency keys answer replays
        /// (see `Codec.StoredKey`; an instance that lives keeps its keys).
        public var tombstoneLifetime: TimeInterval
        /// A direct connection for `LISTEN`, which PgBouncer in transaction mode cannot carry; `nil`: the store's URL.
        public var listenURL: String?
        /// The longest a write transaction, the store's opening or a page of ``loadInstances()`` may wait.
        public var timeout: Duration
        /// The longest a read may wait, for the shared read connection too: reads run on HTTP threads.
        public var readTimeout: Duration

        /// Options with the service's defaults.
        public init(
            historyLimit: Int = 10_000,
            tombstoneLifetime: TimeInterval = RecordKind.deletionRecordLifetime, listenURL: String? = nil,
            timeout: Duration = .seconds(5), readTimeout: Duration = .seconds(1)
        ) {
            self.historyLimit = max(1, historyLimit)
            self.tombstoneLifetime = tombstoneLifetime
            self.listenURL = listenURL
            self.timeout = timeout
            self.readTimeout = readTimeout
        }
    }

    /// The channel each commit notifies; no payload, since NOTIFY's queue serialises commits cluster-wide.
    static let channel = "lifecycled_commits"
    /// The advisory lock migrations hold, so replicas starting together do not race ("lifecycled" in ASCII).
    static let schemaLockKey: Int64 = 0x6c_6966_6563_7963
    static let migrations = PostgresMigrations.all
    /// Instances one statement of ``loadInstances()`` reads.
    static let loadPageSize = 10_000

    /// The write connection (one transaction at a time from this process) or the read one, and whether the store closed it.
    struct Line {
        var link: Link
        var writesSincePurge = 0
        var isClosed = false
        /// The writer's; the reader's stays empty.
        var retention = RetentionBacklog()
    }

    public let options: Options
    private let url: String
    private let report: @Sendable (ServiceEvent) -> Void
    private let writer: LockedValue<Line>
    /// Reads of committed data: never on the write connection, so as not to wait for a batch.
    let reader: LockedValue<Line>
    // NSLock: a read waits for the one ahead of it no longer than its bound, and LockedValue has no timed lock.
    let readGate = NSLock()
    /// The largest sequence number this process committed or read.
    private let knownSequence = LockedValue<Int64>(0)
    private let listeners = LockedValue<[CommitListener]>([])

    /// Connects to `url` and creates or migrates the schema; throws if PostgreSQL cannot be reached now.
    public init(
        url: String, options: Options = Options(), report: @escaping @Sendable (ServiceEvent) -> Void = ServiceEvent.logToStandardError
    ) throws(StoreError) {
        self.url = url
        self.options = options
        self.report = report
        var link = Link(url: url, role: "write", report: report)
        let connection = try checked("cannot open the PostgreSQL store") { () throws(PostgreSQLError) in
            try link.connection(by: Deadline(options.timeout))
        }
        // A failure ends `link` and its connection with the init, which rolls the transaction back on the server.
        let sequence = try checked("cannot open the PostgreSQL store") { () throws(PostgreSQLError) in
            try connection.execute("BEGIN")
            try Self.migrate(connection)
            // The counter's lock, as in a write: two replicas' purges could deadlock otherwise.
            let sequence = try connection.execute("SELECT last_sequence FROM commit_counter WHERE id = 1 FOR UPDATE").row(0).integer(0)
            try connection.run(Self.purgeExpired(options: options) + [SQLStatement("COMMIT")])
            return sequence
        }
        writer = LockedValue(Line(link: link, retention: RetentionBacklog(historyLimit: options.historyLimit)))
        reader = LockedValue(Line(link: Link(url: url, role: "read", report: report)))
        knownSequence.withLock { $0 = sequence }
    }

    deinit {
        listeners.withLock { $0.forEach { $0.stop() } }
    }

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

    /// In the caller's transaction: the advisory lock holds until it ends, so a replica starting at the same moment finds the schema made.
    private static func migrate(_ connection: Connection) throws(PostgreSQLError) {
        try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(schemaLockKey)])
        try connection.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value bigint NOT NULL)")
        try connection.migrate(migrations) { (body) throws(PostgreSQLError) in try body() }
        try connection.checkColumns()
    }

    /// The schema version the database is at: how many migrations it has had.
    public func schemaVersion() throws(StoreError) -> Int {
        try read("cannot read the schema version") { (connection) throws(PostgreSQLError) in try connection.migrationCount() }
    }

    /// The names of the migrations the database has had.
    func migrationNames() throws(StoreError) -> [String] {
        try read("cannot read the migrations") { (connection) throws(PostgreSQLError) in try connection.migrationNames() }
    }

    static func purgeExpired(options: Options) -> [SQLStatement] {
        Connection.purgingExpired(tombstoneLifetime: options.tombstoneLifetime)
    }

    // MARK: Sequence numbers and other replicas' commits

    public var lastSequence: Int64 { knownSequence.withLock { $0 } }

    func learned(_ sequence: Int64) {
        knownSequence.withLock { $0 = max($0, sequence) }
    }

    public func latestSequence() throws(StoreError) -> Int64 {
        let sequence = try read("cannot read the last sequence number") { (connection) throws(PostgreSQLError) in
            try connection.execute("SELECT last_sequence FROM commit_counter WHERE id = 1").row(0).integer(0)
        }
        learned(sequence)
        return sequence
    }

    /// Listens on ``Options/listenURL`` (see ``CommitListener``); this process's commits wake it too.
    public func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void) {
        let listener = CommitListener(url: options.listenURL ?? url, timeout: options.timeout, report: report, wake: wake)
        listeners.withLock { $0.append(listener) }
    }

    // MARK: Writes

    /// None: other processes commit to the same database, so writes are decided only inside a
    /// transaction, against what it reads.
    public func stage(after sequence: Int64?) -> (any StoreTransaction)? { nil }

    /// Never called: ``stage(after:)`` stages nothing here.
    public func commit<T>(_ staged: any StoreTransaction, _ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        throw StoreError("PostgreSQL stages no transactions; nothing was changed")
    }

    /// Durable as the server's `synchronous_commit` has it. A COMMIT whose connection drops, or that outlasts ``Options/timeout``,
    /// fails with ``StoreError/isOutcomeUnknown``: it may have committed, which a retry with the same idempotency key learns.
    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        // nonisolated(unsafe): `body` runs only here, under the lock; region checking cannot see that.
        nonisolated(unsafe) let body = body
        nonisolated(unsafe) var result: T?
        let sequence = try writer.withLock { (writer: inout Line) throws(StoreError) -> Int64 in
            guard !writer.isClosed else { throw StoreError("the store is closed; nothing was changed") }
            let transaction = try Self.begin(by: Deadline(options.timeout), &writer.link, options: options)
            let connection = transaction.connection
            var closing: [SQLStatement]
            let purging: Bool
            do throws(StoreError) {
                result = try body(transaction)
                if let failure = transaction.failure {
                    // The body went on after a failed statement: the COMMIT would only roll back.
                    throw StoreError(failure, doing: "cannot commit after a failed statement")
                }
                purging = writer.writesSincePurge + 1 >= 1000
                // What waits, what retention drops now, now and then a purge, and the counter with a notification.
                closing = try transaction.closingStatements(after: writer.retention) + (purging ? Self.purgeExpired(options: options) : [])
                if transaction.sequence != transaction.startSequence {
                    let counted = "WITH counted AS (UPDATE commit_counter SET last_sequence = $1, instance_count = $2 WHERE id = 1)"
                    closing.append(SQLStatement(
                        "\(counted) SELECT pg_notify('\(Self.channel)', '')", [.integer(transaction.sequence), .integer(Int64(try transaction.instanceCount()))]
                    ))
                }
            } catch {
                writer.link.rollBack()
                throw error
            }
            // What waited, the counter and COMMIT: one round trip.
            do throws(PostgreSQLError) {
                try connection.execute(closing + [SQLStatement("COMMIT")])
            } catch {
                if error.isConnectionLost {
                    writer.link.dropIfLost(error)
                    throw StoreError(
                        "cannot commit: PostgreSQL is unreachable: \(error.message); whether the transaction committed is unknown", kind: .unavailable,
                        isOutcomeUnknown: true, code: error.sqlState.map(StoreError.Code.sqlState)
                    )
                }
                // A statement failed, and PostgreSQL skipped the COMMIT after it.
                writer.link.rollBack()
                throw StoreError(error, doing: "cannot commit")
            }
            writer.writesSincePurge = purging ? 0 : writer.writesSincePurge + 1
            writer.retention.committed(transaction.drops)
            return transaction.sequence
        }
        learned(sequence)
        return result!
    }

    /// Begins and locks the counter row (see ``Link/retryingOnce(by:_:)``: the first write after an outage succeeds).
    private static func begin(by deadline: Deadline, _ link: inout Link, options: Options) throws(StoreError) -> SQLTransaction<Connection> {
        do throws(PostgreSQLError) {
            return try link.retryingOnce(by: deadline) { (connection) throws(PostgreSQLError) in
                let counter = try connection.execute([
                    SQLStatement("BEGIN"), SQLStatement("SELECT last_sequence, instance_count FROM commit_counter WHERE id = 1 FOR UPDATE"),
                ])[1]
                guard counter.rowCount == 1 else { throw ResultRow.damaged("commit_counter has no row: the database is damaged") }
                let row = counter.row(0)
                return SQLTransaction(
                    connection, sequence: row.integer(0), instanceCount: row.integer(1), historyLimit: options.historyLimit,
                    releasedKeyLifetime: options.tombstoneLifetime
                )
            }
        } catch {
            if !error.isConnectionLost { link.rollBack() }
            throw StoreError(error, doing: "cannot begin a transaction")
        }
    }

    /// Runs `body` (one statement, so one snapshot) on the read connection within `bound` (``Options/readTimeout`` unless
    /// given), the wait for the read ahead and a retry on a lost connection (``Link/retryingOnce(by:_:)``) included.
    /// `@Sendable` (its captures are values): region checking refuses a `sending` closure handed on to the reader's link.
    func read<T: Sendable>(
        _ what: String, within bound: Duration? = nil, _ body: @Sendable (Connection) throws(PostgreSQLError) -> T
    ) throws(StoreError) -> T {
        let deadline = Deadline(bound ?? options.readTimeout)
        guard readGate.lock(before: deadline.date) else { throw StoreError(deadline.passed("waiting for the read ahead of it"), doing: what) }
        defer { readGate.unlock() }
        return try reader.withLock { (reader) throws(StoreError) -> T in
            guard !reader.isClosed else { throw StoreError("\(what): the store is closed") }
            return try checked(what) { () throws(PostgreSQLError) in try reader.link.retryingOnce(by: deadline, body) }
        }
    }

    /// In pages by id, each within ``Options/timeout``; a replica's catch-up reconciles their snapshots.
    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        var loaded: [StoredInstance] = []
        while true {
            let after = loaded.last?.id ?? ""
            let page = try read("cannot load instances", within: options.timeout) { (connection) throws(PostgreSQLError) in
                try connection.instances(after: after, limit: Int64(Self.loadPageSize))
            }
            loaded += page
            if page.count < Self.loadPageSize { return loaded }
        }
    }

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        guard !ids.isEmpty else { return [] }
        return try read("cannot load instances") { (connection) throws(PostgreSQLError) in try connection.instances(ids) }
    }

    public func history(instanceID: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { (connection) throws(PostgreSQLError) in
            try connection.history(instanceID: instanceID, after: after, divergentOnly: divergentOnly, limit: limit)
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { (connection) throws(PostgreSQLError) in try connection.coverage() }
    }

    public func loadFindings() throws(StoreError) -> StoredFindings {
        try read("cannot load findings") { (connection) throws(PostgreSQLError) in try connection.storedFindings() }
    }

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        try read("cannot replay records after \(after)") { (connection) throws(PostgreSQLError) in
            try connection.replay(after: after, through: through, filter: filter, limit: limit)
        }
    }
}

extension Connection {
    /// History's columns: the oldest record's (``OldestColumn``), then the page's (``HistoryColumn``).
    private static let historyPageColumns = OldestColumn.list("oldest.") + ", " + HistoryColumn.list("page.")
    private static let historyRecordOffset = OldestColumn.end
    /// The replay's columns: the page's (``ReplayColumn``), then the bounds (``BoundsColumn``).
    private static let replayPageColumns = ReplayColumn.list("page.")
    private static let replayBoundsOffset = ReplayColumn.end

    /// One statement, so the page and its oldest record agree (no oldest, no page). libpq holds
    /// the result whole, so it stops at the first row past the page's bytes (`before`), or the second.
    func history(instanceID: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(PostgreSQLError) -> HistoryPage {
        let found = try execute(
            """
            WITH oldest AS (\(Self.historyOldest)), page AS (
              SELECT seq, version, body, row_number() OVER (ORDER BY version) AS n,
                sum(octet_length(body)) OVER (ORDER BY version) - octet_length(body) AS before
              \(Self.historyRange(divergentOnly: divergentOnly))
            )
            SELECT \(Self.historyPageColumns) FROM oldest LEFT JOIN page ON page.before <= $4 OR page.n <= 2 ORDER BY page.version
            """,
            [.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1), .integer(Int64(limit.bytes))]
        )
        var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
        var fill = PageFill(limit)
        for row in found.rows {
            let oldest = row.columns(OldestColumn.self)
            page.oldestRetainedVersion = oldest.integer(.version)
            page.oldestRetainedSequence = oldest.integer(.seq)
            // The page's columns follow; with no record in the page, they are NULL.
            let record = row.columns(HistoryColumn.self, from: Self.historyRecordOffset)
            guard !record.isNull(.seq), fill.admits(size: record.byteCount(.body)) else { continue }
            page.records.append(record.bytes(.body))
            page.lastSequence = record.integer(.seq)
        }
        page.hasMore = fill.turnedAway
        return page
    }

    /// One statement, so the page and its bounds agree; it stops past the page's bytes, as history does.
    func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(PostgreSQLError) -> ReplayPage {
        var (select, values, upper) = Self.replaySelect(after: after, through: through, filter: filter, limit: limit)
        values.append(.integer(Int64(limit.bytes)))
        let sql = """
            WITH rows AS (\(select)),
            page AS (
              SELECT *, row_number() OVER (ORDER BY seq) AS n, sum(octet_length(body)) OVER (ORDER BY seq) - octet_length(body) AS before
              FROM rows
            ),
            bounds AS (SELECT \(Self.replayBounds))
            SELECT \(Self.replayPageColumns), bounds.*
            FROM bounds LEFT JOIN page ON page.before <= $\(values.count) OR page.n <= 2 ORDER BY page.seq
            """
        var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
        var fill = PageFill(limit)
        for row in try execute(sql, values).rows {
            // The bounds follow the page's columns, which are NULL when the page has no record.
            Codec.bounds(row, from: Self.replayBoundsOffset, into: &page)
            let record = row.columns(ReplayColumn.self)
            guard !record.isNull(.seq), fill.admits(size: record.byteCount(.body)) else { continue }
            page.records.append(try Codec.replayed(row))
        }
        if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
        return page
    }
}
