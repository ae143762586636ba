import CLifecycleSQLite
import Foundation
import LifecycleKit
import LifecycleLog
import LifecycleLocks

/// The embedded default store: one SQLite file in WAL mode.
public final class SQLiteStore: InstanceStore, Sendable {
    /// How hard a commit works to survive failures.
    public enum SyncMode: String, Sendable, CaseIterable {
        /// Survives a crash of the process (`kill -9`); a power loss may lose the last commits.
        case normal
        /// Also survives power loss: every commit waits for fsync.
        case full
    }

    /// How the store keeps, forgets and syncs.
    public struct Options: Sendable {
        public var sync: SyncMode
        /// Records kept per instance; older ones are dropped as new ones arrive.
        public var historyLimit: Int
        /// How long a deleted instance's deletion record stays replayable (its other records go at once), and its
        /// idempotency keys answer replays (see `Codec.StoredKey`; an instance that lives keeps its keys).
        public var tombstoneLifetime: TimeInterval
        /// Caps the database size in pages (SQLite's max_page_count); a full cap acts as a full disk.
        public var maxPageCount: Int?
        /// The bound on the WAL file, in bytes, however fast writes come (see ``WALBound``).
        public var maxWALSize: Int
        /// Opens a database that lost committed data instead of refusing it, reporting the loss; no number is reused.
        public var acceptDataLoss: Bool

        /// Options with the service's defaults.
        public init(
            sync: SyncMode = .normal, historyLimit: Int = 10_000,
            tombstoneLifetime: TimeInterval = RecordKind.deletionRecordLifetime, maxPageCount: Int? = nil,
            maxWALSize: Int = SQLiteStore.defaultMaxWALSize, acceptDataLoss: Bool = false
        ) {
            self.sync = sync
            self.historyLimit = max(1, historyLimit)
            self.tombstoneLifetime = tombstoneLifetime
            self.maxPageCount = maxPageCount
            self.maxWALSize = maxWALSize
            self.acceptDataLoss = acceptDataLoss
        }
    }

    /// 64 MiB: a few seconds of the heaviest write load, and a checkpoint every second or so under it.
    public static let defaultMaxWALSize = 64 * 1024 * 1024
    static let migrations = SQLiteMigrations.all
    /// The database file inside a data folder.
    public static let fileName = "lifecycled.sqlite"
    /// The database file: its size and its WAL's are reported.
    public let path: String
    public let options: Options
    /// Where the store's notable events go (the service logs them).
    let report: @Sendable (ServiceEvent) -> Void
    /// When the newest idempotency key stored before keys were scoped was made (`nil`: none).
    let unscopedKeysThrough: Date?
    let writer: LockedValue<Writer>
    /// The writer's connection, for ``stage(after:)`` to hand to a transaction without waiting for
    /// the writer's lock (held while the transaction before commits).
    private let writeConnection: WriteConnection
    /// Reads of committed data, on a connection of their own (WAL lets them run beside a write).
    let reader: LockedValue<Database>
    let checkpointer: BackgroundCheckpointer
    let pageSize: Int
    /// The check of the database once the service serves (``checkIntegrity(onDamage:)``), while it may run.
    private let backgroundCheck = LockedValue<IntegrityCheck?>(nil)

    /// Opens (creating if needed) and migrates the store in `directory`; refuses a folder another process holds, and a database
    /// that lost data the lock file's marker says was committed (unless ``Options/acceptDataLoss``).
    public init(
        directory: String, options: Options = Options(), report: @escaping @Sendable (ServiceEvent) -> Void = ServiceEvent.logToStandardError
    ) throws(StoreError) {
        self.options = options
        self.report = report
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError("cannot create data folder \(directory): \(error.localizedDescription)")
        }
        let path = directory + "/" + Self.fileName
        self.path = path
        let synchronous = options.sync == .full ? "FULL" : "NORMAL"
        let lock = try DataFolderLock(directory: directory)
        // Before SQLite sees the file: it would quietly make a new database of a missing or empty one.
        var loss = try Self.lossBeforeOpening(path, lock.marker)
        if let loss, !options.acceptDataLoss { throw Self.refusal(path, loss) }
        let database: Database
        do {
            database = try Database(path: path)
            // A commit writes about one index page per record to the WAL: 1 KiB pages (for a new
            // file) raised durable writes from about 25k to 35k a second (Benchmarks/RESULTS.md).
            try database.execute("PRAGMA page_size = 1024")
            try database.execute("PRAGMA journal_mode = WAL")
            try database.execute("PRAGMA synchronous = \(synchronous)")
            // A statement that writes several rows keeps the pages it changes in a statement
            // journal, a temporary file past 64 KiB: with many-row inserts that was more system
            // calls than the WAL's. In memory it holds one statement's pages.
            try database.execute("PRAGMA temp_store = MEMORY")
            // Commits never checkpoint (see ``WALBound``); a WAL left larger shrinks back once it starts over.
            try database.execute("PRAGMA journal_size_limit = \(options.maxWALSize)")
            if let pages = options.maxPageCount { try database.execute("PRAGMA max_page_count = \(pages)") }
            pageSize = try database.first("PRAGMA page_size") { Int($0.integer(0)) } ?? 1024
        } catch {
            throw StoreError(error, doing: "cannot open the database \(path)")
        }
        var sequence: Int64
        do {
            try Self.migrate(database)
            // Retention never drops the newest record; a delete's number is kept as a floor in `meta`.
            let newest = try database.first("SELECT coalesce(max(seq), 0) FROM records") { $0.integer(0) } ?? 0
            let floor = try database.first("SELECT value FROM meta WHERE key = 'sequence_floor'") { $0.integer(0) } ?? 0
            sequence = max(newest, floor)
            unscopedKeysThrough = try database.first("SELECT value FROM meta WHERE key = 'unscoped_keys_through'") { $0.date(0) }
        } catch {
            throw Self.reason(path, for: StoreError(error, doing: "cannot open the database \(path)"), report: report)
        }
        if case .committed(let marked) = lock.marker, sequence < marked {
            loss = loss ?? "the database holds sequence numbers up to \(sequence), but numbers up to \(marked) were committed"
        }
        if let loss {
            guard options.acceptDataLoss else { throw Self.refusal(path, loss) }
            let marked: String = if case .committed(let marked) = lock.marker { String(marked) } else { "none" }
            report(ServiceEvent(.warning, "accepted data loss", ["database": path, "loss": loss, "marker": marked, "lastSequence": String(sequence)]))
            if case .committed(let marked) = lock.marker, sequence < marked {
                // A client may hold a number up to the marker: none is reused, and replays learn of the gap.
                try checked("cannot raise the sequence floor") { () throws(SQLiteError) in
                    try database.transaction { () throws(SQLiteError) in
                        try database.run(["sequence_floor", "dropped_through"].map { SQLStatement(Database.dialect.raising($0), [.integer(marked)]) })
                    }
                }
                sequence = marked
            }
        }
        let writer = Writer(
            database: database, lock: lock, sequence: sequence, walBound: WALBound(maxSize: options.maxWALSize),
            retention: RetentionBacklog(historyLimit: options.historyLimit)
        )
        do {
            let reading = try Database(path: path)
            // Its files opened now, as the writer's were: no later read opens one by name.
            try reading.execute("SELECT 1 FROM meta LIMIT 0")
            reader = LockedValue(reading)
            checkpointer = try BackgroundCheckpointer(path: path, synchronous: synchronous, report: report)
            try writer.purgeExpired(options)
        } catch {
            throw Self.reason(path, for: StoreError(error, doing: "cannot open the database \(path)"), report: report)
        }
        try lock.mark(sequence)
        writeConnection = WriteConnection(database: database)
        self.writer = LockedValue(writer)
        checkpointer.start()
    }

    deinit {
        // The check's connection reads the file: done before the folder's lock is let go.
        backgroundCheck.withLock { $0 }?.cancel()
        checkpointer.stop()
    }

    private static func refusal(_ path: String, _ loss: String) -> StoreError {
        StoreError("refusing the database \(path): \(loss)", kind: .dataLoss)
    }

    /// What the lock file's marker says is missing before SQLite opens the file, or `nil`.
    private static func lossBeforeOpening(_ path: String, _ marker: DataFolderLock.Marker) throws(StoreError) -> String? {
        var status = stat()
        let exists = stat(path, &status) == 0
        guard exists || errno == ENOENT else { throw StoreError("cannot examine \(path): \(String(cString: strerror(errno)))") }
        switch marker {
        case .unreadable(let why):
            return "the marker of the last committed sequence number is unreadable (\(why))"
        case .committed(let marked) where !exists:
            return "the database is missing, but a database committed sequence numbers up to \(marked) here"
        case .committed(let marked) where status.st_size == 0:
            return "the database is empty (0 bytes), but it had committed sequence numbers up to \(marked)"
        case .none where exists && status.st_size == 0:
            // SQLite never leaves a database it made empty: this one was emptied.
            return "the database is an empty file (0 bytes), and no marker says it was new"
        case .committed, .none:
            return nil
        }
    }

    /// Starts `PRAGMA quick_check` of the database on a thread of its own (``IntegrityCheck``);
    /// `onDamage` gets what it finds. Called once the service serves; ``close()`` stops it.
    public func checkIntegrity(onDamage: @escaping @Sendable (StoreError) -> Void) {
        backgroundCheck.withLock { (check) in
            guard check == nil else { return }
            check = IntegrityCheck(path: path, report: report, onDamage: onDamage)
        }
    }

    /// The reason to give for a failed start: damage `PRAGMA quick_check` finds, else `failure`.
    public func reason(for failure: StoreError) -> StoreError {
        Self.reason(path, for: failure, report: report)
    }

    private static func reason(_ path: String, for failure: StoreError, report: (ServiceEvent) -> Void) -> StoreError {
        do {
            try IntegrityCheck.check(path, report: report)
            return failure
        } catch {
            return error
        }
    }

    /// Ends writing with a checkpoint that empties the WAL, and lets the data folder go.
    public func close() {
        writer.withLock { (writer: inout Writer) -> Void in
            guard !writer.isClosed else { return }
            writer.isClosed = true
            // Its connection reads the file: done before the folder's lock is let go.
            backgroundCheck.withLock { $0 }?.cancel()
            checkpointer.stop()
            let database = writer.database
            do throws(SQLiteError) {
                if try checkpointer.excludingRounds(waiting: true, { () throws(SQLiteError) in try database.checkpoint(.truncate) }) == false {
                    report(ServiceEvent(.warning, "WAL not emptied at stop: a reader still uses it", ["database": path]))
                }
            } catch {
                report(ServiceEvent(.error, "WAL checkpoint at stop failed", ["database": path, "error": error.message]))
            }
            writer.lock.release()
        }
    }

    /// One transaction per migration; then the columns the codec uses are checked, once.
    static func migrate(_ database: Database) throws(SQLiteError) {
        try database.migrate(migrations) { (body) throws(SQLiteError) in try database.transaction { () throws(SQLiteError) in try body() } }
        try database.checkColumns()
    }

    /// The schema version the database is at: how many migrations it has had.
    public func schemaVersion() throws(StoreError) -> Int {
        try read("cannot read the schema version") { (database) throws(SQLiteError) in try database.migrationCount() }
    }

    /// The names of the migrations the database has had.
    func migrationNames() throws(StoreError) -> [String] {
        try read("cannot read the migrations") { (database) throws(SQLiteError) in try database.migrationNames() }
    }

    /// One read at a time.
    func read<T: Sendable>(_ what: String, _ body: sending (Database) throws(SQLiteError) -> T) throws(StoreError) -> T {
        try reader.withLock { (database: inout Database) throws(StoreError) -> T in
            try checked(what) { () throws(SQLiteError) in try body(database) }
        }
    }

    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        try loadInstances(inHalvesFrom: Self.instancesLoadedInHalves)
    }

    /// ``loadInstances()``, split over two threads from `threshold` instances, while no rows
    /// change (start-up: the background checkpoint moves pages, not rows).
    func loadInstances(inHalvesFrom threshold: Int) throws(StoreError) -> [StoredInstance] {
        // A count first (a walk of the table's pages, far cheaper than the rows) sizes the array once.
        let count = try read("cannot load instances") { (database) throws(SQLiteError) in try database.instanceCount() }
        guard count >= max(threshold, 2) else {
            return try read("cannot load instances") { (database) throws(SQLiteError) in
                try database.instances(after: "", limit: Int64.max, expected: count)
            }
        }
        // The first half from the smallest id up on the reading connection, the rest from the
        // greatest down on the writer's, at once: at a million instances the load was two thirds
        // of a restart, on one core of two. Read from both ends, the halves need no id to split
        // at (finding one walked half the table again, on one core).
        let split = count / 2 + 1
        let instances = try Self.array(count: count, split: split) { (half, place) throws(StoreError) in
            if half == 0 {
                try reader.withLock { (database: inout Database) throws(StoreError) in
                    try checked("cannot load instances") { () throws(SQLiteError) in
                        try database.forEachInstance(after: "", limit: Int64(split), place)
                    }
                }
            } else {
                try writer.withLock { (writer: inout Writer) throws(StoreError) in
                    try checked("cannot load instances") { () throws(SQLiteError) in
                        try writer.database.forEachInstance(after: "", limit: Int64(count - split), descending: true, place)
                    }
                }
            }
        }
        // Disjoint only if the count still holds: the halves meet, they do not overlap.
        guard split == count || instances[split - 1].id < instances[split].id else {
            throw StoreError("cannot load instances: they changed while they were loaded (\(instances[split].id) read twice)")
        }
        return instances
    }

    /// An array of `count` elements made by two threads at once, straight into its storage: the
    /// first `split` of them by `part(0, place)`, handing `place` its elements in order, the rest
    /// by `part(1, place)`, handing them in reverse order (its last first).
    ///
    /// Made as two arrays, the halves were copied once more to be joined: a tenth of a restart at
    /// a million instances, on one core. A part that places fewer elements than its share, or
    /// fails, fails the whole, and what was placed is freed. More than its share is a programming
    /// error (the load's `LIMIT` bounds it).
    static func array<Element>(
        count: Int, split: Int, part: @Sendable (Int, (Element) -> Void) throws(StoreError) -> Void
    ) throws(StoreError) -> [Element] {
        precondition(0 < split && split <= count)
        let parts = LockedValue<[Int: (placed: Int, failure: StoreError?)]>([:])
        let made = [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            // Each thread initializes only its own range of the storage: the first from its start
            // up, the second from its end down.
            nonisolated(unsafe) let base = buffer.baseAddress!
            DispatchQueue.concurrentPerform(iterations: 2) { half in
                let share = half == 0 ? split : count - split
                var placed = 0
                var failure: StoreError?
                do throws(StoreError) {
                    try part(half) { element in
                        precondition(placed < share, "more elements than the share counted")
                        (base + (half == 0 ? placed : count - 1 - placed)).initialize(to: element)
                        placed += 1
                    }
                    if placed < share { failure = StoreError("read \(placed) instances where \(share) were counted") }
                } catch {
                    failure = error
                }
                parts.withLock { $0[half] = (placed, failure) }
            }
            let done = parts.withLock { $0 }
            guard done.values.contains(where: { $0.failure != nil }) else {
                initialized = count
                return
            }
            base.deinitialize(count: done[0]!.placed)
            (base + count - done[1]!.placed).deinitialize(count: done[1]!.placed)
            initialized = 0
        }
        if let failure = parts.withLock({ $0[0]!.failure ?? $0[1]!.failure }) { throw failure }
        return made
    }

    /// How many instances there must be for the load to be split over two threads.
    static let instancesLoadedInHalves = 50_000

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { (database) throws(SQLiteError) in try database.instances(ids) }
    }

    public func history(instanceID: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { (database) throws(SQLiteError) in
            try database.history(instanceID: instanceID, after: after, divergentOnly: divergentOnly, limit: limit)
        }
    }

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        try read("cannot replay records after \(after)") { (database) throws(SQLiteError) in
            try database.replay(after: after, through: through, filter: filter, limit: limit)
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { (database) throws(SQLiteError) in try database.coverage() }
    }

    public func loadFindings() throws(StoreError) -> StoredFindings {
        try read("cannot load findings") { (database) throws(SQLiteError) in try database.storedFindings() }
    }

    /// Runs `PRAGMA integrity_check`; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read("cannot check integrity") { (database) throws(SQLiteError) in
            try database.rows("PRAGMA integrity_check") { $0.text(0) ?? "NULL" }.joined(separator: "\n")
        }
    }

    public var lastSequence: Int64 { writer.withLock { $0.sequence } }
    public func latestSequence() throws(StoreError) -> Int64 { lastSequence }
    /// Only this process writes the file (the data folder's lock sees to it): nothing to observe.
    public func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void) {}
}

extension Database {
    private static let replayBoundsRow = "SELECT \(replayBounds)"

    /// The page and its oldest record from one snapshot, so they agree. Rows stream, so those the page turns away are not read.
    func history(instanceID: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(SQLiteError) -> HistoryPage {
        var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
        var fill = PageFill(limit)
        let sql = "SELECT \(Codec.historyColumns) \(Self.historyRange(divergentOnly: divergentOnly))"
        try transaction("BEGIN") { () throws(SQLiteError) in
            try forEachRow(sql, [.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1)]) { row in
                let row = row.columns(HistoryColumn.self)
                guard fill.admits(size: row.byteCount(.body)) else { return }
                page.records.append(row.bytes(.body))
                page.lastSequence = row.integer(.seq)
            }
            let oldest = try first(Self.historyOldest, [.text(instanceID)]) { row in
                let row = row.columns(OldestColumn.self)
                return (version: row.integer(.version), sequence: row.integer(.seq))
            }
            if let oldest {
                page.oldestRetainedVersion = oldest.version
                page.oldestRetainedSequence = oldest.sequence
            }
        }
        page.hasMore = fill.turnedAway
        return page
    }

    /// The page and its bounds from one snapshot, so they agree; rows stream, as history's do.
    func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(SQLiteError) -> ReplayPage {
        let (sql, values, upper) = Self.replaySelect(after: after, through: through, filter: filter, limit: limit)
        var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
        var fill = PageFill(limit)
        try transaction("BEGIN") { () throws(SQLiteError) in
            try forEachRow(sql, values) { (row) throws(SQLiteError) in
                guard fill.admits(size: row.columns(ReplayColumn.self).byteCount(.body)) else { return }
                page.records.append(try Codec.replayed(row))
            }
            try forEachRow(Self.replayBoundsRow, []) { Codec.bounds($0, into: &page) }
        }
        if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
        return page
    }
}

extension SQLiteStore {
    // @unchecked: a staged transaction uses the connection only once `commit` holds the writer's lock.
    struct WriteConnection: @unchecked Sendable {
        let database: Database
    }

    /// The write connection and what its transactions share, under ``SQLiteStore/writer``'s lock.
    struct Writer {
        let database: Database
        /// One process per data folder; also keeps the marker of the last committed sequence.
        let lock: DataFolderLock
        var sequence: Int64
        var writesSincePurge = 0
        var walBound: WALBound
        var retention: RetentionBacklog
        var isClosed = false

        /// Drops expired idempotency keys and deletion records, raising the floor of dropped records.
        func purgeExpired(_ options: SQLiteStore.Options) throws(SQLiteError) {
            let statements = Database.purgingExpired(tombstoneLifetime: options.tombstoneLifetime)
            try database.transaction { () throws(SQLiteError) in try database.run(statements) }
        }
    }
}

extension SQLiteStore {
    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        try writer.withLock { (writer: inout Writer) throws(StoreError) -> T in
            let transaction = SQLTransaction(
                writer.database, sequence: writer.sequence, instanceCount: nil, historyLimit: options.historyLimit,
                releasedKeyLifetime: options.tombstoneLifetime, unscopedKeysThrough: unscopedKeysThrough
            )
            return try run(transaction, &writer, body)
        }
    }

    public func stage(after sequence: Int64?) -> (any StoreTransaction)? {
        let start = sequence ?? lastSequence
        // Not connected: it holds its writes in memory until `commit`, on the writer's thread.
        return SQLTransaction(
            writeConnection.database, sequence: start, instanceCount: nil, historyLimit: options.historyLimit,
            releasedKeyLifetime: options.tombstoneLifetime, unscopedKeysThrough: unscopedKeysThrough, isConnected: false
        )
    }

    public func commit<T>(_ staged: any StoreTransaction, _ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        guard let transaction = staged as? SQLTransaction<Database> else { throw StoreError("not a transaction this store staged; nothing was changed") }
        return try writer.withLock { (writer: inout Writer) throws(StoreError) -> T in
            // Its writes were decided as if every transaction before it had committed: they must have.
            guard transaction.startSequence == writer.sequence else {
                throw StoreError(
                    "a staged transaction follows sequence number \(transaction.startSequence), but \(writer.sequence) is the last committed; nothing was changed"
                )
            }
            transaction.connect()
            return try run(transaction, &writer, body)
        }
    }

    /// Runs `body` in `transaction` and commits it, under the writer's lock: the one path every write takes.
    private func run<T>(
        _ transaction: SQLTransaction<Database>, _ writer: inout Writer, _ body: (any StoreTransaction) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        guard !writer.isClosed else { throw StoreError("the store is closed; nothing was changed") }
        try restartWALIfDue(&writer)
        let database = writer.database
        // A prepared statement, as the COMMIT is: sqlite3_exec would compile it every time.
        try checked("cannot begin a transaction") { () throws(SQLiteError) in try database.run([SQLStatement("BEGIN IMMEDIATE")]) }
        let result: T
        do throws(StoreError) {
            result = try body(transaction)
            // What waits, what retention drops now, then the COMMIT, each a prepared statement.
            let closing = try transaction.closingStatements(after: writer.retention) + [SQLStatement("COMMIT")]
            try checked("cannot commit") { () throws(SQLiteError) in try database.run(closing) }
        } catch {
            do throws(SQLiteError) {
                try database.rollBack()
            } catch let failure {
                // The store's failure now, whatever the write's; only a full disk is still told apart.
                throw StoreError(
                    "\(error.message); the rollback after it failed too: \(failure.message)", kind: error.kind == .diskFull ? .diskFull : .other,
                    code: error.code
                )
            }
            throw error
        }
        writer.retention.committed(transaction.drops)
        committed(transaction.sequence, &writer)
        return result
    }

    /// After a commit: the marker follows, expired keys go now and then; a failure is reported, since the write committed.
    private func committed(_ newSequence: Int64, _ writer: inout Writer) {
        if newSequence != writer.sequence {
            writer.sequence = newSequence
            // After the commit, so the marker never passes the database, even without fsync (see DataFolderLock).
            do {
                try writer.lock.mark(newSequence)
            } catch {
                report(ServiceEvent(.error, "cannot update the sequence marker", ["sequence": String(newSequence), "error": error.message]))
            }
        }
        writer.writesSincePurge += 1
        if writer.writesSincePurge >= 1000 {
            writer.writesSincePurge = 0
            do {
                try writer.purgeExpired(options)
            } catch {
                report(ServiceEvent(.warning, "cannot purge expired idempotency keys and deletion records", ["database": path, "error": error.message]))
            }
        }
    }

    /// Checkpoints between two transactions once the WAL passed its threshold, so the next commit
    /// starts it over; RESTART waits only for readers (history reads take milliseconds).
    private func restartWALIfDue(_ writer: inout Writer) throws(StoreError) {
        // The WAL's header, then each frame's header and page.
        let frames = writer.database.walFrames
        let bytes = frames == 0 ? 0 : 32 + frames * (24 + pageSize)
        let due = writer.walBound.due(walBytes: bytes)
        guard due != .no else { return }
        let finished: Bool?
        let database = writer.database
        do throws(SQLiteError) {
            finished = try checkpointer.excludingRounds(waiting: due == .now) { () throws(SQLiteError) in try database.checkpoint(.restart) }
        } catch {
            report(ServiceEvent(.error, "WAL checkpoint failed", ["database": path, "walBytes": String(bytes), "error": error.message]))
            writer.walBound.checkpointed(finished: false, walBytes: bytes)
            // A damaged file fails the write; anything else lets it go on into the WAL.
            if error.kind == .damaged { throw StoreError(error, doing: "cannot checkpoint the WAL") }
            return
        }
        guard let finished else { return }  // a background round is running: at a later transaction
        if !finished {
            report(ServiceEvent(.warning, "WAL checkpoint could not finish: a reader still uses the WAL", ["database": path, "walBytes": String(bytes)]))
        }
        writer.walBound.checkpointed(finished: finished, walBytes: bytes)
    }
}
