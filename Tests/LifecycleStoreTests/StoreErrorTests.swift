import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// Each driver's codes in, the kind a caller switches over out: the one mapping per driver,
/// without a database (but for one SQLite failure, to see that extended codes come through).
@Suite("store errors: each driver's codes as a kind", .sqliteOnly("a mapping; opens no server"))
struct StoreErrorTests {
    /// An SQLite extended result code (the C header's name, since Swift does not import the
    /// extended ones) and the kind it means.
    struct SQLiteCase: Sendable, CustomTestStringConvertible {
        var name: String
        var code: Int32
        var kind: StoreError.Kind
        var testDescription: String { "\(name) (\(code)) is \(kind)" }
    }

    static let sqliteCases = [
        SQLiteCase(name: "SQLITE_CONSTRAINT_UNIQUE", code: 2067, kind: .rejectedWrite),
        SQLiteCase(name: "SQLITE_CONSTRAINT_NOTNULL", code: 1299, kind: .rejectedWrite),
        SQLiteCase(name: "SQLITE_CONSTRAINT_TRIGGER", code: 1811, kind: .rejectedWrite),
        SQLiteCase(name: "SQLITE_TOOBIG", code: 18, kind: .rejectedWrite),
        SQLiteCase(name: "SQLITE_MISMATCH", code: 20, kind: .rejectedWrite),
        SQLiteCase(name: "SQLITE_FULL", code: 13, kind: .diskFull),
        SQLiteCase(name: "SQLITE_CORRUPT", code: 11, kind: .damaged),
        SQLiteCase(name: "SQLITE_CORRUPT_INDEX", code: 779, kind: .damaged),
        SQLiteCase(name: "SQLITE_NOTADB", code: 26, kind: .damaged),
        SQLiteCase(name: "SQLITE_BUSY", code: 5, kind: .busy),
        SQLiteCase(name: "SQLITE_BUSY_SNAPSHOT", code: 517, kind: .busy),
        SQLiteCase(name: "SQLITE_LOCKED", code: 6, kind: .busy),
        SQLiteCase(name: "SQLITE_ERROR", code: 1, kind: .other),
        SQLiteCase(name: "SQLITE_IOERR_FSYNC", code: 1034, kind: .other),
        SQLiteCase(name: "SQLITE_CANTOPEN", code: 14, kind: .other),
        SQLiteCase(name: "SQLITE_READONLY", code: 8, kind: .other),
    ]

    @Test("an SQLite result code", arguments: sqliteCases)
    func sqlite(_ given: SQLiteCase) {
        let error = StoreError(SQLiteError(code: given.code, message: "m"), doing: "w")
        #expect(error.kind == given.kind)
        #expect(error.code == .sqlite(given.code))
        #expect(!error.isOutcomeUnknown)
        #expect(error.message == "w: m (SQLite code \(given.code))")
    }

    @Test("a UNIQUE violation in SQLite comes with its extended code, refusing the write alone")
    func sqliteConstraint() throws {
        let database = try Database(path: ":memory:")
        try database.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)")
        try database.execute("INSERT INTO t VALUES (1)")
        let failure = #expect(throws: SQLiteError.self) { try database.execute("INSERT INTO t VALUES (1)") }
        let error = try #require(failure.map { StoreError($0, doing: "w") })
        #expect(error.kind == .rejectedWrite)
        #expect(error.code == .sqlite(1555), "SQLITE_CONSTRAINT_PRIMARYKEY")
    }

    /// A SQLSTATE (or none), whether the connection was lost, and the kind they mean.
    struct PostgreSQLCase: Sendable, CustomTestStringConvertible {
        var sqlState: String?
        var isConnectionLost = false
        var kind: StoreError.Kind
        var testDescription: String { "\(sqlState ?? "no SQLSTATE")\(isConnectionLost ? ", connection lost," : "") is \(kind)" }
    }

    static let postgresCases = [
        PostgreSQLCase(sqlState: "23505", kind: .rejectedWrite),  // unique_violation
        PostgreSQLCase(sqlState: "23502", kind: .rejectedWrite),  // not_null_violation
        PostgreSQLCase(sqlState: "23514", kind: .rejectedWrite),  // check_violation
        PostgreSQLCase(sqlState: "22001", kind: .rejectedWrite),  // string_data_right_truncation
        PostgreSQLCase(sqlState: "22P02", kind: .rejectedWrite),  // invalid_text_representation
        PostgreSQLCase(sqlState: "54000", kind: .rejectedWrite),  // program_limit_exceeded
        PostgreSQLCase(sqlState: "53100", kind: .diskFull),  // disk_full
        PostgreSQLCase(sqlState: "53200", kind: .other),  // out_of_memory
        PostgreSQLCase(sqlState: "53300", kind: .other),  // too_many_connections
        PostgreSQLCase(sqlState: "XX001", kind: .damaged),  // data_corrupted
        PostgreSQLCase(sqlState: "XX002", kind: .damaged),  // index_corrupted
        PostgreSQLCase(sqlState: "XX000", kind: .other),  // internal_error
        PostgreSQLCase(sqlState: "40001", kind: .busy),  // serialization_failure
        PostgreSQLCase(sqlState: "40P01", kind: .busy),  // deadlock_detected
        PostgreSQLCase(sqlState: "55P03", kind: .busy),  // lock_not_available
        PostgreSQLCase(sqlState: "42P01", kind: .other),  // undefined_table
        PostgreSQLCase(sqlState: nil, kind: .other),
        PostgreSQLCase(sqlState: nil, isConnectionLost: true, kind: .unavailable),
        PostgreSQLCase(sqlState: "57P01", isConnectionLost: true, kind: .unavailable),  // admin_shutdown
        PostgreSQLCase(sqlState: "53100", isConnectionLost: true, kind: .unavailable),
    ]

    @Test("a PostgreSQL SQLSTATE, or a lost connection", arguments: postgresCases)
    func postgres(_ given: PostgreSQLCase) {
        let error = StoreError(PostgreSQLError(sqlState: given.sqlState, message: "m", isConnectionLost: given.isConnectionLost), doing: "w")
        #expect(error.kind == given.kind)
        #expect(error.code == given.sqlState.map(StoreError.Code.sqlState))
        #expect(!error.isOutcomeUnknown, "only a lost COMMIT leaves the outcome unknown")
        if given.isConnectionLost {
            #expect(error.message == "w: PostgreSQL is unreachable: m")
        } else {
            #expect(error.message == "w: m\(given.sqlState.map { " (SQLSTATE \($0))" } ?? "")")
        }
    }

    @Test("a PostgreSQL wait past its deadline: the connection is given up, so unavailable")
    func postgresTimeout() {
        let error = StoreError(Deadline(.milliseconds(5)).passed("reading"), doing: "w")
        #expect(error.kind == .unavailable && error.code == nil)
        #expect(error.message == "w: PostgreSQL is unreachable: no answer within 5 ms reading")
    }
}
