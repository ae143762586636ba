import CLibPQ
import Foundation

/// A failed libpq call: the server's SQLSTATE (when the server answered) and message.
public struct PostgreSQLError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE; `nil` when the failure lies in the connection itself.
    public let sqlState: String?
    public let message: String
    /// Whether the connection is gone (or never came up): nothing more can be done on it.
    public let isConnectionLost: Bool

    /// Class 23: a unique, foreign key, not-null or check constraint refused the row.
    public var isConstraintViolation: Bool { sqlState?.hasPrefix("23") == true }

    /// 53100 disk_full.
    public var isDiskFull: Bool { sqlState == "53100" }

    /// Whether the statement's own data was refused (a constraint, a value out of range or
    /// malformed, a value too big), as opposed to the database failing for every statement.
    public var isSpecificToWrite: Bool {
        guard let sqlState else { return false }
        return isConstraintViolation || sqlState.hasPrefix("22") || sqlState == "54000"
    }

    /// XX001 data_corrupted, XX002 index_corrupted: damage that does not heal.
    public var isDamage: Bool { sqlState == "XX001" || sqlState == "XX002" }

    public var description: String { sqlState.map { "PostgreSQL error \($0): \(message)" } ?? "PostgreSQL: \(message)" }
}

/// One libpq connection. Owns the `PGconn*` and closes it in `deinit`.
/// Not thread-safe: the owner serialises access.
///
/// Every statement goes through `PQexecParams` as an unnamed statement, and nothing sets
/// session state: each transaction is complete in itself, so the connection may be a
/// PgBouncer one in transaction mode.
final class Connection {
    private let handle: OpaquePointer

    /// Connects to `url`, a libpq connection URI or `key=value` string. Settings the URL
    /// gives win over the defaults here.
    init(url: String) throws(PostgreSQLError) {
        // A server that does not answer fails a connection attempt after 2 s (the least libpq
        // honours), and a TCP connection whose peer vanished after about 10 s rather than the
        // system's two hours: an operation waits that long at most before the service can
        // answer 503. Keywords are processed in order and the last value wins: the URL,
        // expanded from `dbname`, comes last so that it can override every default before it.
        let settings = [
            ("connect_timeout", "2"), ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3"),
            ("tcp_user_timeout", "10000"), ("application_name", "lifecycled"), ("client_encoding", "UTF8"), ("dbname", url),
        ]
        let keywords = settings.map { strdup($0.0) }
        let values = settings.map { strdup($0.1) }
        defer { (keywords + values).forEach { free($0) } }
        let opened = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keys in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { values in
                PQconnectdbParams(keys.baseAddress, values.baseAddress, 1)
            }
        }
        guard let opened else { throw PostgreSQLError(sqlState: nil, message: "out of memory", isConnectionLost: true) }
        guard PQstatus(opened) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(opened))
            PQfinish(opened)
            throw PostgreSQLError(sqlState: nil, message: message, isConnectionLost: true)
        }
        handle = opened
        // libpq prints notices (such as "relation already exists, skipping") on standard
        // error by default; none of them needs an operator.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }

    deinit { PQfinish(handle) }

    /// Whether the connection is gone: every later statement on it would fail.
    var isLost: Bool { PQstatus(handle) != CONNECTION_OK }

    /// A parameter of a statement: `$1`, `$2`, ... in order.
    enum Parameter {
        case integer(Int64)
        case text(String)
        case bytes([UInt8])
        /// A `text[]`; the statement casts its parameter (`$1::text[]`).
        case texts([String])
        case boolean(Bool)
        case null
    }

    /// Runs one statement with `parameters`; results come back in binary form.
    @discardableResult
    func execute(_ sql: String, _ parameters: [Parameter] = []) throws(PostgreSQLError) -> QueryResult {
        // Integers, booleans and bytea go in binary (no formatting, no escaping); text as text.
        var types: [Oid] = []
        var formats: [Int32] = []
        var buffers: [[UInt8]?] = []
        for parameter in parameters {
            switch parameter {
            case .integer(let value):
                types.append(20)  // int8
                formats.append(1)
                buffers.append(withUnsafeBytes(of: value.bigEndian) { Array($0) })
            case .boolean(let value):
                types.append(16)  // bool
                formats.append(1)
                buffers.append([value ? 1 : 0])
            case .bytes(let value):
                types.append(17)  // bytea
                formats.append(1)
                buffers.append(value)
            case .text(let value):
                // libpq reads text up to its first NUL, which PostgreSQL's text cannot hold:
                // refused rather than cut short.
                guard !value.utf8.contains(0) else {
                    throw PostgreSQLError(sqlState: "22021", message: "text with a NUL character cannot be stored", isConnectionLost: false)
                }
                types.append(25)  // text
                formats.append(0)
                buffers.append(Array(value.utf8))
            case .texts(let values):
                guard !values.contains(where: { $0.utf8.contains(0) }) else {
                    throw PostgreSQLError(sqlState: "22021", message: "text with a NUL character cannot be stored", isConnectionLost: false)
                }
                types.append(1009)  // text[]
                formats.append(0)
                // An array literal: every element quoted, with " and \ escaped.
                let elements = values.map { value in
                    "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
                }
                buffers.append(Array("{\(elements.joined(separator: ","))}".utf8))
            case .null:
                types.append(0)
                formats.append(0)
                buffers.append(nil)
            }
        }
        // Copies that stay put while libpq reads them; a text value needs its terminating NUL.
        let copies: [UnsafeMutablePointer<CChar>?] = zip(buffers, formats).map { buffer, format in
            guard let buffer else { return nil }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: buffer.count + 1)
            buffer.withUnsafeBytes { UnsafeMutableRawPointer(copy).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: buffer.count) }
            copy[buffer.count] = 0
            return copy
        }
        defer { copies.forEach { $0?.deallocate() } }
        let lengths = buffers.map { Int32($0?.count ?? 0) }
        let values = copies.map { UnsafePointer($0) }
        let result = PQexecParams(handle, sql, Int32(parameters.count), types, values, lengths, formats, 1)
        return try check(result)
    }

    /// The one place libpq results become Swift errors: takes ownership of `result`.
    private func check(_ result: OpaquePointer?) throws(PostgreSQLError) -> QueryResult {
        guard let result else {
            throw PostgreSQLError(sqlState: nil, message: Self.trimmed(PQerrorMessage(handle)), isConnectionLost: isLost)
        }
        let owned = QueryResult(handle: result)
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return owned
        default:
            let sqlState = lc_pq_sqlstate(result).map { String(cString: $0) }
            // The server's message and its detail, without the severity and line breaks of
            // PQresultErrorMessage; libpq's own when the server sent none.
            var message = Self.trimmed(lc_pq_message(result))
            if message.isEmpty { message = Self.trimmed(PQerrorMessage(handle)) }
            let detail = Self.trimmed(lc_pq_detail(result))
            if !detail.isEmpty { message += ": \(detail)" }
            // Class 08 is a connection exception; 57P01-57P03 an administrator's or a crash's
            // shutdown, or a server not yet accepting connections.
            let lost = isLost || sqlState?.hasPrefix("08") == true || ["57P01", "57P02", "57P03"].contains(sqlState ?? "")
            throw PostgreSQLError(sqlState: sqlState, message: message, isConnectionLost: lost)
        }
    }

    /// The connection's socket, to wait on for notifications.
    var socket: Int32 { PQsocket(handle) }

    /// Reads what the server sent and counts the notifications in it (each freed at once).
    func takeNotifications() throws(PostgreSQLError) -> Int {
        guard PQconsumeInput(handle) == 1 else {
            throw PostgreSQLError(sqlState: nil, message: Self.trimmed(PQerrorMessage(handle)), isConnectionLost: true)
        }
        var count = 0
        while let notification = PQnotifies(handle) {
            PQfreemem(notification)
            count += 1
        }
        return count
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        // libpq breaks its own messages into indented lines: one line reads better in a log.
        return String(cString: message).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }
}

/// A statement's result, in binary form. Owns the `PGresult*` and frees it in `deinit`.
final class QueryResult {
    private let handle: OpaquePointer

    fileprivate init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit { PQclear(handle) }

    var rowCount: Int { Int(PQntuples(handle)) }

    /// Rows a command changed (an INSERT's, UPDATE's or DELETE's count).
    var changedRows: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    /// A binary `bigint`, `integer` or `smallint`; 0 for NULL.
    func integer(_ row: Int, _ column: Int) -> Int64 {
        let bytes = self.bytes(row, column)
        guard let first = bytes.first else { return 0 }
        // Big-endian two's complement: start from the sign, which the shifts carry up.
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in bytes { value = value << 8 | Int64(byte) }
        return value
    }

    /// A binary `boolean`; `false` for NULL.
    func boolean(_ row: Int, _ column: Int) -> Bool { bytes(row, column).first == 1 }

    /// A `text` column (binary text is the UTF-8 text itself); `nil` for NULL.
    func text(_ row: Int, _ column: Int) -> String? {
        isNull(row, column) ? nil : String(decoding: bytes(row, column), as: UTF8.self)
    }

    /// The text of a column the schema declares NOT NULL: NULL there means a damaged database,
    /// which is reported, never read as an empty string.
    func text(_ row: Int, _ column: Int, named name: String) throws(PostgreSQLError) -> String {
        guard let text = text(row, column) else {
            throw PostgreSQLError(sqlState: "XX001", message: "\(name) is NULL, which the schema does not allow: the database is damaged", isConnectionLost: false)
        }
        return text
    }

    /// The raw bytes of a value (a `bytea`'s content); empty for NULL.
    func bytes(_ row: Int, _ column: Int) -> [UInt8] {
        let count = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard count > 0, let pointer = PQgetvalue(handle, Int32(row), Int32(column)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
