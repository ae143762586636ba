import CLifecycleLibPQ
import Foundation

/// One libpq connection, owning its `PGconn*`; the owner serialises access. Unnamed statements and no session state, so it may
/// lead through PgBouncer in transaction mode. Every wait is a non-blocking call and `poll(2)` against ``deadline``: a server
/// that holds its sockets but does not answer would block libpq for ever. Past it the connection is given up; what the server
/// received (a COMMIT too) may still take effect.
final class Connection {
    private let handle: OpaquePointer
    /// When the operation under way must be over; its owner sets it for each operation.
    var deadline: Deadline
    /// Set when an exchange broke off half-way: results may be on their way, so nothing more can be sent.
    private var isAbandoned = false

    /// Connects to `url`, a libpq URI or `key=value` string, by `deadline` (the resolver bounds name lookups).
    init(url: String, deadline: Deadline) throws(PostgreSQLError) {
        // Keepalives: a vanished peer fails the idle listening connection in about 10 s, not two hours.
        // `dbname` (the URL) comes last, so that its settings win over these defaults.
        let settings = [
            ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3"),
            ("tcp_user_timeout", "10000"), ("application_name", "lifecycled"), ("client_encoding", "UTF8"), ("dbname", url),
        ]
        let keywords = settings.map { strdup($0.0) }
        let values = settings.map { strdup($0.1) }
        defer { (keywords + values).forEach { free($0) } }
        let started = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keys in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { values in
                PQconnectStartParams(keys.baseAddress, values.baseAddress, 1)
            }
        }
        guard let started else { throw .lost("out of memory") }
        do throws(PostgreSQLError) {
            try Self.complete(started, by: deadline)
        } catch {
            PQfinish(started)
            throw error
        }
        handle = started
        self.deadline = deadline
        // No notice ("relation already exists, skipping") needs an operator.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }

    /// Drives libpq's connection state machine to its end by `deadline`; the socket may change from one address to the next.
    private static func complete(_ connection: OpaquePointer, by deadline: Deadline) throws(PostgreSQLError) {
        var polling = PGRES_POLLING_WRITING
        steps: while PQstatus(connection) != CONNECTION_BAD {
            switch polling {
            // Sending, too, must never block: a server that stops reading fills the socket.
            case PGRES_POLLING_OK: if PQsetnonblocking(connection, 1) == 0 { return } else { break steps }
            case PGRES_POLLING_READING: try deadline.wait(PQsocket(connection), for: Int32(POLLIN))
            case PGRES_POLLING_WRITING: try deadline.wait(PQsocket(connection), for: Int32(POLLOUT))
            default: break steps
            }
            polling = PQconnectPoll(connection)
        }
        throw .lost(trimmed(PQerrorMessage(connection)))
    }

    deinit { PQfinish(handle) }
    /// Whether the connection is gone: every later statement on it would fail.
    var isLost: Bool { isAbandoned || PQstatus(handle) != CONNECTION_OK }

    /// Runs one statement with `parameters` (sent in binary form: no escaping); results come back in binary form.
    @discardableResult
    func execute(_ sql: String, _ parameters: [ColumnValue] = []) throws(PostgreSQLError) -> QueryResult {
        try execute([SQLStatement(sql, parameters)])[0]
    }

    /// Runs `statements` in one round trip (pipeline mode); the first failure is thrown, and the rest skipped.
    @discardableResult
    func execute(_ statements: [SQLStatement]) throws(PostgreSQLError) -> [QueryResult] {
        guard !statements.isEmpty else { return [] }
        guard !isAbandoned else { throw .lost("the connection was given up") }
        do {
            return try exchange(statements)
        } catch {
            // A failure the server reported ends at the Sync, which was read; any other leaves the exchange half done.
            if error.sqlState == nil || error.isConnectionLost { isAbandoned = true }
            throw error
        }
    }

    private func exchange(_ statements: [SQLStatement]) throws(PostgreSQLError) -> [QueryResult] {
        guard PQenterPipelineMode(handle) == 1 else { throw connectionError() }
        // Fails only while results are pending, on a connection given up, which nothing uses again.
        defer { PQexitPipelineMode(handle) }
        for statement in statements {
            let sent = Self.withParameters(statement.values) { count, types, values, lengths, formats in
                PQsendQueryParams(handle, statement.sql, count, types, values, lengths, formats, 1)
            }
            guard sent == 1 else { throw connectionError() }
        }
        guard PQpipelineSync(handle) == 1 else { throw connectionError() }
        try flush()
        var results: [QueryResult] = []
        var failure: PostgreSQLError?
        for _ in statements {
            guard let result = try nextResult() else { throw connectionError() }
            let owned = QueryResult(handle: result)
            if PQresultStatus(result) != PGRES_PIPELINE_ABORTED, let error = error(in: result) {
                failure = failure ?? error
            } else {
                results.append(owned)
            }
            // Each statement's results end with a NULL.
            while let extra = try nextResult() { PQclear(extra) }
            if isLost { throw failure ?? connectionError() }
        }
        guard let sync = try nextResult() else { throw failure ?? connectionError() }
        let status = PQresultStatus(sync)
        PQclear(sync)
        guard status == PGRES_PIPELINE_SYNC else { throw failure ?? connectionError() }
        if let failure { throw failure }
        return results
    }

    /// Sends what libpq holds, reading what the server sends meanwhile (as libpq asks) so neither side waits on the other.
    private func flush() throws(PostgreSQLError) {
        while true {
            switch PQflush(handle) {
            case 0: return
            case 1:
                try deadline.wait(PQsocket(handle), for: Int32(POLLOUT | POLLIN))
                guard PQconsumeInput(handle) == 1 else { throw connectionError() }
            default: throw connectionError()
            }
        }
    }

    /// The next result, once the server has sent it all; `nil` at the end of a statement's.
    private func nextResult() throws(PostgreSQLError) -> OpaquePointer? {
        while PQisBusy(handle) == 1 {
            try deadline.wait(PQsocket(handle), for: Int32(POLLIN))
            guard PQconsumeInput(handle) == 1 else { throw connectionError() }
        }
        return PQgetResult(handle)
    }

    /// Calls `body` with `parameters` laid out as libpq takes them, valid during the call.
    private static func withParameters<T>(
        _ parameters: [ColumnValue],
        _ body: (Int32, [Oid], [UnsafePointer<CChar>?], [Int32], [Int32]) -> T
    ) -> T {
        let encoded = parameters.map(\.binary)
        // Copies that stay put while libpq reads them.
        let copies: [UnsafeMutablePointer<CChar>?] = encoded.map { parameter in
            guard let bytes = parameter.bytes else { return nil }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes { UnsafeMutableRawPointer(copy).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: bytes.count) }
            return copy
        }
        defer { copies.forEach { $0?.deallocate() } }
        return body(
            Int32(parameters.count), encoded.map(\.type), copies.map { UnsafePointer($0) }, encoded.map { Int32($0.bytes?.count ?? 0) },
            [Int32](repeating: 1, count: parameters.count)
        )
    }

    /// The one place libpq results become Swift errors: `nil` for a result that succeeded.
    private func error(in result: OpaquePointer) -> PostgreSQLError? {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_PIPELINE_SYNC:
            return nil
        default:
            let sqlState = lc_pq_sqlstate(result).map { String(cString: $0) }
            // The server's message and detail without PQresultErrorMessage's severity and line breaks.
            var message = Self.trimmed(lc_pq_message(result))
            if message.isEmpty { message = Self.trimmed(PQerrorMessage(handle)) }
            let detail = Self.trimmed(lc_pq_detail(result))
            if !detail.isEmpty { message += ": \(detail)" }
            // Class 08: a connection exception; 57P01-57P03: a shutdown, or a server not yet accepting connections.
            let lost = isLost || sqlState?.hasPrefix("08") == true || ["57P01", "57P02", "57P03"].contains(sqlState ?? "")
            return PostgreSQLError(sqlState: sqlState, message: message, isConnectionLost: lost)
        }
    }

    /// A failure without a result: the connection's own message.
    private func connectionError() -> PostgreSQLError {
        PostgreSQLError(sqlState: nil, message: Self.trimmed(PQerrorMessage(handle)), isConnectionLost: isLost)
    }

    var socket: Int32 { PQsocket(handle) }

    /// Reads what the server sent and counts the notifications in it (each freed at once).
    func takeNotifications() throws(PostgreSQLError) -> Int {
        guard PQconsumeInput(handle) == 1 else { throw .lost(Self.trimmed(PQerrorMessage(handle))) }
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
    fileprivate let handle: OpaquePointer

    fileprivate init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit { PQclear(handle) }
    var rowCount: Int { Int(PQntuples(handle)) }
    /// Rows a command changed (an INSERT's, UPDATE's or DELETE's count).
    var changedRows: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }
    var rows: [ResultRow] { (0..<rowCount).map(row) }
    /// One row (reading past the last gives NULLs, as libpq does).
    func row(_ index: Int) -> ResultRow { ResultRow(result: self, row: Int32(index)) }
}

/// One row of a result, read by column as the codec reads rows.
struct ResultRow: StoredRow {
    let result: QueryResult
    let row: Int32
    static func damaged(_ message: String) -> PostgreSQLError { PostgreSQLError(sqlState: "XX001", message: message, isConnectionLost: false) }
    func isNull(_ column: Int) -> Bool { PQgetisnull(result.handle, row, Int32(column)) == 1 }

    /// A binary `bigint`, `integer` or `smallint`: big-endian two's complement, from the sign up.
    func integer(_ column: Int) -> Int64 {
        let bytes = self.bytes(column)
        guard let first = bytes.first else { return 0 }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in bytes { value = value << 8 | Int64(byte) }
        return value
    }

    func boolean(_ column: Int) -> Bool { bytes(column).first == 1 }
    /// Binary text is the UTF-8 text itself.
    func text(_ column: Int) -> String? { isNull(column) ? nil : String(decoding: bytes(column), as: UTF8.self) }
    func byteCount(_ column: Int) -> Int { Int(PQgetlength(result.handle, row, Int32(column))) }

    func bytes(_ column: Int) -> [UInt8] {
        let count = byteCount(column)
        guard count > 0, let pointer = PQgetvalue(result.handle, row, Int32(column)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

extension ColumnValue {
    /// The type's OID and the value's binary form (`nil` for NULL).
    var binary: (type: Oid, bytes: [UInt8]?) {
        switch self {
        case .integer(let value): (20, value.map(Self.int8))
        case .boolean(let value): (16, [value ? 1 : 0])
        case .text(let value): (25, value.map { Array($0.utf8) })
        case .bytes(let value): (17, value)
        case .integers(let values): (1016, Self.array(of: 20, values.map { $0.map(Self.int8) }))
        case .booleans(let values): (1000, Self.array(of: 16, values.map { [$0 ? 1 : 0] }))
        case .texts(let values): (1009, Self.array(of: 25, values.map { $0.map { Array($0.utf8) } }))
        case .byteas(let values): (1001, Self.array(of: 17, values))
        }
    }

    private static func int8(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    private static func int4(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    /// A one-dimensional array in PostgreSQL's binary form (see `array_recv`).
    private static func array(of element: Oid, _ values: [[UInt8]?]) -> [UInt8] {
        var bytes = int4(values.isEmpty ? 0 : 1) + int4(values.contains { $0 == nil } ? 1 : 0) + int4(Int32(bitPattern: element))
        if !values.isEmpty { bytes += int4(Int32(values.count)) + int4(1) }
        for value in values {
            if let value {
                bytes += int4(Int32(value.count)) + value
            } else {
                bytes += int4(-1)
            }
        }
        return bytes
    }

    /// The codec's rows (at least one, all of the same columns) as one array per column for `unnest`, with its types.
    static func columns(_ rows: [[ColumnValue]]) -> (arrays: [ColumnValue], types: [String]) {
        var arrays: [ColumnValue] = []
        var types: [String] = []
        for column in rows[0].indices {
            let values = rows.map { $0[column] }
            let (array, type): (ColumnValue, String) = switch values[0] {
            case .integer: (.integers(values.map { if case .integer(let v) = $0 { v } else { nil } }), "bigint")
            case .text: (.texts(values.map { if case .text(let v) = $0 { v } else { nil } }), "text")
            case .bytes: (.byteas(values.map { if case .bytes(let v) = $0 { v } else { [] } }), "bytea")
            case .boolean: (.booleans(values.map { if case .boolean(let v) = $0 { v } else { false } }), "boolean")
            case .integers, .texts, .byteas, .booleans: (values[0], "")  // rows hold no arrays
            }
            arrays.append(array)
            types.append(type)
        }
        return (arrays, types)
    }

    /// `unnest` of `columns` (`$n`, their numbers after `first`) into rows named `names`.
    static func unnest(_ types: [String], after first: Int = 0, as names: String) -> String {
        "unnest(\(types.indices.map { "$\(first + $0 + 1)::\(types[$0])[]" }.joined(separator: ", "))) AS u(\(names))"
    }
}

extension Connection: SQLConnection {
    static let dialect = SQLDialect(
        window: "window_name", greatest: "greatest", keepsSequenceFloor: false, schemaVersion: "SELECT value FROM meta WHERE key = 'schema_version'",
        settingSchemaVersion: { "INSERT INTO meta (key, value) VALUES ('schema_version', \($0)) ON CONFLICT (key) DO UPDATE SET value = excluded.value" },
        tableColumns: "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND table_name::text = $1",
        maxListedValues: nil
    ) { column, values, bindings in
        bindings.append(.texts(values))
        return "\(column) = ANY($\(bindings.count)::text[])"
    }

    func executeScript(_ sql: String) throws(PostgreSQLError) { try execute(sql) }
    static func refusal(_ message: String) -> PostgreSQLError { PostgreSQLError(sqlState: nil, message: message, isConnectionLost: false) }

    func forEachRow(_ sql: String, _ values: [ColumnValue], _ body: (ResultRow) throws(PostgreSQLError) -> Void) throws(PostgreSQLError) {
        for row in try execute(sql, values).rows { try body(row) }
    }

    @discardableResult
    func run(_ statements: [SQLStatement]) throws(PostgreSQLError) -> [Int] {
        try execute(statements).map(\.changedRows)
    }

    static func inserting(_ rows: [[ColumnValue]], into table: SQLTable) -> [SQLStatement] {
        let (arrays, types) = ColumnValue.columns(rows)
        return [SQLStatement("INSERT INTO \(table.name) (\(table.columns)) SELECT * FROM \(ColumnValue.unnest(types, as: table.columns)) \(table.onConflict)", arrays)]
    }

    static func updating(instances rows: [[ColumnValue]]) -> [SQLStatement] {
        let (arrays, types) = ColumnValue.columns(rows)
        let assignments = dialect.instanceColumnNames.dropFirst().map { "\($0) = u.\($0)" }.joined(separator: ", ")
        return [SQLStatement(
            "UPDATE instances SET \(assignments) FROM \(ColumnValue.unnest(types, as: dialect.instanceColumns)) WHERE instances.id = u.id", arrays
        )]
    }

    /// `delete` (returning `seq`) raising `meta.dropped_through` to the largest it deleted, in one pipelinable statement.
    private static func raisingDroppedFloor(_ delete: String, _ values: [ColumnValue]) -> [SQLStatement] {
        [SQLStatement("""
            WITH gone AS (\(delete) RETURNING seq)
            INSERT INTO meta (key, value) SELECT 'dropped_through', max(seq) FROM gone HAVING count(*) > 0
            ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, excluded.value)
            """, values)]
    }

    static func deleting(from table: String, where condition: String, _ values: [ColumnValue]) -> [SQLStatement] {
        raisingDroppedFloor("DELETE FROM \(table) WHERE \(condition)", values)
    }

    static func dropping(_ drops: [String: RetentionBacklog.Drop]) -> [SQLStatement] {
        guard !drops.isEmpty else { return [] }
        return raisingDroppedFloor(
            """
            DELETE FROM records USING \(ColumnValue.unnest(["text", "bigint", "bigint"], as: "instance, through, before_seq"))
            WHERE records.instance = u.instance AND records.version <= u.through AND records.seq < u.before_seq
            """,
            [.texts(drops.map(\.key)), .integers(drops.map(\.value.version)), .integers(drops.map(\.value.before))]
        )
    }
}

/// A failed libpq call: the server's SQLSTATE (when the server answered) and message.
public struct PostgreSQLError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE; `nil` when the failure lies in the connection itself.
    public let sqlState: String?
    public let message: String
    /// Whether the connection is gone (or never came up): nothing more can be done on it.
    public let isConnectionLost: Bool
    /// Whether the server did not answer by the ``Deadline``: the connection was given up (so it is lost too).
    public let isTimedOut: Bool

    public init(sqlState: String?, message: String, isConnectionLost: Bool, isTimedOut: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.isConnectionLost = isConnectionLost || isTimedOut
        self.isTimedOut = isTimedOut
    }

    /// A failure of the connection itself, without a SQLSTATE.
    static func lost(_ message: String) -> PostgreSQLError { PostgreSQLError(sqlState: nil, message: message, isConnectionLost: true) }
    /// What the failure means for the store: the one mapping from SQLSTATEs (and a lost connection).
    public var kind: StoreError.Kind {
        // Whatever the server said last (57P01 admin_shutdown, say), the store must connect again.
        if isConnectionLost { return .unavailable }
        guard let sqlState else { return .other }
        switch sqlState {
        // 53100 disk_full.
        case "53100": return .diskFull
        // XX001 data_corrupted, XX002 index_corrupted: damage that does not heal.
        case "XX001", "XX002": return .damaged
        // The statement's own data was refused: too big (54000 program_limit_exceeded).
        case "54000": return .rejectedWrite
        // 40001 serialization_failure, 40P01 deadlock_detected, 55P03 lock_not_available.
        case "40001", "40P01", "55P03": return .busy
        default:
            // Class 23, a constraint; class 22, a value out of range or malformed: the statement's own data.
            return sqlState.hasPrefix("23") || sqlState.hasPrefix("22") ? .rejectedWrite : .other
        }
    }
    public var description: String { sqlState.map { "PostgreSQL error \($0): \(message)" } ?? "PostgreSQL: \(message)" }
}

/// When an operation on PostgreSQL must be over: every wait for the server in it ends by then.
struct Deadline {
    let instant: ContinuousClock.Instant
    /// The bound it was set with, for messages.
    let bound: Duration

    init(_ bound: Duration) {
        self.bound = bound
        instant = .now + bound
    }

    /// The same instant as a `Date`, for waits that take one.
    var date: Date { Date(timeIntervalSinceNow: ContinuousClock.now.duration(to: instant) / .seconds(1)) }

    /// The failure of a wait that `instant` ended; `waiting` says for what.
    func passed(_ waiting: String = "") -> PostgreSQLError {
        PostgreSQLError(
            sqlState: nil, message: "no answer within \(Int64(bound / .milliseconds(1))) ms\(waiting.isEmpty ? "" : " \(waiting)")",
            isConnectionLost: true, isTimedOut: true
        )
    }

    /// Waits until `socket` is ready for `events` (POLLIN, POLLOUT), or throws once the deadline has passed.
    func wait(_ socket: Int32, for events: Int32) throws(PostgreSQLError) {
        guard socket >= 0 else { throw .lost("the connection has no socket") }
        while true {
            let left = ContinuousClock.now.duration(to: instant)
            guard left > .zero else { throw passed() }
            var descriptor = pollfd(fd: socket, events: Int16(events), revents: 0)
            let ready = poll(&descriptor, 1, Int32((left / .milliseconds(1)).rounded(.up)))
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw .lost("poll: \(String(cString: strerror(errno)))") }
        }
    }
}

extension PostgreSQLError: StoreFailure {
    func storeError(doing what: String) -> StoreError {
        let code = sqlState.map(StoreError.Code.sqlState)
        if isConnectionLost { return StoreError("\(what): PostgreSQL is unreachable: \(message)", kind: kind, code: code) }
        return StoreError("\(what): \(message)\(code.map { " (\($0))" } ?? "")", kind: kind, code: code)
    }
}
