import Foundation

/// The columns of one shape the codec writes or reads, in the one order its rows hold them: the cases, each `rawValue` its
/// position (fixed when compiled: no row looks a name up), each named in SQL as the case in snake_case (`launchCount`:
/// `launch_count`). A column is added by adding its case, its value where the codec writes the row (at the case's
/// position), its reading, and a migration; every statement names the columns from the cases.
protocol StoredColumn: RawRepresentable, CaseIterable, Sendable where RawValue == Int, AllCases == [Self] {}

/// The columns of a table; the start-up check (``SQLConnection/checkColumns()``) finds each in the database.
protocol TableColumn: StoredColumn {
    static var table: String { get }
}

extension StoredColumn {
    /// The column's SQL name. Built with statements once, never for a row.
    var name: String {
        String(describing: self).reduce(into: "") { name, character in
            if character.isUppercase { name += "_" + character.lowercased() } else { name.append(character) }
        }
    }

    static var names: [String] { allCases.map(\.name) }
    /// The names as a SELECT lists them, each after `prefix` (a table's or a subquery's name and a dot).
    static func list(_ prefix: String = "") -> String { names.map { prefix + $0 }.joined(separator: ", ") }
    /// Where the columns of a shape selected after these begin.
    static var end: Int { allCases.count }

    /// The values of one row to write, in the order of the cases. An array literal, not values placed by name, which made
    /// a batch's rows three times slower to build; the stores' round-trip tests read each back by name.
    @inline(__always)
    static func row(_ values: [ColumnValue]) -> [ColumnValue] {
        assert(values.count == allCases.count, "one value for each column of \(Self.self)")
        return values
    }
}

/// `instances`; PostgreSQL names `window` `window_name` (a keyword there), see ``SQLDialect``.
enum InstanceColumn: Int, TableColumn {
    case id, model, state, version, launchCount, bufferedAction, window, breadcrumbStep, sceneConnected, unexpected, ignored, incompleteLaunches,
        createdAt, updatedAt, divergences, dropped, labels
    static let table = "instances"
}

/// `records`: each applied input's record, and each creation record.
enum RecordColumn: Int, TableColumn {
    case seq, instance, version, kind, outcome, body, divergent
    static let table = "records"
}

/// `tombstones`: deletion records.
enum TombstoneColumn: Int, TableColumn {
    case seq, instance, model, deletedAt, body
    static let table = "tombstones"
}

/// `idempotency`: what each key's write did (see ``Codec/key(_:fingerprint:_:at:)``).
enum KeyColumn: Int, TableColumn {
    case key, fingerprint, result, instance, model, instanceCreatedAt, body, createdAt, releasedAt
    static let table = "idempotency"
}

/// `findings`: per signature and label, what the records add up to.
enum FindingColumn: Int, TableColumn {
    case key, signature, label, kind, model, state, aspect, name, count, instances, firstSeen, lastSeen, examples
    static let table = "findings"
}

/// `finding_instances`: which instances have which findings.
enum FindingInstanceColumn: Int, TableColumn {
    case instance, signature
    static let table = "finding_instances"
}

/// `coverage`: the coverage counters.
enum CoverageColumn: Int, TableColumn {
    case model, kind, name, count
    static let table = "coverage"
}

/// A replay's row (``SQLConnection/replaySelect(after:through:filter:limit:)``): a record's or a deletion record's.
enum ReplayColumn: Int, StoredColumn {
    case seq, kind, body, instance, outcome, model, divergent
}

/// The replay's bounds (``SQLConnection/replayBounds``).
enum BoundsColumn: Int, StoredColumn {
    case droppedThrough, oldestRecord, oldestTombstone
}

/// A history page's row: a record's number and JSON.
enum HistoryColumn: Int, StoredColumn {
    case seq, body
}

/// The oldest record an instance still has (``SQLConnection/historyOldest``).
enum OldestColumn: Int, StoredColumn {
    case version, seq
}

/// A row read through the columns of one shape, from `offset` on (where a statement selects two shapes side by side).
struct ColumnRow<Base: StoredRow, Column: StoredColumn> {
    let base: Base
    let offset: Int

    func isNull(_ column: Column) -> Bool { base.isNull(offset + column.rawValue) }
    func integer(_ column: Column) -> Int64 { base.integer(offset + column.rawValue) }
    func boolean(_ column: Column) -> Bool { base.boolean(offset + column.rawValue) }
    func text(_ column: Column) -> String? { base.text(offset + column.rawValue) }
    func text(_ column: Column, named name: @autoclosure () -> String) throws(Base.Failure) -> String { try base.text(offset + column.rawValue, named: name()) }
    func bytes(_ column: Column) -> [UInt8] { base.bytes(offset + column.rawValue) }
    func byteCount(_ column: Column) -> Int { base.byteCount(offset + column.rawValue) }
    func date(_ column: Column) -> Date { base.date(offset + column.rawValue) }
}

extension StoredRow {
    /// This row read by the columns of `shape`, which begin at `offset`.
    func columns<Column: StoredColumn>(_ shape: Column.Type, from offset: Int = 0) -> ColumnRow<Self, Column> {
        ColumnRow(base: self, offset: offset)
    }
}
