import CSQLite
import Foundation
import LifecycleKit
import Synchronization

/// The embedded default store: one SQLite file in WAL mode.
public final class SQLiteStore: InstanceStore, @unchecked Sendable {
    /// How hard a commit works to survive failures.
    public enum SyncMode: String, Sendable, CaseIterable {
        /// Survives a crash of the process (`kill -9`); a power loss may lose the last commits.
        case normal
        /// Also survives power loss: every commit waits for fsync.
        case full
    }

    public struct Options: Sendable {
        public var sync: SyncMode
        /// Records kept per instance; older ones are dropped as new ones arrive.
        public var historyLimit: Int
        /// How long idempotency keys are kept.
        public var idempotencyLifetime: TimeInterval
        /// How long a deleted instance's deletion record stays replayable (its other records
        /// go at once, with the instance).
        public var tombstoneLifetime: TimeInterval
        /// Caps the database size in pages (SQLite's max_page_count); a full cap acts as a full disk.
        public var maxPageCount: Int?
        /// The bound on the WAL file, in bytes, however fast writes come (see ``WALBound``).
        public var maxWALSize: Int
        /// Opens a database that lost committed data (missing, emptied, or behind the
        /// marker in the lock file) instead of refusing it. The loss is reported, and
        /// sequence numbers continue after the last one handed out, so none is reused.
        public var acceptDataLoss: Bool

        public init(
            sync: SyncMode = .normal, historyLimit: Int = 10_000, idempotencyLifetime: TimeInterval = 24 * 3600,
            tombstoneLifetime: TimeInterval = SQLiteStore.defaultTombstoneLifetime, maxPageCount: Int? = nil,
            maxWALSize: Int = SQLiteStore.defaultMaxWALSize, acceptDataLoss: Bool = false
        ) {
            self.sync = sync
            self.historyLimit = max(1, historyLimit)
            self.idempotencyLifetime = idempotencyLifetime
            self.tombstoneLifetime = tombstoneLifetime
            self.maxPageCount = maxPageCount
            self.maxWALSize = maxWALSize
            self.acceptDataLoss = acceptDataLoss
        }
    }

    /// 64 MiB: a few seconds of the heaviest write load, and a checkpoint every second or so under it.
    public static let defaultMaxWALSize = 64 * 1024 * 1024

    /// 24 hours: a watcher that reconnects within a day still learns of a deletion.
    public static let defaultTombstoneLifetime: TimeInterval = 24 * 3600

    /// The schema, one migration per version; `PRAGMA user_version` says how many have run.
    static let migrations: [String] = [
        """
        CREATE TABLE instances (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            state TEXT NOT NULL,
            version INTEGER NOT NULL,
            launch_count INTEGER NOT NULL,
            buffered_action TEXT,
            window TEXT,
            breadcrumb_step TEXT,
            scene_connected INTEGER NOT NULL,
            unexpected INTEGER NOT NULL,
            ignored INTEGER NOT NULL,
            incomplete_launches INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE records (
            seq INTEGER PRIMARY KEY,
            instance TEXT NOT NULL,
            version INTEGER NOT NULL,
            body BLOB NOT NULL
        );
        CREATE UNIQUE INDEX records_by_instance ON records(instance, version);
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE idempotency (
            key TEXT PRIMARY KEY,
            fingerprint BLOB NOT NULL,
            status INTEGER NOT NULL,
            content_type TEXT NOT NULL,
            body BLOB NOT NULL,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX idempotency_by_age ON idempotency(created_at);
        """,
        // Version 2: records name their instance in their JSON and carry their kind and
        // outcome (for replay filters; no index: replays scan a range of sequence numbers);
        // instances get a creation record (version 0) and leave a deletion record in
        // `tombstones`. Records of version 1 get their kind, outcome and instance from their
        // JSON, which always begins with {"sequence":N, (the direct serializer's order).
        """
        ALTER TABLE records ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN outcome INTEGER;
        UPDATE records SET
          kind = CASE json_extract(CAST(body AS TEXT), '$.kind') WHEN 'action' THEN 1 WHEN 'relaunch' THEN 2 ELSE 0 END,
          outcome = CASE json_extract(CAST(body AS TEXT), '$.outcome')
            WHEN 'transitioned' THEN 0 WHEN 'stayed' THEN 1 WHEN 'ignored' THEN 2 WHEN 'unexpected' THEN 3 END,
          body = CASE
            WHEN substr(CAST(body AS TEXT), 1, length('{"sequence":' || seq || ',')) = '{"sequence":' || seq || ','
              AND json_extract(CAST(body AS TEXT), '$.instance') IS NULL
            THEN CAST('{"sequence":' || seq || ',"instance":' || json_quote(instance)
              || substr(CAST(body AS TEXT), length('{"sequence":' || seq) + 1) AS BLOB)
            ELSE body END;
        CREATE TABLE tombstones (
            seq INTEGER PRIMARY KEY,
            instance TEXT NOT NULL,
            model TEXT NOT NULL,
            deleted_at INTEGER NOT NULL,
            body BLOB NOT NULL
        );
        CREATE INDEX tombstones_by_age ON tombstones(deleted_at);
        """,
        // Version 3: an idempotency key keeps what its write did, not the HTTP response to it.
        // Keys from now on are stored with the scope of whoever sent them (see
        // `IdempotencyKey.unscopedKey`); `meta.unscoped_keys_through` is when the newest key
        // stored without one was made, so they are still found until they expire.
        // `result` 0 created an instance (`instance`, `model`, `instance_created_at` say which;
        // `body` is its JSON), 1 applied an input, 2 applied an unexpected one (`body` is the
        // record's JSON). Version 2 kept the response: 201 with the instance, 200 with the
        // record, 409 with a problem carrying the record; any other status fails the migration.
        """
        ALTER TABLE idempotency RENAME TO idempotency_responses;
        DROP INDEX idempotency_by_age;
        CREATE TABLE idempotency (
            key TEXT PRIMARY KEY,
            fingerprint BLOB NOT NULL,
            result INTEGER NOT NULL,
            instance TEXT,
            model TEXT,
            instance_created_at INTEGER,
            body BLOB NOT NULL,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
          SELECT key, fingerprint,
            CASE status WHEN 201 THEN 0 WHEN 200 THEN 1 WHEN 409 THEN 2 END,
            CASE status WHEN 201 THEN json_extract(CAST(body AS TEXT), '$.id') END,
            CASE status WHEN 201 THEN json_extract(CAST(body AS TEXT), '$.model') END,
            CASE status WHEN 201 THEN
              CAST(round((julianday(json_extract(CAST(body AS TEXT), '$.createdAt')) - 2440587.5) * 86400000) AS INTEGER) END,
            CASE status WHEN 409 THEN CAST(json_extract(CAST(body AS TEXT), '$.record') AS BLOB) ELSE body END,
            created_at
          FROM idempotency_responses;
        DROP TABLE idempotency_responses;
        CREATE INDEX idempotency_by_age ON idempotency(created_at);
        INSERT OR REPLACE INTO meta (key, value)
          SELECT 'unscoped_keys_through', max(created_at) FROM idempotency HAVING count(*) > 0;
        """,
        // Version 4: coverage counters per model (see `CoverageCounts`), added to in the
        // transaction of the records they count. `kind` 0 counts the records that took
        // transition row `name`, 1 the unexpected events recorded in state `name`. They start
        // from the records still kept: those retention dropped and those of deleted instances
        // were never counted, as no version before this one kept them. Only event records
        // (kind 0) take rows or are unexpected: the JSON of the others is not read. One pass
        // in sequence order, each record added to its counter in the small table: a GROUP BY
        // would sort every record first, which took three times as long (about 3 s against 9
        // for 1,000,000 records).
        """
        CREATE TABLE coverage (
            model TEXT NOT NULL,
            kind INTEGER NOT NULL,
            name TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (model, kind, name)
        ) WITHOUT ROWID;
        INSERT INTO coverage (model, kind, name, count)
          SELECT model, kind, name, 1 FROM (
            SELECT instances.model AS model,
              CASE WHEN records.outcome = 3 THEN 1 ELSE 0 END AS kind,
              CASE WHEN records.outcome = 3 THEN json_extract(CAST(records.body AS TEXT), '$.from')
                ELSE json_extract(CAST(records.body AS TEXT), '$.row') END AS name
            FROM records JOIN instances ON instances.id = records.instance
            WHERE records.kind = 0
          )
          WHERE name IS NOT NULL
          ON CONFLICT (model, kind, name) DO UPDATE SET count = count + 1;
        """,
    ]

    /// The database file inside a data folder.
    public static let fileName = "lifecycled.sqlite"

    public let path: String
    public var databaseFile: String? { path }
    public let options: Options
    /// Where the store's notable events go (the service logs them).
    private let report: @Sendable (StoreEvent) -> Void
    /// One process per data folder; also keeps the marker of the last committed sequence.
    private let lock: DataFolderLock
    /// Writes: one transaction at a time, on this connection. It also checkpoints the WAL,
    /// between its transactions (see ``WALBound``).
    /// When the newest idempotency key stored before keys were scoped was made (`nil`: none).
    private let unscopedKeysThrough: Date?
    private let writeLock = NSLock()
    private let writer: Database
    private let statements: WriteStatements
    private var sequence: Int64 = 0
    private var writesSincePurge = 0
    private var walBound: WALBound
    private let checkpointer: BackgroundCheckpointer
    private let pageSize: Int
    private var isClosed = false
    /// Reads of committed data (WAL lets them run beside a write).
    private let readLock = NSLock()
    private let reader: Database
    /// The start-up check of the database, running beside the rest of start-up.
    private let startupCheck: IntegrityCheck
    private let selectHistory: Statement
    private let selectOldestRetained: Statement
    private let selectReplayBounds: Statement

    /// Opens (creating if needed) the store in `directory`, migrating its schema.
    ///
    /// Refuses a folder another process holds, a database that fails `PRAGMA quick_check`,
    /// and one that lost data the lock file's marker says was committed (unless
    /// ``Options/acceptDataLoss``). `report` receives what an operator should see.
    public init(
        directory: String, options: Options = Options(), report: @escaping @Sendable (StoreEvent) -> Void = StoreEvent.writeToStandardError
    ) throws(StoreError) {
        self.options = options
        self.report = report
        walBound = WALBound(maxSize: options.maxWALSize)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError("cannot create data folder \(directory): \(error.localizedDescription)")
        }
        path = directory + "/" + Self.fileName
        let synchronous = options.sync == .full ? "FULL" : "NORMAL"
        lock = try DataFolderLock(directory: directory)
        // Before SQLite sees the file: it would quietly make a new database of a missing or empty one.
        var loss = try Self.lossBeforeOpening(path, lock.marker)
        if let loss, !options.acceptDataLoss { throw Self.refusal(path, loss) }

        do {
            writer = try Database(path: path)
            // Small pages for a new file: each record dirties its instance's last page of the
            // (instance, version) index, so a commit writes about one page per record to the
            // WAL; 1 KiB pages (records are 0.2-0.5 KiB) cut that write volume fourfold and
            // raised durable writes from about 25k to 35k a second (see Benchmarks/RESULTS.md).
            // Ignored for an existing file.
            try writer.execute("PRAGMA page_size = 1024")
            try writer.execute("PRAGMA journal_mode = WAL")
            try writer.execute("PRAGMA synchronous = \(synchronous)")
            // Commits never checkpoint on their own (Database's WAL hook replaces SQLite's
            // automatic checkpoint; `PRAGMA wal_autocheckpoint` would remove the hook): a
            // background thread does, and the committer between two transactions once the
            // WAL passes its threshold (see `restartWALIfDue`).
            // A WAL left larger (by an older lifecycled, or a reader that held it) shrinks back
            // to the bound at the first commit after the WAL starts over.
            try writer.execute("PRAGMA journal_size_limit = \(options.maxWALSize)")
            if let pages = options.maxPageCount { try writer.execute("PRAGMA max_page_count = \(pages)") }
            pageSize = try writer.prepare("PRAGMA page_size").first { Int($0.integer(0)) } ?? 1024
        } catch {
            throw StoreError(error, doing: "cannot open the database \(path)")
        }
        // Runs while the rest of start-up does (opening here, loading instances in the service):
        // ``verifyIntegrity()`` waits for it before anything is served.
        startupCheck = IntegrityCheck(path: path, report: report)
        do {
            try Self.migrate(writer)
            statements = try WriteStatements(writer)
            // The newest record is never dropped by retention, so the largest number in use is the
            // last one assigned, unless a delete took it: deletes leave a floor in `meta`.
            let newest = try writer.prepare("SELECT coalesce(max(seq), 0) FROM records").first { $0.integer(0) } ?? 0
            let floor = try writer.prepare("SELECT value FROM meta WHERE key = 'sequence_floor'").first { $0.integer(0) } ?? 0
            sequence = max(newest, floor)
            unscopedKeysThrough = try writer.prepare("SELECT value FROM meta WHERE key = 'unscoped_keys_through'").first { Self.date($0.integer(0)) }
        } catch {
            throw startupCheck.explaining(StoreError(error, doing: "cannot open the database \(path)"))
        }
        if case .committed(let marked) = lock.marker, sequence < marked {
            loss = loss ?? "the database holds sequence numbers up to \(sequence), but numbers up to \(marked) were committed"
        }
        if let loss {
            guard options.acceptDataLoss else { throw Self.refusal(path, loss) }
            let marked: String = if case .committed(let marked) = lock.marker { String(marked) } else { "none" }
            report(StoreEvent(.warning, "accepted data loss", ["database": path, "loss": loss, "marker": marked, "lastSequence": String(sequence)]))
            if case .committed(let marked) = lock.marker, sequence < marked {
                // Numbers up to the marker were handed out: a client may hold one, so none is
                // reused; and replays after one of them are told that records may be missing.
                let (writer, statements) = (writer, statements)
                try checked("cannot raise the sequence floor") { () throws(SQLiteError) in
                    try writer.transaction { () throws(SQLiteError) in
                        try statements.raiseSequenceFloor.run([.integer(marked)])
                        try statements.raiseDroppedFloor.run([.integer(marked)])
                    }
                }
                sequence = marked
            }
        }
        do {
            reader = try Database(path: path)
            // A client pages with the last sequence number it saw, which belongs to this
            // instance: start the index range right after that record's version instead of
            // walking the instance's history from the beginning.
            selectHistory = try reader.prepare("""
                SELECT seq, body FROM records
                WHERE instance = ?1
                  AND version > coalesce((SELECT version FROM records WHERE seq = ?2 AND instance = ?1), 0)
                  AND seq > ?2
                ORDER BY instance, version LIMIT ?3
                """)
            // Version 0 is the creation record, which is not history.
            selectOldestRetained = try reader.prepare("""
                SELECT version, seq FROM records WHERE instance = ?1 AND version > 0 ORDER BY instance, version LIMIT 1
                """)
            selectReplayBounds = try reader.prepare("""
                SELECT (SELECT coalesce(max(value), 0) FROM meta WHERE key = 'dropped_through'),
                  (SELECT min(seq) FROM records), (SELECT min(seq) FROM tombstones)
                """)
            checkpointer = try BackgroundCheckpointer(path: path, synchronous: synchronous, report: report)
            try purgeExpired()
        } catch {
            throw startupCheck.explaining(StoreError(error, doing: "cannot open the database \(path)"))
        }
        try lock.mark(sequence)
        checkpointer.start()
    }

    deinit {
        // The check's connection reads the file: done before the folder's lock is let go.
        startupCheck.waitUntilDone()
        checkpointer.stop()
    }

    private static func refusal(_ path: String, _ loss: String) -> StoreError {
        StoreError("refusing the database \(path): \(loss)", isDataLoss: true)
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
            // SQLite never leaves a database it made empty: this one was emptied, and
            // without a marker nothing says it was new.
            return "the database is an empty file (0 bytes), and no marker says it was new"
        case .committed, .none:
            return nil
        }
    }

    /// Waits for the start-up integrity check; throws if the database is damaged. Call before
    /// serving anything read from the store.
    public func verifyIntegrity() throws(StoreError) {
        try startupCheck.wait()
    }

    /// The reason to give for a failed start: the start-up check's, if it finds the database
    /// damaged (the likely cause), else `failure`.
    public func reason(for failure: StoreError) -> StoreError {
        startupCheck.explaining(failure)
    }

    /// `PRAGMA quick_check` on its own connection and thread, so that it runs beside the rest
    /// of start-up (migrations, loading every instance): start-up costs the longer of the two
    /// rather than their sum (on 1,000,000 records the check alone takes 0.4 to 0.7 s).
    final class IntegrityCheck: Sendable {
        private let outcome = Mutex<Result<Void, StoreError>?>(nil)
        private let done = DispatchSemaphore(value: 0)

        init(path: String, report: @escaping @Sendable (StoreEvent) -> Void) {
            Thread.detachNewThread { [self] in
                let result = Result { () throws(StoreError) in
                    let database = try checked("cannot open the database \(path) to check it") { () throws(SQLiteError) in
                        try Database(path: path, isReadOnly: true)
                    }
                    try SQLiteStore.quickCheck(database, path: path, report: report)
                }
                outcome.withLock { $0 = result }
                done.signal()
            }
        }

        /// `failure`, unless the check finds the database damaged, which is the better reason.
        func explaining(_ failure: StoreError) -> StoreError {
            do {
                try wait()
                return failure
            } catch {
                return error
            }
        }

        /// Returns once the check is over, whatever it found.
        func waitUntilDone() {
            done.wait()
            done.signal()
        }

        /// The check's verdict, once it is in (every caller gets it).
        func wait() throws(StoreError) {
            waitUntilDone()
            try outcome.withLock { $0! }.get()
        }
    }

    /// Refuses a damaged database: `PRAGMA quick_check` reads every page and checks its
    /// structure (not that indexes match their tables, which needs a full integrity check).
    /// Through a memory map: with 1 KiB pages, reading page by page costs more in system
    /// calls than the check itself (0.8 s against 0.4 s for 1,000,000 records).
    fileprivate static func quickCheck(_ database: Database, path: String, report: (StoreEvent) -> Void) throws(StoreError) {
        let started = ContinuousClock.now
        var problems: [String] = []
        var bytes: Int64 = 0
        do {
            bytes = try database.prepare("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size").first { $0.integer(0) } ?? 0
            try database.execute("PRAGMA mmap_size = \(bytes)")
            try database.prepare("PRAGMA quick_check(5)").forEachRow { row in problems.append(row.text(0) ?? "NULL") }
            try database.execute("PRAGMA mmap_size = 0")
        } catch {
            problems = [error.message]
        }
        guard problems == ["ok"] else {
            throw StoreError(
                "the database \(path) is damaged (PRAGMA quick_check: \(problems.joined(separator: "; "))); "
                    + "restore it from a backup; moved aside instead, its data counts as lost"
            )
        }
        let millis = Int((ContinuousClock.now - started) / .milliseconds(1))
        report(StoreEvent(.info, "database checked", ["database": path, "bytes": String(bytes), "quickCheckMillis": String(millis)]))
    }

    /// Drops idempotency keys and deletion records older than their lifetimes (on the write
    /// connection), raising the floor that tells replays records were dropped.
    private func purgeExpired() throws(SQLiteError) {
        let now = Date()
        try statements.purgeKeys.run([.integer(Self.milliseconds(now.addingTimeInterval(-options.idempotencyLifetime)))])
        let statements = statements
        try writer.transaction { () throws(SQLiteError) in
            var purgedThrough: Int64 = 0
            try statements.purgeTombstones.forEachRow([.integer(Self.milliseconds(now.addingTimeInterval(-options.tombstoneLifetime)))]) { row in
                purgedThrough = max(purgedThrough, row.integer(0))
            }
            if purgedThrough > 0 { try statements.raiseDroppedFloor.run([.integer(purgedThrough)]) }
        }
    }

    /// Ends writing with a checkpoint that empties the WAL, and lets the data folder go.
    /// Call when done with the store, after the last write; later writes are refused.
    public func close() {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !isClosed else { return }
        isClosed = true
        // Its connection reads the file: done before the folder's lock is let go.
        startupCheck.waitUntilDone()
        checkpointer.stop()
        do {
            if try checkpointer.excludingRounds(waiting: true, { () throws(SQLiteError) in try writer.checkpoint(.truncate) }) == false {
                report(StoreEvent(.warning, "WAL not emptied at stop: a reader still uses it", ["database": path]))
            }
        } catch {
            report(StoreEvent(.error, "WAL checkpoint at stop failed", ["database": path, "error": error.message]))
        }
        lock.release()
    }

    /// Brings the schema up to the newest version, one transaction per migration.
    static func migrate(_ database: Database) throws(SQLiteError) {
        let current = try database.prepare("PRAGMA user_version").first { Int($0.integer(0)) } ?? 0
        guard current <= migrations.count else {
            throw SQLiteError(code: SQLITE_ERROR, message: "schema version \(current) is newer than this lifecycled knows (\(migrations.count))")
        }
        for version in current..<migrations.count {
            try database.transaction { () throws(SQLiteError) in
                try database.execute(migrations[version])
                try database.execute("PRAGMA user_version = \(version + 1)")
            }
        }
    }

    /// The schema version the database is at.
    public func schemaVersion() throws(StoreError) -> Int {
        try read("cannot read the schema version") { () throws(SQLiteError) in
            try reader.prepare("PRAGMA user_version").first { Int($0.integer(0)) } ?? 0
        }
    }

    public var lastSequence: Int64 { writeLock.withLock { sequence } }

    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { () throws(SQLiteError) in
            var instances: [StoredInstance] = []
            try reader.prepare("SELECT \(Self.instanceColumns) FROM instances").forEachRow { (row) throws(SQLiteError) in
                instances.append(try Self.instance(row))
            }
            return instances
        }
    }

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { () throws(SQLiteError) in
            let select = try reader.prepare("SELECT \(Self.instanceColumns) FROM instances WHERE id = ?1")
            var instances: [StoredInstance] = []
            for id in ids {
                if let instance = try select.first([.text(id)], { (row) throws(SQLiteError) in try Self.instance(row) }) { instances.append(instance) }
            }
            return instances
        }
    }

    public func latestSequence() throws(StoreError) -> Int64 { lastSequence }

    /// Only this process writes the file (the data folder's lock sees to it): nothing to observe.
    public func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void) {}

    /// The columns ``instance(_:)`` reads, in its order.
    static let instanceColumns = """
        id, model, state, version, launch_count, buffered_action, window, breadcrumb_step,
        scene_connected, unexpected, ignored, incomplete_launches, created_at, updated_at
        """

    /// An instance from a row of ``instanceColumns``.
    static func instance(_ row: Row) throws(SQLiteError) -> StoredInstance {
        let id = try row.text(0, named: "instances.id")
        var action: PendingAction?
        if let json = row.text(5) {
            do {
                action = try JSONDecoder().decode(PendingAction.self, from: Data(json.utf8))
            } catch {
                throw SQLiteError(code: SQLITE_CORRUPT, message: "the buffered action of instance \(id) does not decode (\(error)): \(json)")
            }
        }
        let state = InstanceState(
            state: try row.text(2, named: "instances.state of \(id)"), version: row.integer(3), launchCount: row.integer(4),
            bufferedAction: action, window: row.text(6), breadcrumb: Breadcrumb(step: row.text(7), isSceneConnected: row.integer(8) != 0),
            counters: Counters(unexpected: row.integer(9), ignored: row.integer(10), incompleteLaunches: row.integer(11))
        )
        return StoredInstance(
            id: id, model: try row.text(1, named: "instances.model of \(id)"), createdAt: date(row.integer(12)),
            updatedAt: date(row.integer(13)), state: state
        )
    }

    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard !isClosed else { throw StoreError("the store is closed; nothing was changed") }
        try restartWALIfDue()
        let transaction = Transaction(store: self, sequence: sequence)
        do {
            try writer.execute("BEGIN IMMEDIATE")
        } catch {
            throw StoreError(error, doing: "cannot begin a transaction")
        }
        let result: T
        do {
            result = try body(transaction)
            try transaction.finish()
            try checked("cannot commit") { () throws(SQLiteError) in try writer.execute("COMMIT") }
        } catch {
            do {
                try writer.rollBack()
            } catch let failure {
                throw StoreError("\(error.message); the rollback after it failed too: \(failure.message)", isDiskFull: error.isDiskFull)
            }
            throw error
        }
        committed(transaction.sequence)
        return result
    }

    /// After a commit: the marker follows the sequence, and expired keys go now and then.
    /// Neither may fail the write, which is committed; a failure is reported.
    private func committed(_ newSequence: Int64) {
        if newSequence != sequence {
            sequence = newSequence
            // After the commit, never before: the marker must not pass what the database
            // holds. Without fsync it still cannot pass it after a crash of the process (both
            // are in the page cache, in this order), nor after a power loss with sync=full
            // (the commit's fsync returned before this write began); with sync=normal a power
            // loss can lose the commit and keep the marker, which start-up then reports.
            do {
                try lock.mark(sequence)
            } catch {
                report(StoreEvent(.error, "cannot update the sequence marker", ["sequence": String(sequence), "error": error.message]))
            }
        }
        writesSincePurge += 1
        if writesSincePurge >= 1000 {
            writesSincePurge = 0
            do {
                try purgeExpired()
            } catch {
                report(StoreEvent(.warning, "cannot purge expired idempotency keys and deletion records", ["database": path, "error": error.message]))
            }
        }
    }

    /// The WAL's size from its frame count: header, then each frame's header and page.
    private var walBytes: Int { writer.walFrames == 0 ? 0 : 32 + writer.walFrames * (24 + pageSize) }

    /// Checkpoints, between two transactions, once the WAL has passed its threshold, so the
    /// next commit starts the WAL over. RESTART waits for readers still using the WAL (history
    /// reads take milliseconds); no other writer exists to wait for.
    private func restartWALIfDue() throws(StoreError) {
        let bytes = walBytes
        let due = walBound.due(walBytes: bytes)
        guard due != .no else { return }
        let finished: Bool?
        do {
            finished = try checkpointer.excludingRounds(waiting: due == .now) { () throws(SQLiteError) in try writer.checkpoint(.restart) }
        } catch {
            report(StoreEvent(.error, "WAL checkpoint failed", ["database": path, "walBytes": String(bytes), "error": error.message]))
            walBound.checkpointed(finished: false, walBytes: bytes)
            // A damaged file fails the write; anything else lets it go on into the WAL.
            if error.primaryCode == SQLITE_CORRUPT || error.primaryCode == SQLITE_NOTADB {
                throw StoreError(error, doing: "cannot checkpoint the WAL")
            }
            return
        }
        guard let finished else { return }  // a background round is running: at a later transaction
        if !finished {
            report(StoreEvent(.warning, "WAL checkpoint could not finish: a reader still uses the WAL", ["database": path, "walBytes": String(bytes)]))
        }
        walBound.checkpointed(finished: finished, walBytes: bytes)
    }

    public func history(instanceID: String, after: Int64, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { () throws(SQLiteError) in
            var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
            var fill = PageFill(limit)
            // One snapshot for both reads, so the page and its oldest record agree.
            try reader.transaction("BEGIN") { () throws(SQLiteError) in
                // One row more than the page holds says whether more follow; rows turned away are not read.
                try selectHistory.forEachRow([.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1)]) { row in
                    guard fill.admits(size: row.byteCount(1)) else { return }
                    page.records.append(row.blob(1))
                    page.lastSequence = row.integer(0)
                }
                page.hasMore = fill.turnedAway
                if let oldest = try selectOldestRetained.first([.text(instanceID)], { (version: $0.integer(0), sequence: $0.integer(1)) }) {
                    page.oldestRetainedVersion = oldest.version
                    page.oldestRetainedSequence = oldest.sequence
                }
            }
            return page
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { () throws(SQLiteError) in
            var counts = CoverageCounts()
            try reader.prepare("SELECT model, kind, name, count FROM coverage").forEachRow { (row) throws(SQLiteError) in
                guard let kind = CoverageCounts.Kind(rawValue: row.integer(1)) else {
                    throw SQLiteError(code: SQLITE_CORRUPT, message: "a coverage counter has kind \(row.integer(1)), which no lifecycled writes")
                }
                let key = CoverageCounts.Key(
                    model: try row.text(0, named: "coverage.model"), kind: kind, name: try row.text(2, named: "coverage.name")
                )
                counts.add(row.integer(3), to: key)
            }
            return counts
        }
    }

    /// Rows a replay page may examine when no instance filter narrows it: a page of records
    /// matching a rare filter costs a bounded scan, and the replay goes on from where it stopped.
    static let replayScanRows: Int64 = 8192

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        // Without an instance filter the scan is a range of rowids: bound it. With one, the
        // (instance, version) index finds the instances' records, however far apart.
        let upper = filter.instances == nil ? min(through, after + Self.replayScanRows) : through
        var bindings: [Statement.Binding] = [.integer(after), .integer(upper), .integer(Int64(limit.records))]
        var recordConditions = ""
        var tombstoneConditions = ""
        if let instances = filter.instances {
            let parameters = instances.sorted().map { id -> String in
                bindings.append(.text(id))
                return "?\(bindings.count)"
            }.joined(separator: ", ")
            recordConditions += " AND instance IN (\(parameters))"
            tombstoneConditions += " AND instance IN (\(parameters))"
        }
        if let model = filter.model {
            bindings.append(.text(model))
            recordConditions += " AND (SELECT model FROM instances WHERE id = records.instance) = ?\(bindings.count)"
            tombstoneConditions += " AND model = ?\(bindings.count)"
        }
        var sql = """
            SELECT seq, kind, body, instance, outcome, (SELECT model FROM instances WHERE id = records.instance)
            FROM records WHERE seq > ?1 AND seq <= ?2\(recordConditions)
            """
        if let outcomes = filter.outcomes {
            // Codes, not client text: safe to write into the statement.
            sql += " AND outcome IN (\(outcomes.map { String($0.storedCode) }.sorted().joined(separator: ", ")))"
        } else {
            sql += " UNION ALL SELECT seq, \(RecordKind.deleted.rawValue), body, instance, NULL, model FROM tombstones WHERE seq > ?1 AND seq <= ?2\(tombstoneConditions)"
        }
        sql += " ORDER BY 1 LIMIT ?3"
        return try read("cannot replay records after \(after)") { () throws(SQLiteError) in
            let select = try reader.prepare(sql)
            var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
            var fill = PageFill(limit)
            // One snapshot for the page and its bounds, so they agree.
            try reader.transaction("BEGIN") { () throws(SQLiteError) in
                try select.forEachRow(bindings) { (row) throws(SQLiteError) in
                    guard fill.admits(size: row.byteCount(2)) else { return }
                    let sequence = row.integer(0)
                    guard let kind = RecordKind(rawValue: row.integer(1)) else {
                        throw SQLiteError(code: SQLITE_CORRUPT, message: "record \(sequence) has kind \(row.integer(1)), which no lifecycled writes")
                    }
                    var outcome: Outcome?
                    if !row.isNull(4) {
                        guard let stored = Outcome(storedCode: row.integer(4)) else {
                            throw SQLiteError(code: SQLITE_CORRUPT, message: "record \(sequence) has outcome \(row.integer(4)), which no lifecycled writes")
                        }
                        outcome = stored
                    }
                    page.records.append(ReplayedRecord(
                        sequence: sequence, kind: kind, instance: try row.text(3, named: "records.instance of \(sequence)"),
                        model: try row.text(5, named: "the model of record \(sequence)"), outcome: outcome, json: row.blob(2)
                    ))
                }
                try selectReplayBounds.first { row in
                    page.droppedThrough = row.integer(0)
                    page.oldestKept = [1, 2].compactMap { row.isNull($0) ? nil : row.integer($0) }.min()
                }
            }
            if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
            return page
        }
    }

    /// Runs `PRAGMA integrity_check`; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read("cannot check integrity") { () throws(SQLiteError) in
            var lines: [String] = []
            try reader.prepare("PRAGMA integrity_check").forEachRow { row in lines.append(row.text(0) ?? "NULL") }
            return lines.joined(separator: "\n")
        }
    }

    /// One write transaction's view of the store; valid only inside ``write(_:)``.
    private final class Transaction: StoreTransaction {
        let store: SQLiteStore
        /// The last sequence number assigned in this transaction.
        var sequence: Int64
        /// The largest sequence number the history limit dropped in this transaction.
        var droppedThrough: Int64 = 0

        let startSequence: Int64

        init(store: SQLiteStore, sequence: Int64) {
            self.store = store
            self.sequence = sequence
            startSequence = sequence
        }


        func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
            try checked("cannot read instances") { () throws(SQLiteError) in
                var found: [StoredInstance] = []
                for id in ids {
                    if let instance = try statements.selectInstance.first([.text(id)], { (row) throws(SQLiteError) in try SQLiteStore.instance(row) }) {
                        found.append(instance)
                    }
                }
                return found
            }
        }

        func instanceCount() throws(StoreError) -> Int {
            try checked("cannot count instances") { () throws(SQLiteError) in
                try statements.countInstances.first { Int($0.integer(0)) } ?? 0
            }
        }

        var statements: WriteStatements { store.statements }

        func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
            let numbered = sequence + 1
            try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in
                try statements.insertInstance.run(SQLiteStore.bindings(instance))
                try statements.insertRecord.run([
                    .integer(numbered), .text(instance.id), .integer(0), .integer(RecordKind.created.rawValue), .null, .blob(encode(numbered)),
                ])
            }
            sequence = numbered
            return numbered
        }

        func update(_ instance: StoredInstance) throws(StoreError) {
            try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in
                try statements.updateInstance.run(SQLiteStore.bindings(instance))
            }
        }

        func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
            let numbered = sequence + 1
            try checked("cannot delete instance \(instance.id)") { () throws(SQLiteError) in
                try statements.deleteInstance.run([.text(instance.id)])
                try statements.deleteRecords.run([.text(instance.id)])
                try statements.insertTombstone.run([
                    .integer(numbered), .text(instance.id), .text(instance.model), .integer(SQLiteStore.milliseconds(time)), .blob(encode(numbered)),
                ])
                // The deletion record expires: keep its number, the largest, from reuse.
                try statements.raiseSequenceFloor.run([.integer(numbered)])
            }
            sequence = numbered
            return numbered
        }

        func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord {
            var numbered = record
            numbered.sequence = sequence + 1
            numbered.instance = instanceID
            let encoded = EncodedRecord(sequence: numbered.sequence, recordJSON: encode(numbered))
            let limit = Int64(store.options.historyLimit)
            try checked("cannot store a record of \(instanceID)") { () throws(SQLiteError) in
                try statements.insertRecord.run([
                    .integer(numbered.sequence), .text(instanceID), .integer(record.version), .integer(RecordKind(record.kind).rawValue),
                    .integer(record.outcome.storedCode), .blob(encoded.recordJSON),
                ])
                if record.version > limit {
                    try statements.dropOldRecords.forEachRow([.text(instanceID), .integer(record.version - limit)]) { row in
                        droppedThrough = max(droppedThrough, row.integer(0))
                    }
                }
            }
            sequence = numbered.sequence
            return encoded
        }

        /// Before the commit: the floor of dropped records follows what this transaction dropped
        /// (in `meta`, written once per transaction rather than once per dropped record).
        func finish() throws(StoreError) {
            guard droppedThrough > 0 else { return }
            try checked("cannot raise the floor of dropped records") { () throws(SQLiteError) in
                try statements.raiseDroppedFloor.run([.integer(droppedThrough)])
            }
        }

        func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError) {
            let result: [Statement.Binding] = switch write {
            case .created(let id, let model, let createdAt, let json):
                [.integer(0), .text(id), .text(model), .integer(SQLiteStore.milliseconds(createdAt)), .blob(json)]
            case .applied(let json, let isUnexpected):
                [.integer(isUnexpected ? 2 : 1), .null, .null, .null, .blob(json)]
            }
            try checked("cannot store an idempotency key") { () throws(SQLiteError) in
                try statements.insertKey.run([.text(key.key), .blob(key.fingerprint)] + result + [.integer(SQLiteStore.milliseconds(Date()))])
            }
        }

        func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
            func find(_ stored: String) throws(StoreError) -> (fingerprint: [UInt8], created: Int64, write: RememberedWrite)? {
                try checked("cannot read an idempotency key") { () throws(SQLiteError) in
                    try statements.selectKey.first([.text(stored)]) { (row) throws(SQLiteError) in
                        (fingerprint: row.blob(0), created: row.integer(6), write: try Self.remembered(row, key: stored))
                    }
                }
            }
            var found = try find(key.key)
            // A key sent before keys were scoped is found as it was stored, until it expires.
            if found == nil, let unscoped = key.unscopedKey, let through = store.unscopedKeysThrough,
               through.addingTimeInterval(store.options.idempotencyLifetime) > now {
                found = try find(unscoped)
            }
            guard let found, SQLiteStore.date(found.created).addingTimeInterval(store.options.idempotencyLifetime) > now else { return .unused }
            return found.fingerprint == key.fingerprint ? .replay(found.write) : .conflict
        }

        func addCoverage(_ counts: CoverageCounts) throws(StoreError) {
            try checked("cannot count coverage") { () throws(SQLiteError) in
                for (key, count) in counts.counts {
                    try statements.addCoverage.run([.text(key.model), .integer(key.kind.rawValue), .text(key.name), .integer(count)])
                }
            }
        }

        /// Columns 1 to 5 of a key's row (see the schema's version 3).
        private static func remembered(_ row: Row, key: String) throws(SQLiteError) -> RememberedWrite {
            switch row.integer(1) {
            case 0:
                guard !row.isNull(4) else {
                    throw SQLiteError(code: SQLITE_CORRUPT, message: "idempotency.instance_created_at of key \(key) is NULL for a created instance: the database is damaged")
                }
                return .created(
                    id: try row.text(2, named: "idempotency.instance of key \(key)"), model: try row.text(3, named: "idempotency.model of key \(key)"),
                    createdAt: SQLiteStore.date(row.integer(4)), json: row.blob(5)
                )
            case 1, 2:
                return .applied(recordJSON: row.blob(5), isUnexpected: row.integer(1) == 2)
            case let result:
                throw SQLiteError(code: SQLITE_CORRUPT, message: "idempotency key \(key) has result \(result), which no lifecycled writes")
            }
        }
    }

    /// The write connection's prepared statements, made once.
    private struct WriteStatements {
        let insertInstance: Statement
        let updateInstance: Statement
        let deleteInstance: Statement
        let deleteRecords: Statement
        let insertRecord: Statement
        let dropOldRecords: Statement
        let insertKey: Statement
        let selectKey: Statement
        let purgeKeys: Statement
        let raiseSequenceFloor: Statement
        let insertTombstone: Statement
        let purgeTombstones: Statement
        let raiseDroppedFloor: Statement
        let addCoverage: Statement
        let selectInstance: Statement
        let countInstances: Statement

        init(_ database: Database) throws(SQLiteError) {
            selectInstance = try database.prepare("SELECT \(SQLiteStore.instanceColumns) FROM instances WHERE id = ?1")
            countInstances = try database.prepare("SELECT count(*) FROM instances")
            insertInstance = try database.prepare("""
                INSERT INTO instances (id, model, state, version, launch_count, buffered_action, window, breadcrumb_step,
                  scene_connected, unexpected, ignored, incomplete_launches, created_at, updated_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                """)
            updateInstance = try database.prepare("""
                UPDATE instances SET model = ?2, state = ?3, version = ?4, launch_count = ?5, buffered_action = ?6, window = ?7,
                  breadcrumb_step = ?8, scene_connected = ?9, unexpected = ?10, ignored = ?11, incomplete_launches = ?12,
                  created_at = ?13, updated_at = ?14
                WHERE id = ?1
                """)
            deleteInstance = try database.prepare("DELETE FROM instances WHERE id = ?1")
            deleteRecords = try database.prepare("DELETE FROM records WHERE instance = ?1")
            insertRecord = try database.prepare("INSERT INTO records (seq, instance, version, kind, outcome, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            dropOldRecords = try database.prepare("DELETE FROM records WHERE instance = ?1 AND version <= ?2 RETURNING seq")
            insertKey = try database.prepare("""
                INSERT OR REPLACE INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """)
            selectKey = try database.prepare("""
                SELECT fingerprint, result, instance, model, instance_created_at, body, created_at FROM idempotency WHERE key = ?1
                """)
            purgeKeys = try database.prepare("DELETE FROM idempotency WHERE created_at < ?1")
            raiseSequenceFloor = try database.prepare("""
                INSERT INTO meta (key, value) VALUES ('sequence_floor', ?1)
                ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)
                """)
            insertTombstone = try database.prepare("INSERT INTO tombstones (seq, instance, model, deleted_at, body) VALUES (?1, ?2, ?3, ?4, ?5)")
            purgeTombstones = try database.prepare("DELETE FROM tombstones WHERE deleted_at < ?1 RETURNING seq")
            raiseDroppedFloor = try database.prepare("""
                INSERT INTO meta (key, value) VALUES ('dropped_through', ?1)
                ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)
                """)
            addCoverage = try database.prepare("""
                INSERT INTO coverage (model, kind, name, count) VALUES (?1, ?2, ?3, ?4)
                ON CONFLICT (model, kind, name) DO UPDATE SET count = count + excluded.count
                """)
        }
    }

    private func read<T>(_ what: String, _ body: () throws(SQLiteError) -> T) throws(StoreError) -> T {
        readLock.lock()
        defer { readLock.unlock() }
        return try checked(what, body)
    }

    fileprivate static func bindings(_ instance: StoredInstance) throws(SQLiteError) -> [Statement.Binding] {
        let s = instance.state
        var action = Statement.Binding.null
        if let pending = s.bufferedAction {
            do {
                action = .text(String(decoding: try JSONEncoder().encode(pending), as: UTF8.self))
            } catch {
                throw SQLiteError(code: SQLITE_MISUSE, message: "the buffered action of instance \(instance.id) does not encode: \(error)")
            }
        }
        return [
            .text(instance.id), .text(instance.model), .text(s.state), .integer(s.version), .integer(s.launchCount), action,
            s.window.map { .text($0) } ?? .null, s.breadcrumb.step.map { .text($0) } ?? .null,
            .integer(s.breadcrumb.isSceneConnected ? 1 : 0), .integer(s.counters.unexpected), .integer(s.counters.ignored),
            .integer(s.counters.incompleteLaunches), .integer(milliseconds(instance.createdAt)), .integer(milliseconds(instance.updatedAt)),
        ]
    }

    /// Times are kept in whole milliseconds; the service rounds its clock the same way.
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

/// Runs SQLite work, turning its error into a ``StoreError`` that says what was being done.
private func checked<T>(_ what: String, _ body: () throws(SQLiteError) -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError(error, doing: what)
    }
}

extension Outcome {
    /// The outcome an `outcome` column's code stands for; `nil` for a code no lifecycled writes.
    init?(storedCode: Int64) {
        guard let outcome = Outcome.allCases.first(where: { $0.storedCode == storedCode }) else { return nil }
        self = outcome
    }

    /// How the `outcome` column keeps it (the schema's migration 2 writes the same codes).
    var storedCode: Int64 {
        switch self {
        case .transitioned: 0
        case .stayed: 1
        case .ignored: 2
        case .unexpected: 3
        }
    }
}
