import CSQLite
import Foundation
import LifecycleKit

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
        /// Caps the database size in pages (SQLite's max_page_count); a full cap acts as a full disk.
        public var maxPageCount: Int?

        public init(sync: SyncMode = .normal, historyLimit: Int = 10_000, idempotencyLifetime: TimeInterval = 24 * 3600, maxPageCount: Int? = nil) {
            self.sync = sync
            self.historyLimit = max(1, historyLimit)
            self.idempotencyLifetime = idempotencyLifetime
            self.maxPageCount = maxPageCount
        }
    }

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
    ]

    /// The database file inside a data folder.
    public static let fileName = "lifecycled.sqlite"

    public let path: String
    public let options: Options
    /// Writes: one transaction at a time, on this connection.
    private let writeLock = NSLock()
    private let writer: Database
    private let statements: WriteStatements
    private var sequence: Int64 = 0
    private var writesSincePurge = 0
    /// Copies the WAL back into the database file off the write path (see `checkpointLoop`).
    private let checkpointer: Database
    private let checkpointSignal = NSCondition()
    private var isClosed = false
    /// Reads of committed data (WAL lets them run beside a write).
    private let readLock = NSLock()
    private let reader: Database
    private let selectHistory: Statement
    private let selectOldestVersion: Statement

    /// Opens (creating if needed) the store in `directory`, migrating its schema.
    public init(directory: String, options: Options = Options()) throws(StoreError) {
        self.options = options
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError("cannot create data folder \(directory): \(error.localizedDescription)")
        }
        path = directory + "/" + Self.fileName
        do {
            writer = try Database(path: path)
            // Small pages for a new file: each record dirties its instance's last page of the
            // (instance, version) index, so a commit writes about one page per record to the
            // WAL; 1 KiB pages (records are 0.2-0.5 KiB) cut that write volume fourfold and
            // raised durable writes from about 25k to 35k a second (see Benchmarks/RESULTS.md).
            // Ignored for an existing file.
            try writer.execute("PRAGMA page_size = 1024")
            try writer.execute("PRAGMA journal_mode = WAL")
            let synchronous = "PRAGMA synchronous = \(options.sync == .full ? "FULL" : "NORMAL")"
            try writer.execute(synchronous)
            // Commits never checkpoint: that work (and its fsyncs) would stall the one
            // writer. The checkpointer thread does it instead.
            try writer.execute("PRAGMA wal_autocheckpoint = 0")
            if let pages = options.maxPageCount { try writer.execute("PRAGMA max_page_count = \(pages)") }
            try Self.migrate(writer)
            statements = try WriteStatements(writer)
            // The newest record is never dropped by retention, so the largest number in use is the
            // last one assigned, unless a delete took it: deletes leave a floor in `meta`.
            let newest = try writer.prepare("SELECT coalesce(max(seq), 0) FROM records").first { $0.integer(0) } ?? 0
            let floor = try writer.prepare("SELECT value FROM meta WHERE key = 'sequence_floor'").first { $0.integer(0) } ?? 0
            sequence = max(newest, floor)

            reader = try Database(path: path)
            checkpointer = try Database(path: path)
            try checkpointer.execute(synchronous)
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
            selectOldestVersion = try reader.prepare("SELECT min(version) FROM records WHERE instance = ?1")
            try purgeExpiredKeys()
        } catch {
            throw StoreError(error, doing: "cannot open the database \(path)")
        }
        // The thread holds the store only for one round at a time, so dropping the store ends it.
        let thread = Thread { [weak self] in
            while let store = self, store.checkpointRound() {}
        }
        thread.name = "lifecycled-checkpoint"
        thread.start()
    }

    /// Drops idempotency keys older than their lifetime (on the write connection).
    private func purgeExpiredKeys() throws(SQLiteError) {
        try statements.purgeKeys.run([.integer(Self.milliseconds(Date().addingTimeInterval(-options.idempotencyLifetime)))])
    }

    /// Checkpoints the WAL, then waits a little; `false` once the store is closed.
    /// PASSIVE never waits for the writer or readers, so it cannot slow a commit; what it
    /// cannot copy now it copies next round.
    private func checkpointRound() -> Bool {
        checkpointSignal.lock()
        defer { checkpointSignal.unlock() }
        guard !isClosed else { return false }
        try? checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _ = checkpointSignal.wait(until: Date().addingTimeInterval(0.2))
        return !isClosed
    }

    /// Ends checkpointing with a full checkpoint that empties the WAL. Call when done with
    /// the store, after the last write.
    public func close() {
        checkpointSignal.lock()
        defer { checkpointSignal.unlock() }
        guard !isClosed else { return }
        isClosed = true
        checkpointSignal.signal()
        try? checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
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

    /// The schema version of the open database.
    public var schemaVersion: Int {
        (try? read("cannot read the schema version") { () throws(SQLiteError) in
            try reader.prepare("PRAGMA user_version").first { Int($0.integer(0)) } ?? 0
        }) ?? 0
    }

    public var lastSequence: Int64 { writeLock.withLock { sequence } }

    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { () throws(SQLiteError) in
            var instances: [StoredInstance] = []
            let select = try reader.prepare("""
                SELECT id, model, state, version, launch_count, buffered_action, window, breadcrumb_step,
                  scene_connected, unexpected, ignored, incomplete_launches, created_at, updated_at
                FROM instances
                """)
            let decoder = JSONDecoder()
            try select.forEachRow { row in
                let action = row.text(5).flatMap { try? decoder.decode(PendingAction.self, from: Data($0.utf8)) }
                let state = InstanceState(
                    state: row.text(2) ?? "", version: row.integer(3), launchCount: row.integer(4), bufferedAction: action,
                    window: row.text(6), breadcrumb: Breadcrumb(step: row.text(7), isSceneConnected: row.integer(8) != 0),
                    counters: Counters(unexpected: row.integer(9), ignored: row.integer(10), incompleteLaunches: row.integer(11))
                )
                instances.append(StoredInstance(
                    id: row.text(0) ?? "", model: row.text(1) ?? "", createdAt: Self.date(row.integer(12)),
                    updatedAt: Self.date(row.integer(13)), state: state
                ))
            }
            return instances
        }
    }

    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        writeLock.lock()
        defer { writeLock.unlock() }
        let transaction = Transaction(store: self, sequence: sequence)
        do {
            try writer.execute("BEGIN IMMEDIATE")
        } catch {
            throw StoreError(error, doing: "cannot begin a transaction")
        }
        do {
            let result = try body(transaction)
            try checked("cannot commit") { () throws(SQLiteError) in try writer.execute("COMMIT") }
            sequence = transaction.sequence
            writesSincePurge += 1
            if writesSincePurge >= 1000 {
                writesSincePurge = 0
                try? purgeExpiredKeys()
            }
            return result
        } catch {
            try? writer.execute("ROLLBACK")
            throw error
        }
    }

    public func history(instanceID: String, after: Int64, limit: Int) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { () throws(SQLiteError) in
            var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil)
            // One snapshot for both reads, so the page and its oldest version agree.
            try reader.execute("BEGIN")
            defer { try? reader.execute("COMMIT") }
            try selectHistory.forEachRow([.text(instanceID), .integer(after), .integer(Int64(limit) + 1)]) { row in
                guard page.records.count < limit else {
                    page.hasMore = true
                    return
                }
                page.records.append(row.blob(1))
                page.lastSequence = row.integer(0)
            }
            page.oldestRetainedVersion = try selectOldestVersion.first([.text(instanceID)]) { $0.isNull(0) ? nil : $0.integer(0) } ?? nil
            return page
        }
    }

    /// Runs `PRAGMA integrity_check`; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read("cannot check integrity") { () throws(SQLiteError) in
            try reader.prepare("PRAGMA integrity_check").first { $0.text(0) ?? "" } ?? ""
        }
    }

    /// One write transaction's view of the store; valid only inside ``write(_:)``.
    private final class Transaction: StoreTransaction {
        let store: SQLiteStore
        /// The last sequence number assigned in this transaction.
        var sequence: Int64

        init(store: SQLiteStore, sequence: Int64) {
            self.store = store
            self.sequence = sequence
        }

        var statements: WriteStatements { store.statements }

        func insert(_ instance: StoredInstance) throws(StoreError) {
            try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in
                try statements.insertInstance.run(SQLiteStore.bindings(instance))
            }
        }

        func update(_ instance: StoredInstance) throws(StoreError) {
            try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in
                try statements.updateInstance.run(SQLiteStore.bindings(instance))
            }
        }

        func delete(instanceID: String) throws(StoreError) {
            try checked("cannot delete instance \(instanceID)") { () throws(SQLiteError) in
                try statements.deleteInstance.run([.text(instanceID)])
                try statements.deleteRecords.run([.text(instanceID)])
                // Its records may have held the largest sequence numbers: keep them from reuse.
                try statements.raiseSequenceFloor.run([.integer(sequence)])
            }
        }

        func append(_ record: Record, instanceID: String, encode: (Record) -> EncodedRecord) throws(StoreError) -> EncodedRecord {
            var numbered = record
            numbered.sequence = sequence + 1
            let encoded = encode(numbered)
            let limit = Int64(store.options.historyLimit)
            try checked("cannot store a record of \(instanceID)") { () throws(SQLiteError) in
                try statements.insertRecord.run([.integer(numbered.sequence), .text(instanceID), .integer(record.version), .blob(encoded.recordJSON)])
                if record.version > limit {
                    try statements.dropOldRecords.run([.text(instanceID), .integer(record.version - limit)])
                }
            }
            sequence = numbered.sequence
            return encoded
        }

        func remember(_ key: IdempotencyKey, _ response: StoredResponse) throws(StoreError) {
            try checked("cannot store an idempotency key") { () throws(SQLiteError) in
                try statements.insertKey.run([
                    .text(key.key), .blob(key.fingerprint), .integer(Int64(response.status)), .text(response.contentType),
                    .blob(response.body), .integer(SQLiteStore.milliseconds(Date())),
                ])
            }
        }

        func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
            let found = try checked("cannot read an idempotency key") { () throws(SQLiteError) in
                try statements.selectKey.first([.text(key.key)]) { row in
                    (fingerprint: row.blob(0), response: StoredResponse(status: Int(row.integer(1)), contentType: row.text(2) ?? "", body: row.blob(3)), created: row.integer(4))
                }
            }
            guard let found, SQLiteStore.date(found.created).addingTimeInterval(store.options.idempotencyLifetime) > now else { return .unused }
            return found.fingerprint == key.fingerprint ? .replay(found.response) : .conflict
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

        init(_ database: Database) throws(SQLiteError) {
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
            insertRecord = try database.prepare("INSERT INTO records (seq, instance, version, body) VALUES (?1, ?2, ?3, ?4)")
            dropOldRecords = try database.prepare("DELETE FROM records WHERE instance = ?1 AND version <= ?2")
            insertKey = try database.prepare("""
                INSERT OR REPLACE INTO idempotency (key, fingerprint, status, content_type, body, created_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                """)
            selectKey = try database.prepare("SELECT fingerprint, status, content_type, body, created_at FROM idempotency WHERE key = ?1")
            purgeKeys = try database.prepare("DELETE FROM idempotency WHERE created_at < ?1")
            raiseSequenceFloor = try database.prepare("""
                INSERT INTO meta (key, value) VALUES ('sequence_floor', ?1)
                ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)
                """)
        }
    }

    private func read<T>(_ what: String, _ body: () throws(SQLiteError) -> T) throws(StoreError) -> T {
        readLock.lock()
        defer { readLock.unlock() }
        return try checked(what, body)
    }

    fileprivate static func bindings(_ instance: StoredInstance) -> [Statement.Binding] {
        let s = instance.state
        let action: Statement.Binding = s.bufferedAction.flatMap { try? JSONEncoder().encode($0) }.map { .text(String(decoding: $0, as: UTF8.self)) } ?? .null
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
