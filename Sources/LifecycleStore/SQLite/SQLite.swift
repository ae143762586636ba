import CLifecycleSQLite
import CLifecycleSQLiteVFS
import Foundation

/// A failed SQLite call: its result code and the connection's message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    /// The primary result code (extended codes carry it in the low byte).
    public var primaryCode: Int32 { code & 0xFF }
    /// What the failure means for the store: the one mapping from SQLite's result codes (by their primary code).
    public var kind: StoreError.Kind {
        switch primaryCode {
        // The statement's own data was refused: a constraint or trigger, a value too big or of the wrong type.
        case SQLITE_CONSTRAINT, SQLITE_TOOBIG, SQLITE_MISMATCH: .rejectedWrite
        // Also `max_page_count` reached.
        case SQLITE_FULL: .diskFull
        // The WAL index could not be grown: SQLite says "disk I/O error", and a full disk is what causes it.
        case SQLITE_IOERR where code == Self.walIndexNotGrown: .diskFull
        // Other writes may still commit, but it is the store's failure, not the write's.
        case SQLITE_CORRUPT, SQLITE_NOTADB: .damaged
        // Another connection (another process on the file) held the lock past the busy timeout.
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        default: .other
        }
    }
    public var description: String { "SQLite error \(code): \(message)" }

    /// `SQLITE_IOERR_SHMSIZE`, which Swift does not import: a start on a full disk whose folder has
    /// no `-shm` file yet fails with it.
    static let walIndexNotGrown = SQLITE_IOERR | (19 << 8)
}

/// One SQLite connection, owning its `sqlite3*`; the owner serialises access.
final class Database {
    private let handle: OpaquePointer
    /// The VFS every connection opens with: SQLite's default, with a WAL's and a database file's
    /// writes gathered into fewer system calls (Sources/CLifecycleSQLiteVFS/gathered_writes.c). `nil`, the default
    /// itself, only if SQLite has no default VFS to build on.
    ///
    /// Made at the first connection's opening, after SQLite's process-wide settings, which
    /// must come before SQLite's first use.
    static let fileSystem: String? = {
        // A count nothing reads, kept under a mutex every allocation takes. SQLITE_MISUSE only
        // if SQLite was used before: then the count goes on, and nothing else changes.
        _ = lc_sqlite3_stop_counting_memory()
        return lc_gathered_writes_vfs().map { String(cString: $0) }
    }()

    /// `isReadOnly`: opens an existing file for reading only, never creating one.
    init(path: String, isReadOnly: Bool = false) throws(SQLiteError) {
        var opened: OpaquePointer?
        let flags = (isReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &opened, flags, Self.fileSystem)
        guard let opened else { throw SQLiteError(code: code, message: "cannot open \(path)") }
        guard code == SQLITE_OK else {
            defer { sqlite3_close_v2(opened) }
            throw SQLiteError(code: code, message: String(cString: sqlite3_errmsg(opened)))
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, 5000)
        // Replaces the automatic checkpoint (`wal_autocheckpoint` would remove it): commits never checkpoint.
        sqlite3_wal_hook(handle, { context, _, _, frames in
            Unmanaged<Database>.fromOpaque(context!).takeUnretainedValue().walFrames = Int(frames)
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { sqlite3_close_v2(handle) }

    /// `body` with the connection itself, for a call SQLite allows from another thread (`sqlite3_interrupt`).
    func withHandle<T>(_ body: (OpaquePointer) -> T) -> T { body(handle) }
    /// Frames in the WAL after this connection's last commit; 0 after a checkpoint that starts it over.
    private(set) var walFrames = 0
    /// The statements the shared store code ran, prepared once by their text.
    private var cache: [StatementText: Statement] = [:]

    /// The one place result codes become Swift errors.
    func check(_ code: Int32) throws(SQLiteError) {
        guard code != SQLITE_OK, code != SQLITE_ROW, code != SQLITE_DONE else { return }
        throw SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs one or more statements with no results.
    func execute(_ sql: String) throws(SQLiteError) {
        try check(sqlite3_exec(handle, sql, nil, nil, nil))
    }

    func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil))
        return Statement(handle: statement!, database: self)
    }

    /// The shared statement `sql`, prepared on its first use with SQLite's `?N` for `$N` (no shared statement has another `$`).
    func cached(_ sql: String) throws(SQLiteError) -> Statement {
        let text = StatementText(sql: sql)
        if let statement = cache[text] { return statement }
        // Texts vary only with the number of values an `IN` lists: a bound, not a leak.
        if cache.count >= 256 { cache = [:] }
        let statement = try prepare(sql.replacingOccurrences(of: "$", with: "?"))
        cache[text] = statement
        return statement
    }

    /// Runs `body` in one transaction (`BEGIN` for a read snapshot), rolled back if it throws.
    @discardableResult
    func transaction<T>(_ begin: String = "BEGIN IMMEDIATE", _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        // Prepared once, as every statement `run` takes: `execute` would compile them each time.
        try run([SQLStatement(begin)])
        do {
            let result = try body()
            try run([SQLStatement("COMMIT")])
            return result
        } catch {
            do {
                try rollBack()
            } catch let failure {
                throw SQLiteError(code: error.code, message: "\(error.message); the rollback after it failed too: \(failure.message)")
            }
            throw error
        }
    }

    /// Rolls back the open transaction, unless SQLite already has (after some errors).
    func rollBack() throws(SQLiteError) {
        guard sqlite3_get_autocommit(handle) == 0 else { return }
        try execute("ROLLBACK")
    }

    /// SQLite's `SQLITE_CHECKPOINT_*` modes: PASSIVE copies what it can; RESTART also waits (up to the busy timeout) until
    /// no reader needs the WAL, so the next write starts it over; TRUNCATE also empties the file.
    enum Checkpoint: Int32 {
        case passive = 0, restart = 2, truncate = 3
    }

    /// Runs a checkpoint; `false` when a reader or another checkpoint kept it from finishing.
    func checkpoint(_ mode: Checkpoint) throws(SQLiteError) -> Bool {
        let result = sqlite3_wal_checkpoint_v2(handle, nil, mode.rawValue, nil, nil)
        if result & 0xFF == SQLITE_BUSY { return false }
        try check(result)
        if mode != .passive { walFrames = 0 }
        return true
    }
}

/// A statement's text as ``Database``'s cache finds it: hashed by its length and its last bytes,
/// where the shared texts differ (a row count, a table, a conflict clause), and compared byte for
/// byte. Hashing the whole text, a few hundred bytes, cost the writer more than running some
/// statements did.
struct StatementText: Hashable {
    let sql: String

    static func == (lhs: Self, rhs: Self) -> Bool {
        var (left, right) = (lhs.sql, rhs.sql)
        return left.withUTF8 { a in
            right.withUTF8 { b in a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0) }
        }
    }

    func hash(into hasher: inout Hasher) {
        var sql = sql
        sql.withUTF8 { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(32))))
        }
    }
}

/// A prepared statement, reset and reused. Owns the `sqlite3_stmt*`, and the bytes of the
/// texts and blobs bound to it.
final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database
    /// Where the bound texts and blobs are, one after another: SQLite reads them in place
    /// (`SQLITE_STATIC`), where copying each into an allocation of its own (`SQLITE_TRANSIENT`)
    /// cost the writer thread 15% of its instructions in batch ingest. Only ``bind(_:)``
    /// writes it, after the reset that ends the statement's last run, and it binds every
    /// parameter again (or clears them) before the statement runs, so SQLite never reads
    /// bytes of an earlier run. It keeps the largest size a run needed, which the batch
    /// limits bound.
    private var arena = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    fileprivate init(handle: OpaquePointer, database: Database) {
        self.handle = handle
        self.database = database
    }

    deinit {
        sqlite3_finalize(handle)
        arena.deallocate()
    }

    /// Binds values to `?1`, `?2`, ... after clearing earlier bindings and state; booleans as 0 or 1.
    private func bind(_ values: [ColumnValue]) throws(SQLiteError) {
        sqlite3_reset(handle)
        // Parameters left unbound would keep the last run's values; when every one is bound
        // now (a multi-row insert's hundreds), clearing them first is work for nothing.
        if values.count < parameterCount { sqlite3_clear_bindings(handle) }
        // Room for every text and blob first: the arena must not move once one is bound.
        var size = 0
        for offset in values.indices {
            switch values[offset] {
            case .text(let v?): size += v.utf8.count
            case .bytes(let v): size += v.count
            default: break
            }
        }
        if arena.count < max(size, 1) {
            arena.deallocate()
            arena = .allocate(byteCount: max(size, 1, arena.count * 2), alignment: 8)
        }
        // Empty texts and blobs point here too: a null pointer would bind NULL.
        var next = arena.baseAddress!
        // By index: each value taken out of the array would be copied, its string retained.
        for offset in values.indices {
            let index = Int32(offset + 1)
            let code: Int32
            switch values[offset] {
            case .integer(nil), .text(nil): code = sqlite3_bind_null(handle, index)
            case .integer(let v?): code = sqlite3_bind_int64(handle, index, v)
            case .boolean(let v): code = sqlite3_bind_int64(handle, index, v ? 1 : 0)
            case .text(var v?):
                // The string's own UTF-8 (read in place for a native string), copied once, into the arena.
                let count = v.withUTF8 { utf8 in
                    if let source = utf8.baseAddress { next.copyMemory(from: source, byteCount: utf8.count) }
                    return utf8.count
                }
                code = sqlite3_bind_text(handle, index, next.assumingMemoryBound(to: CChar.self), Int32(count), nil)
                next += count
            case .bytes(let v):
                v.withUnsafeBytes { bytes in
                    if let source = bytes.baseAddress { next.copyMemory(from: source, byteCount: bytes.count) }
                }
                code = sqlite3_bind_blob(handle, index, next, Int32(v.count), nil)
                next += v.count
            case .integers, .texts, .byteas, .booleans: code = SQLITE_MISMATCH  // the dialect binds each value
            }
            try database.check(code)
        }
    }

    /// How many parameters the statement has.
    private lazy var parameterCount = Int(sqlite3_bind_parameter_count(handle))

    func run(_ values: [ColumnValue] = []) throws(SQLiteError) {
        try forEachRow(values) { _ in }
    }

    func forEachRow(_ values: [ColumnValue] = [], _ body: (Row) throws(SQLiteError) -> Void) throws(SQLiteError) {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { try database.check(code); return }
            try body(Row(handle: handle))
        }
    }
}

/// Reads columns of the current row; valid only inside the callback that received it.
struct Row: StoredRow {
    let handle: OpaquePointer
    static func damaged(_ message: String) -> SQLiteError { SQLiteError(code: SQLITE_CORRUPT, message: message) }
    func isNull(_ column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL }
    func integer(_ column: Int) -> Int64 { sqlite3_column_int64(handle, Int32(column)) }
    func boolean(_ column: Int) -> Bool { integer(column) != 0 }
    func text(_ column: Int) -> String? {
        // The length SQLite already knows, rather than another pass to find the NUL.
        sqlite3_column_text(handle, Int32(column)).map { text in
            String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, Int32(column)))), as: UTF8.self)
        }
    }
    func byteCount(_ column: Int) -> Int { Int(sqlite3_column_bytes(handle, Int32(column))) }

    func bytes(_ column: Int) -> [UInt8] {
        let count = byteCount(column)
        guard count > 0, let pointer = sqlite3_column_blob(handle, Int32(column)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

extension Database: SQLConnection {
    static let dialect = SQLDialect(
        window: "window", greatest: "max", keepsSequenceFloor: true, schemaVersion: "PRAGMA user_version",
        settingSchemaVersion: { "PRAGMA user_version = \($0)" }, tableColumns: "SELECT name FROM pragma_table_info($1)",
        maxListedValues: 512
    ) { column, values, bindings in
        let first = bindings.count + 1
        bindings += values.map { .text($0) }
        return "\(column) IN (\((first..<first + values.count).map { "$\($0)" }.joined(separator: ", ")))"
    }

    func executeScript(_ sql: String) throws(SQLiteError) { try execute(sql) }
    static func refusal(_ message: String) -> SQLiteError { SQLiteError(code: SQLITE_ERROR, message: message) }

    func forEachRow(_ sql: String, _ values: [ColumnValue], _ body: (Row) throws(SQLiteError) -> Void) throws(SQLiteError) {
        try cached(sql).forEachRow(values, body)
    }

    @discardableResult
    func run(_ statements: [SQLStatement]) throws(SQLiteError) -> [Int] {
        var changed: [Int] = []
        for statement in statements {
            try cached(statement.sql).run(statement.values)
            changed.append(Int(sqlite3_changes(handle)))
        }
        return changed
    }

    static func inserting(_ rows: [[ColumnValue]], into table: SQLTable) -> [SQLStatement] {
        table.inserting(rows)
    }

    static let updateInstance = "UPDATE instances SET "
        + dialect.instanceColumnNames.indices.dropFirst().map { "\(dialect.instanceColumnNames[$0]) = $\($0 + 1)" }.joined(separator: ", ") + " WHERE id = $1"

    static func updating(instances rows: [[ColumnValue]]) -> [SQLStatement] {
        rows.map { SQLStatement(updateInstance, $0) }
    }

    /// The floor first, from what the delete then removes: SQLite's DELETE cannot feed an INSERT.
    static func deleting(from table: String, where condition: String, _ values: [ColumnValue]) -> [SQLStatement] {
        [
            SQLStatement("""
                INSERT INTO meta (key, value) SELECT 'dropped_through', max(seq) FROM \(table) WHERE \(condition) HAVING count(*) > 0
                ON CONFLICT (key) DO UPDATE SET value = max(meta.value, excluded.value)
                """, values),
            SQLStatement("DELETE FROM \(table) WHERE \(condition)", values),
        ]
    }

    static func dropping(_ drops: [String: RetentionBacklog.Drop]) -> [SQLStatement] {
        drops.flatMap { (instance, drop) in
            deleting(from: "records", where: "instance = $1 AND version <= $2 AND seq < $3", [.text(instance), .integer(drop.version), .integer(drop.before)])
        }
    }
}

extension SQLiteError: StoreFailure {
    func storeError(doing what: String) -> StoreError {
        let said = self.code == Self.walIndexNotGrown ? message + ": the WAL index (-shm) could not be grown; is the disk full?" : message
        let code = StoreError.Code.sqlite(code)
        return StoreError("\(what): \(said) (\(code))", kind: kind, code: code)
    }
}
