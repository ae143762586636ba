import CSQLite
import Foundation

/// A failed SQLite call: its result code and the connection's message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String

    /// The primary result code (extended codes carry it in the low byte).
    public var primaryCode: Int32 { code & 0xFF }

    /// Whether the disk (or quota) is full.
    public var isDiskFull: Bool { primaryCode == SQLITE_FULL }

    /// Whether the statement's own data was refused (a constraint or trigger, a value too big
    /// or of the wrong type), as opposed to the database failing for every statement.
    public var isSpecificToWrite: Bool { [SQLITE_CONSTRAINT, SQLITE_TOOBIG, SQLITE_MISMATCH].contains(primaryCode) }

    public var description: String { "SQLite error \(code): \(message)" }
}

/// One SQLite connection. Owns the `sqlite3*` and closes it in `deinit`.
/// Not thread-safe: the owner serialises access.
final class Database {
    private let handle: OpaquePointer

    init(path: String) throws(SQLiteError) {
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard let opened else { throw SQLiteError(code: code, message: "cannot open \(path)") }
        handle = opened
        do {
            try check(code)
        } catch {
            sqlite3_close_v2(opened)
            throw error
        }
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, 5000)
    }

    deinit { sqlite3_close_v2(handle) }

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

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}

/// A prepared statement, reset and reused. Owns the `sqlite3_stmt*`.
final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database

    fileprivate init(handle: OpaquePointer, database: Database) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// A value that can be bound to a parameter.
    enum Binding {
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])
        case null
    }

    /// Binds values to `?1`, `?2`, ... after clearing earlier bindings and state.
    @discardableResult
    func bind(_ values: [Binding]) throws(SQLiteError) -> Statement {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .integer(let v): code = sqlite3_bind_int64(handle, index, v)
            case .real(let v): code = sqlite3_bind_double(handle, index, v)
            case .text(let v): code = v.utf8CString.withUnsafeBufferPointer { lc_sqlite3_bind_text(handle, index, $0.baseAddress, Int32($0.count - 1)) }
            case .blob(let v): code = v.withUnsafeBytes { lc_sqlite3_bind_blob(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count)) }
            case .null: code = sqlite3_bind_null(handle, index)
            }
            try database.check(code)
        }
        return self
    }

    /// Runs a statement that returns no rows.
    func run(_ values: [Binding] = []) throws(SQLiteError) {
        try bind(values)
        let code = sqlite3_step(handle)
        sqlite3_reset(handle)
        try database.check(code)
    }

    /// Steps through result rows, calling `body` with a row reader each time.
    func forEachRow(_ values: [Binding] = [], _ body: (Row) throws(SQLiteError) -> Void) throws(SQLiteError) {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { try database.check(code); return }
            try body(Row(handle: handle))
        }
    }

    /// The first row's reading, or `nil` when there is no row.
    func first<T>(_ values: [Binding] = [], _ read: (Row) -> T) throws(SQLiteError) -> T? {
        var result: T?
        try bind(values)
        defer { sqlite3_reset(handle) }
        let code = sqlite3_step(handle)
        if code == SQLITE_ROW { result = read(Row(handle: handle)) } else { try database.check(code) }
        return result
    }
}

/// Reads columns of the current row; valid only inside the callback that received it.
struct Row {
    let handle: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func real(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: pointer)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
