import Foundation

/// One result row, read by column position: what SQLite's rows and libpq's results both offer to the codec.
protocol StoredRow {
    /// The error of the store the row comes from.
    associatedtype Failure: Error
    /// The error for stored data no lifecycled writes: the database is damaged.
    static func damaged(_ message: String) -> Failure

    func isNull(_ column: Int) -> Bool
    /// An integer column; 0 for NULL.
    func integer(_ column: Int) -> Int64
    /// A boolean column (an integer in SQLite); `false` for NULL.
    func boolean(_ column: Int) -> Bool
    /// A text column; `nil` for NULL.
    func text(_ column: Int) -> String?
    /// A blob (`bytea`) column's bytes; empty for NULL.
    func bytes(_ column: Int) -> [UInt8]
    /// The size of a blob or text column, without reading it.
    func byteCount(_ column: Int) -> Int
}

extension StoredRow {
    /// The text of a column the schema declares NOT NULL: NULL there is damage, never an empty string.
    func text(_ column: Int, named name: String) throws(Failure) -> String {
        guard let text = text(column) else { throw Self.damaged("\(name) is NULL, which the schema does not allow: the database is damaged") }
        return text
    }

    /// A time column: whole milliseconds since 1970.
    func date(_ column: Int) -> Date { Codec.date(integer(column)) }

    /// The one wording of a code no lifecycled writes: `subject` is what has it ("record 7 has kind").
    static func unknown(_ subject: String, _ code: Int64) -> Failure {
        damaged("\(subject) \(code), which no lifecycled writes")
    }
}

/// A value for one column, typed even when NULL, since PostgreSQL gathers a column of them into one array for `unnest`.
enum ColumnValue: Sendable, Equatable {
    case integer(Int64?)
    case text(String?)
    case bytes([UInt8])
    case boolean(Bool)
    /// Arrays, which PostgreSQL takes for `unnest` and `ANY`; SQLite binds each value instead.
    case integers([Int64?]), texts([String?]), byteas([[UInt8]]), booleans([Bool])
}
