import Foundation
import LifecycleKit

/// A statement and the values bound to its `$1`, `$2`, ...
struct SQLStatement {
    var sql: String
    var values: [ColumnValue]

    init(_ sql: String, _ values: [ColumnValue] = []) {
        self.sql = sql
        self.values = values
    }
}

/// A connection as the store's shared reads and transaction use it: SQLite's and libpq's each implement it, with
/// what they spell differently as data (``SQLDialect``) and how they write many rows at once.
protocol SQLConnection: AnyObject {
    associatedtype Row: StoredRow & SendableMetatype where Row.Failure == Failure
    associatedtype Failure: StoreFailure
    static var dialect: SQLDialect { get }
    /// Runs `sql` with `values` bound to `$1`, `$2`, ..., calling `body` with each row in order.
    func forEachRow(_ sql: String, _ values: [ColumnValue], _ body: (Row) throws(Failure) -> Void) throws(Failure)
    /// Runs `sql` without values: a script of statements on SQLite, one statement on PostgreSQL (a migration's).
    func executeScript(_ sql: String) throws(Failure)
    /// The failure of a database this lifecycled will not open, its schema not one it knows.
    static func refusal(_ message: String) -> Failure
    /// Runs `statements` in order (PostgreSQL: in one round trip), the first failure skipping the rest; the rows each changed.
    @discardableResult
    func run(_ statements: [SQLStatement]) throws(Failure) -> [Int]
    /// Statements that insert `rows` (at least one) into `table`: one over `unnest` on PostgreSQL, multi-row INSERTs on SQLite.
    static func inserting(_ rows: [[ColumnValue]], into table: SQLTable) -> [SQLStatement]
    /// Statements that store the state of existing instances (their codec rows).
    static func updating(instances rows: [[ColumnValue]]) -> [SQLStatement]
    /// Statements that delete the rows of `table` meeting `condition`, raising `meta.dropped_through` to the largest `seq` deleted.
    static func deleting(from table: String, where condition: String, _ values: [ColumnValue]) -> [SQLStatement]
    /// Statements that drop the records each drop names (the history limit's, ``RetentionBacklog``); none for none.
    static func dropping(_ drops: [String: RetentionBacklog.Drop]) -> [SQLStatement]
}

/// What SQLite and PostgreSQL spell differently in the statements the store shares.
struct SQLDialect: Sendable {
    /// The instance columns (``InstanceColumn``) in SQL; `window` is a keyword in PostgreSQL.
    let instanceColumnNames: [String]
    let instanceColumns: String
    let instances: SQLTable
    let selectInstances: String
    /// `max` in SQLite, `greatest` in PostgreSQL.
    let greatest: String
    /// Whether deletes keep their number in `meta.sequence_floor` (SQLite); PostgreSQL keeps it in `commit_counter`.
    let keepsSequenceFloor: Bool
    /// A condition that `column` is one of `values`, binding them after `bindings`: PostgreSQL binds one array, SQLite each.
    let anyOf: @Sendable (_ column: String, _ values: [String], _ bindings: inout [ColumnValue]) -> String
    /// The most values a read-ahead lists in one ``anyOf`` (a power of two), where its text grows with them (SQLite);
    /// `nil` where it does not (PostgreSQL's one array): any number, in one statement.
    let maxListedValues: Int?
    /// The integer schema version (one row, one column; none: 0), which lifecycled kept before it recorded migrations' names.
    let schemaVersion: String
    /// The statement that sets the integer schema version.
    let settingSchemaVersion: @Sendable (Int) -> String
    /// The names of the columns of the table `$1`.
    let tableColumns: String

    init(
        window: String, greatest: String, keepsSequenceFloor: Bool, schemaVersion: String, settingSchemaVersion: @escaping @Sendable (Int) -> String,
        tableColumns: String, maxListedValues: Int?, anyOf: @escaping @Sendable (String, [String], inout [ColumnValue]) -> String
    ) {
        instanceColumnNames = InstanceColumn.allCases.map { $0 == .window ? window : $0.name }
        instanceColumns = instanceColumnNames.joined(separator: ", ")
        instances = SQLTable(name: InstanceColumn.table, names: instanceColumnNames)
        selectInstances = "SELECT \(instanceColumns) FROM instances"
        self.greatest = greatest
        self.keepsSequenceFloor = keepsSequenceFloor
        self.anyOf = anyOf
        self.maxListedValues = maxListedValues
        self.schemaVersion = schemaVersion
        self.settingSchemaVersion = settingSchemaVersion
        self.tableColumns = tableColumns
    }

    /// Raises the `meta` value `key` to `$1` if it is lower.
    func raising(_ key: String) -> String {
        "INSERT INTO meta (key, value) VALUES ('\(key)', $1) ON CONFLICT (key) DO UPDATE SET value = \(greatest)(meta.value, excluded.value)"
    }
}

/// A table the transaction inserts rows of, and what a row does to one already stored with its key.
struct SQLTable: Sendable {
    let name: String
    /// Its columns in SQL (those of a ``TableColumn``), in the order the codec's rows hold them.
    let names: [String]
    let columns: String
    let onConflict: String
    /// The INSERTs of 1, 2, 4, ... rows as one `VALUES` list each (index n: 2^n rows), up to ``maxRowsAStatement``.
    private let insertingRows: [String]

    /// The most rows one multi-row INSERT writes: the largest power of two whose values stay within 999 (the lowest
    /// limit on bound values an SQLite build may have), at most 128 (more saves little once the statement is running).
    var maxRowsAStatement: Int { 1 << (insertingRows.count - 1) }

    init(name: String, names: [String], onConflict: String = "") {
        self.name = name
        self.names = names
        columns = names.joined(separator: ", ")
        self.onConflict = onConflict
        var statements: [String] = []
        var rows = 1
        while rows <= 128, rows * names.count <= 999 {
            let values = (0..<rows).map { row in "(" + names.indices.map { "$\(row * names.count + $0 + 1)" }.joined(separator: ", ") + ")" }
            statements.append("INSERT INTO \(name) (\(columns)) VALUES \(values.joined(separator: ", ")) \(onConflict)")
            rows *= 2
        }
        insertingRows = statements
    }

    /// Statements that insert `rows` as multi-row INSERTs, as few as the statements' sizes allow: a run of each size
    /// (a power of two, largest first) is one statement, so that each text is prepared once, however many rows come.
    func inserting(_ rows: [[ColumnValue]]) -> [SQLStatement] {
        rows.indices.powerOfTwoRuns(upTo: maxRowsAStatement).map { run in
            // Row by row into room made once: a joined sequence is copied value by value.
            var values: [ColumnValue] = []
            values.reserveCapacity(run.count * (rows[run.lowerBound].count))
            for row in rows[run] { values += row }
            return SQLStatement(insertingRows[run.count.trailingZeroBitCount], values)
        }
    }

    init<Column: TableColumn>(_ columns: Column.Type, onConflict: String = "") {
        self.init(name: Column.table, names: Column.names, onConflict: onConflict)
    }

    static let records = SQLTable(RecordColumn.self)
    static let tombstones = SQLTable(TombstoneColumn.self)
    static let keys = SQLTable(
        KeyColumn.self,
        onConflict: """
            ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, result = excluded.result, instance = excluded.instance,
              model = excluded.model, instance_created_at = excluded.instance_created_at, body = excluded.body, created_at = excluded.created_at,
              released_at = NULL
            """
    )
    /// Keys presumed new (``StoreTransaction/presumeKeysNew()``): one the store holds already fails the INSERT.
    static let newKeys = SQLTable(KeyColumn.self)
    static let findings = SQLTable(
        FindingColumn.self,
        onConflict: """
            ON CONFLICT (key) DO UPDATE SET count = excluded.count, instances = excluded.instances, first_seen = excluded.first_seen,
              last_seen = excluded.last_seen, examples = excluded.examples
            """
    )
    static let findingInstances = SQLTable(FindingInstanceColumn.self, onConflict: "ON CONFLICT (instance, signature) DO NOTHING")
    static let coverage = SQLTable(
        CoverageColumn.self, onConflict: "ON CONFLICT (model, kind, name) DO UPDATE SET count = coverage.count + excluded.count"
    )
}

extension Range<Int> {
    /// The range cut into consecutive runs whose lengths are powers of two: as many of `limit` (a power of two) as fit,
    /// then the rest by its binary digits, largest first (1,000 by 128: 7 of 128, then 64, 32, 8). Statements made per
    /// run length are then few: each is prepared once.
    func powerOfTwoRuns(upTo limit: Int) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var start = lowerBound
        var length = limit
        while start < upperBound {
            while length > upperBound - start { length /= 2 }
            runs.append(start..<start + length)
            start += length
        }
        return runs
    }
}

extension SQLConnection {
    /// Every row's reading. `expected`: about how many rows there will be, so that a million are
    /// read into one array rather than copied through ever larger ones.
    func rows<T>(_ sql: String, _ values: [ColumnValue] = [], expected: Int = 0, _ read: (Row) throws(Failure) -> T) throws(Failure) -> [T] {
        var found: [T] = []
        found.reserveCapacity(expected)
        try forEachRow(sql, values) { (row) throws(Failure) in found.append(try read(row)) }
        return found
    }

    /// The first row's reading, or `nil` when there is no row.
    func first<T>(_ sql: String, _ values: [ColumnValue] = [], _ read: (Row) throws(Failure) -> T) throws(Failure) -> T? {
        try rows(sql, values, read).first
    }

    /// The committed state (with the transaction's writes, in one) of the instances named that exist.
    func instances(_ ids: [String]) throws(Failure) -> [StoredInstance] {
        guard !ids.isEmpty else { return [] }
        var values: [ColumnValue] = []
        let condition = Self.dialect.anyOf("id", ids, &values)
        return try rows("\(Self.dialect.selectInstances) WHERE \(condition)", values, Codec.instance)
    }

    /// Up to `limit` instances after `after`, in id order; `expected` as for ``rows(_:_:expected:_:)``.
    func instances(after: String, limit: Int64, expected: Int = 0) throws(Failure) -> [StoredInstance] {
        var found: [StoredInstance] = []
        found.reserveCapacity(expected)
        try forEachInstance(after: after, limit: limit) { found.append($0) }
        return found
    }

    /// Instances after `after` in id order, at most `limit`, each handed to `body` as it is read;
    /// `descending`: from the greatest id down.
    func forEachInstance(after: String, limit: Int64, descending: Bool = false, _ body: (StoredInstance) -> Void) throws(Failure) {
        var labels = LabelDecoder()
        let order = descending ? "id DESC" : "id"
        try forEachRow("\(Self.dialect.selectInstances) WHERE id > $1 ORDER BY \(order) LIMIT $2", [.text(after), .integer(limit)]) {
            (row) throws(Failure) in body(try Codec.instance(row, labels: &labels))
        }
    }

    /// How many instances there are.
    func instanceCount() throws(Failure) -> Int {
        try first("SELECT count(*) FROM instances") { Int($0.integer(0)) } ?? 0
    }

    func coverage() throws(Failure) -> CoverageCounts {
        var counts = CoverageCounts()
        try forEachRow(Codec.selectCoverage, []) { (row) throws(Failure) in try Codec.addCounter(row, to: &counts) }
        return counts
    }

    func storedFindings() throws(Failure) -> StoredFindings {
        StoredFindings(
            findings: try rows(Codec.selectFindings, [], Codec.finding),
            instances: try rows(Codec.selectFindingInstances, [], Codec.findingInstance)
        )
    }

    /// An instance's records (divergent ones only, if asked) after the version of the record `$2` names (not from the
    /// beginning), within `$3` rows: one more than the page holds says whether more follow.
    static func historyRange(divergentOnly: Bool) -> String {
        """
        FROM records WHERE instance = $1 AND version > coalesce((SELECT version FROM records WHERE seq = $2 AND instance = $1), 0)
          AND seq > $2\(divergentOnly ? " AND divergent" : "") ORDER BY instance, version LIMIT $3
        """
    }

    /// The oldest record of an instance still kept; version 0 is the creation record, which is not history.
    static var historyOldest: String { "SELECT \(Codec.oldestColumns) FROM records WHERE instance = $1 AND version > 0 ORDER BY instance, version LIMIT 1" }
    /// Rows a replay page examines without an instance filter: a rare filter costs a bounded scan a page.
    static var replayScanRows: Int64 { 8192 }

    /// The replay's SELECT (``ReplayColumn``) of records in (`$1`, `$2`] that pass `filter`,
    /// and of deletion records unless outcomes or divergent records are asked for, within `$3` rows; its values; the last number it examines.
    static func replaySelect(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) -> (sql: String, values: [ColumnValue], upper: Int64) {
        // With an instance filter the index finds the records, however far apart.
        let upper = filter.instances == nil ? min(through, after + replayScanRows) : through
        var values: [ColumnValue] = [.integer(after), .integer(upper), .integer(Int64(limit.records))]
        var records = ""
        var tombstones = ""
        if let instances = filter.instances {
            let condition = " AND " + dialect.anyOf("instance", instances.sorted(), &values)
            records += condition
            tombstones += condition
        }
        if let model = filter.model {
            values.append(.text(model))
            records += " AND (SELECT model FROM instances WHERE id = records.instance) = $\(values.count)"
            tombstones += " AND model = $\(values.count)"
        }
        if filter.divergentOnly { records += " AND divergent" }
        var sql = """
            SELECT seq, kind, body, instance, outcome, (SELECT model FROM instances WHERE id = records.instance) AS model, divergent
            FROM records WHERE seq > $1 AND seq <= $2\(records)
            """
        if let outcomes = filter.outcomes {
            // Codes, not client text: safe to write into the statement.
            sql += " AND outcome IN (\(outcomes.map { String($0.storedCode) }.sorted().joined(separator: ", ")))"
        } else if !filter.divergentOnly {
            sql += "\nUNION ALL SELECT seq, \(RecordKind.deleted.rawValue), body, instance, NULL, model, NULL FROM tombstones WHERE seq > $1 AND seq <= $2\(tombstones)"
        }
        return (sql + " ORDER BY 1 LIMIT $3", values, upper)
    }

    /// The replay's bounds (``BoundsColumn``): `meta.dropped_through` (0 if none), the oldest record, the oldest deletion record.
    static var replayBounds: String {
        """
        (SELECT coalesce(max(value), 0) FROM meta WHERE key = 'dropped_through') AS dropped_through,
        (SELECT min(seq) FROM records) AS oldest_record, (SELECT min(seq) FROM tombstones) AS oldest_tombstone
        """
    }

    /// Statements that drop expired deletion records, raising the floor of dropped records, and the idempotency keys
    /// their instances released (see ``Codec/StoredKey``), which expire with them.
    static func purgingExpired(tombstoneLifetime: TimeInterval) -> [SQLStatement] {
        let cutoff: [ColumnValue] = [.integer(Codec.milliseconds(Date().addingTimeInterval(-tombstoneLifetime)))]
        return [SQLStatement("DELETE FROM idempotency WHERE released_at < $1", cutoff)] + deleting(from: "tombstones", where: "deleted_at < $1", cutoff)
    }
}
