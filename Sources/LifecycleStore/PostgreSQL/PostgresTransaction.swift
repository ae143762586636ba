import Foundation
import LifecycleKit

/// One write transaction's view of a ``PostgresStore``; valid only inside its `write`. Writes
/// wait in memory (reads look there first) until the COMMIT or a delete, then go as one
/// statement per table over `unnest` in one round trip: two round trips a batch, not per event.
final class PostgresTransaction: StoreTransaction {
    let connection: Connection
    let options: PostgresStore.Options
    let startSequence: Int64
    /// The last sequence number assigned in this transaction.
    private(set) var sequence: Int64
    private let startInstanceCount: Int64
    private var instancesAdded: Int64 = 0
    /// The first statement that failed: PostgreSQL aborted the transaction there.
    private(set) var failure: PostgreSQLError?

    /// Instances to write, newest state of each; `isNew` for those to insert.
    private var instances: [String: (instance: StoredInstance, isNew: Bool)] = [:]
    /// Records to insert (the codec's columns), in the order they were numbered.
    private var records: [[ColumnValue]] = []
    /// Per instance, the newest version the history limit drops (with all before it).
    private var drops: [String: Int64] = [:]
    /// Idempotency keys to store, by key.
    private var keys: [String: Codec.StoredKey] = [:]

    init(connection: Connection, options: PostgresStore.Options, sequence: Int64, instanceCount: Int64) {
        self.connection = connection
        self.options = options
        startSequence = sequence
        self.sequence = sequence
        startInstanceCount = instanceCount
    }

    /// Runs statements, keeping the first failure (which aborts the transaction).
    private func run(_ what: @autoclosure () -> String, _ statements: [Connection.Statement]) throws(StoreError) -> [QueryResult] {
        do {
            return try connection.execute(statements)
        } catch {
            failure = failure ?? error
            throw StoreError(error, doing: what())
        }
    }

    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        var found = ids.compactMap { instances[$0]?.instance }
        let unwritten = ids.filter { instances[$0] == nil }
        guard !unwritten.isEmpty else { return found }
        let rows = try run("cannot read instances", [Connection.Statement(PostgresStore.selectInstances, [.texts(unwritten)])])[0].rows
        found += try checked("cannot read instances") { () throws(PostgreSQLError) in try rows.map(Codec.instance) }
        return found
    }

    func instanceCount() throws(StoreError) -> Int { Int(startInstanceCount + instancesAdded) }

    func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
        // The primary key would refuse this, but the one multi-row insert would not see the second.
        guard instances[instance.id] == nil else {
            throw StoreError("cannot store instance \(instance.id): it exists already (within this transaction)", isSpecificToWrite: true)
        }
        let numbered = sequence + 1
        instances[instance.id] = (instance, true)
        records.append(Codec.record(numbered, instance: instance.id, version: 0, kind: .created, outcome: nil, json: encode(numbered)))
        instancesAdded += 1
        sequence = numbered
        return numbered
    }

    func update(_ instance: StoredInstance) throws(StoreError) {
        instances[instance.id] = (instance, instances[instance.id]?.isNew ?? false)
    }

    func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
        let numbered = sequence + 1
        // What waits may concern this instance: it goes first, and the delete takes it along.
        let statements = try waitingStatements() + [
            Connection.Statement("DELETE FROM instances WHERE id = $1", [.text(instance.id)]),
            Connection.Statement("DELETE FROM records WHERE instance = $1", [.text(instance.id)]),
            Connection.Statement(
                "INSERT INTO tombstones (seq, instance, model, deleted_at, body) VALUES ($1, $2, $3, $4, $5)",
                Codec.tombstone(numbered, of: instance, at: time, json: encode(numbered)).map(Connection.Parameter.init)
            ),
        ]
        let results = try run("cannot delete instance \(instance.id)", statements)
        instancesAdded -= Int64(results[statements.count - 3].changedRows)
        sequence = numbered
        return numbered
    }

    func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord {
        let (encoded, row) = Codec.numbered(record, sequence + 1, instance: instanceID, encode: encode)
        records.append(row)
        let limit = Int64(options.historyLimit)
        if record.version > limit { drops[instanceID] = max(drops[instanceID] ?? 0, record.version - limit) }
        sequence = encoded.sequence
        return encoded
    }

    func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError) {
        keys[key.key] = Codec.StoredKey(fingerprint: key.fingerprint, write: write, createdAt: Date())
    }

    /// Keys on PostgreSQL were always stored scoped: ``IdempotencyKey/unscopedKey`` is never looked up.
    func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
        let what = "cannot read an idempotency key"
        var stored = keys[key.key]
        if stored == nil {
            let sql = "SELECT fingerprint, result, instance, model, instance_created_at, body, created_at FROM idempotency WHERE key = $1"
            guard let row = try run(what, [Connection.Statement(sql, [.text(key.key)])])[0].rows.first else { return .unused }
            stored = try checked(what) { () throws(PostgreSQLError) in try Codec.StoredKey(row, key: key.key) }
        }
        return stored?.lookUp(key, now: now, lifetime: options.idempotencyLifetime) ?? .unused
    }

    func addCoverage(_ counts: CoverageCounts) throws(StoreError) {
        guard !counts.isEmpty else { return }
        let sql = """
            INSERT INTO coverage (model, kind, name, count)
            SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[])
            ON CONFLICT (model, kind, name) DO UPDATE SET count = coverage.count + excluded.count
            """
        _ = try run("cannot count coverage", [Connection.Statement(sql, Connection.Parameter.columns(Codec.counters(counts)))])
    }

    /// Multi-row statements over `unnest` (one array parameter per column) for instances.
    private static let insertInstances = "INSERT INTO instances (\(PostgresStore.instanceColumns)) SELECT * FROM unnest(\(PostgresStore.instanceArrays))"
    private static let updateInstances = """
        UPDATE instances SET \(PostgresStore.instanceColumnNames.dropFirst().map { "\($0) = u.\($0)" }.joined(separator: ", "))
        FROM unnest(\(PostgresStore.instanceArrays)) AS u(\(PostgresStore.instanceColumns)) WHERE instances.id = u.id
        """

    /// Statements (at most one a table) that write what waits, which then waits no more.
    private func waitingStatements() throws(StoreError) -> [Connection.Statement] {
        var statements: [Connection.Statement] = []
        let new = instances.values.filter(\.isNew).map(\.instance)
        let changed = instances.values.filter { !$0.isNew }.map(\.instance)
        instances = [:]
        for (sql, group) in [(Self.insertInstances, new), (Self.updateInstances, changed)] where !group.isEmpty {
            let rows = try group.map { (instance) throws(StoreError) in try Codec.columns(of: instance) }
            statements.append(Connection.Statement(sql, Connection.Parameter.columns(rows)))
        }
        if !records.isEmpty {
            statements.append(Connection.Statement(
                """
                INSERT INTO records (seq, instance, version, kind, outcome, body)
                SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
                """,
                Connection.Parameter.columns(records)
            ))
            records = []
        }
        if !drops.isEmpty {
            // After the records, so that this transaction's own below the limit go too.
            statements.append(Connection.Statement(
                PostgresStore.raisingDroppedFloor("""
                    DELETE FROM records USING unnest($1::text[], $2::bigint[]) AS d(instance, through)
                    WHERE records.instance = d.instance AND records.version <= d.through RETURNING records.seq
                    """),
                [.texts(drops.map(\.key)), .integers(drops.map(\.value))]
            ))
            drops = [:]
        }
        if !keys.isEmpty {
            statements.append(Connection.Statement(
                """
                INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
                SELECT * FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bytea[], $8::bigint[])
                ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, result = excluded.result,
                  instance = excluded.instance, model = excluded.model, instance_created_at = excluded.instance_created_at,
                  body = excluded.body, created_at = excluded.created_at
                """,
                Connection.Parameter.columns(keys.map { Codec.key($0.key, fingerprint: $0.value.fingerprint, $0.value.write, at: $0.value.createdAt) })
            ))
            keys = [:]
        }
        return statements
    }

    /// What goes before the COMMIT: what waits, now and then a purge, and the counter with a notification.
    func closingStatements(purging: Bool) throws(StoreError) -> [Connection.Statement] {
        var statements = try waitingStatements()
        if purging { statements += PostgresStore.purgeExpired(options: options) }
        if sequence != startSequence {
            statements.append(Connection.Statement(
                """
                WITH counted AS (UPDATE commit_counter SET last_sequence = $1, instance_count = $2 WHERE id = 1)
                SELECT pg_notify('\(PostgresStore.channel)', '')
                """,
                [.integer(sequence), .integer(startInstanceCount + instancesAdded)]
            ))
        }
        return statements
    }
}
