import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// The codec reads SQLite's rows and libpq's results alike: a stored value no lifecycled
/// writes is refused with the same words through either, as each store's damage error.
@Suite("finding signatures")
struct FindingSignatureTests {
    /// How signatures were escaped before the fast path (through the scalar's general category):
    /// stored findings are keyed by them, so the bytes must not change.
    private static func reference(_ part: String) -> String {
        var escaped = ""
        for scalar in part.unicodeScalars {
            if scalar == "%" || scalar == ":" || scalar.properties.generalCategory == .control {
                for byte in String(scalar).utf8 { escaped += String(format: "%%%02X", byte) }
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    @Test("parts are escaped exactly as before: %, : and every control character, by their UTF-8 bytes")
    func escapedAsBefore() {
        #expect(FindingSubject.escaped("didBecomeActive") == "didBecomeActive")
        #expect(FindingSubject.escaped("a:b%c") == "a%3Ab%25c")
        #expect(FindingSubject.escaped("line\nbreak\u{7F}\u{85}\u{A0}é🦆") == "line%0Abreak%7F%C2%85\u{A0}é🦆")
        var parts = (0..<0x800).compactMap(Unicode.Scalar.init).map { "x\(Character($0))y" }
        parts += ["", "🦆:%\u{9F}\u{1F}", "naïve state", "\u{200B}\u{FEFF}\u{2028}", "e\u{301}:\u{0}"]
        for part in parts {
            // Byte for byte: String's == would take canonically equivalent spellings as equal.
            #expect(Array(FindingSubject.escaped(part).utf8) == Array(Self.reference(part).utf8), "\(Array(part.unicodeScalars.map(\.value)))")
        }
    }

    @Test("the control characters are U+0000-U+001F and U+007F-U+009F, as the fast path assumes")
    func controlCharacters() {
        let controls = (0...0x10FFFF).compactMap(Unicode.Scalar.init).filter { $0.properties.generalCategory == .control }.map(\.value)
        #expect(controls == Array(0...0x1F) + Array(0x7F...0x9F))
    }
}

@Suite("store codec")
struct CodecTests {
    /// A row of a stored shape holding what no lifecycled writes, as each database selects it.
    struct Damage: Sendable, CustomTestStringConvertible {
        enum Shape: Sendable { case coverage, replay, key, instance }
        var shape: Shape
        var sqlite: String
        var postgres: String
        var message: String
        var testDescription: String { message }
    }

    static let damages = [
        Damage(
            shape: .coverage, sqlite: "SELECT 'm', 9, 'r1', 1", postgres: "SELECT 'm'::text, 9::bigint, 'r1'::text, 1::bigint",
            message: "a coverage counter has kind 9, which no lifecycled writes"
        ),
        Damage(
            shape: .replay, sqlite: "SELECT 7, 1, X'7B7D', 'a', 8, 'm'",
            postgres: "SELECT 7::bigint, 1::bigint, '\\x7b7d'::bytea, 'a'::text, 8::bigint, 'm'::text",
            message: "record 7 has outcome 8, which no lifecycled writes"
        ),
        Damage(
            shape: .key, sqlite: "SELECT 'k', X'00', 5, NULL, NULL, NULL, X'', 0, 0",
            postgres: "SELECT 'k'::text, '\\x00'::bytea, 5::bigint, NULL::text, NULL::text, NULL::bigint, ''::bytea, 0::bigint, 0::bigint",
            message: "idempotency key k has result 5, which no lifecycled writes"
        ),
        Damage(
            shape: .key, sqlite: "SELECT 'k', X'00', 0, 'a', 'm', NULL, X'', 0, 0",
            postgres: "SELECT 'k'::text, '\\x00'::bytea, 0::bigint, 'a'::text, 'm'::text, NULL::bigint, ''::bytea, 0::bigint, 0::bigint",
            message: "idempotency.instance_created_at of key k is NULL for a created instance: the database is damaged"
        ),
        Damage(
            shape: .instance, sqlite: "SELECT 'a', 'm', NULL, 1, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0",
            postgres: "SELECT 'a'::text, 'm'::text, NULL::text, 1::bigint, 0::bigint, NULL::text, NULL::text, NULL::text, false, "
                + "0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint",
            message: "instances.state of a is NULL, which the schema does not allow: the database is damaged"
        ),
    ]

    /// Decodes `row` as `shape` says.
    static func decode<Row: StoredRow>(_ shape: Damage.Shape, _ row: Row) throws(Row.Failure) {
        switch shape {
        case .coverage:
            var counts = CoverageCounts()
            try Codec.addCounter(row, to: &counts)
        case .replay: _ = try Codec.replayed(row)
        case .key: _ = try Codec.StoredKey(row, key: "k")
        case .instance: _ = try Codec.instance(row)
        }
    }

    @Test("a value no lifecycled writes, read from SQLite", arguments: damages)
    func sqlite(_ damage: Damage) throws {
        let database = try Database(path: ":memory:")
        var failure: SQLiteError?
        do {
            try database.prepare(damage.sqlite).forEachRow { (row) throws(SQLiteError) in try Self.decode(damage.shape, row) }
        } catch {
            failure = error
        }
        #expect(failure?.message == damage.message)
        #expect(failure?.kind == .damaged)
        #expect(failure.map { StoreError($0, doing: "read").kind } == .damaged)
    }

    @Test("the same value read from PostgreSQL", arguments: damages)
    func postgres(_ damage: Damage) throws {
        let connection = try Connection(url: try PostgresCluster.shared.makeDatabase(), deadline: Deadline(.seconds(10)))
        let rows = try connection.execute(damage.postgres).rows
        #expect(rows.count == 1)
        var failure: PostgreSQLError?
        do {
            for row in rows { try Self.decode(damage.shape, row) }
        } catch {
            failure = error
        }
        #expect(failure?.message == damage.message)
        #expect(failure?.sqlState == "XX001")
        #expect(failure.map { StoreError($0, doing: "read").kind } == .damaged)
    }
}
