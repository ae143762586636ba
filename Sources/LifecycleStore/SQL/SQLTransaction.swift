import Foundation
import LifecycleKit

/// One write transaction, valid only inside its `write`. Writes wait in memory (reads look there first) until the commit,
/// an instance count on SQLite, or a delete; then they go as the driver batches them: on PostgreSQL one statement a table
/// over `unnest`, in one round trip with the COMMIT (two round trips a batch, not per event); on SQLite multi-row INSERTs.
final class SQLTransaction<Connection: SQLConnection>: StoreTransaction {
    let connection: Connection
    let startSequence: Int64
    /// The last sequence number assigned in this transaction.
    private(set) var sequence: Int64
    private let historyLimit: Int64
    /// How long an idempotency key outlives its instance's deletion (see ``Codec/StoredKey``).
    private let releasedKeyLifetime: TimeInterval
    /// When the newest idempotency key stored before keys were scoped was made (`nil`: none, and always on PostgreSQL).
    private let unscopedKeysThrough: Date?
    /// The count at the start, kept beside the data (PostgreSQL's `commit_counter`); `nil`: counted when asked.
    private let startInstanceCount: Int64?
    private(set) var instancesAdded: Int64 = 0
    /// The first statement that failed: PostgreSQL aborted the transaction there.
    private(set) var failure: Connection.Failure?
    /// Whether it may use the connection: not while it is staged (``InstanceStore/stage(after:)``),
    /// when the connection may be committing the transaction before it on another thread.
    private var isConnected: Bool
    /// Instances to write, newest state of each; `isNew` for those to insert.
    private var instances: [String: (instance: StoredInstance, isNew: Bool)] = [:]
    private var records: [[ColumnValue]] = []
    /// What the history limit drops of this transaction's instances; written when the writer's backlog is full
    /// (``closingStatements(after:)``), which then takes them (``RetentionBacklog/committed(_:)``).
    private(set) var drops = RetentionBacklog()
    private var keys: [String: Codec.StoredKey] = [:]
    /// Whether a key this transaction did not write is taken as unused without a read (``presumeKeysNew()``).
    private var presumesKeysNew = false
    /// Keys so taken whose writes were refused, not remembered: no INSERT checks them, so what waits is written only
    /// once the store is found not to hold them.
    private var presumedUnwritten: Set<String> = []
    /// Keys as read ahead (``readAhead(_:)``), `nil` where the store holds none: true only until the transaction writes
    /// (what waits is written, which may change them), when they are forgotten.
    private var keysRead: [String: Codec.StoredKey?] = [:]
    private var coverage = CoverageCounts()
    private var findings: [StoredFinding] = []
    private var findingInstances: [FindingInstance] = []
    /// What waited when ``prepareWrites()`` was called, as statements, to run before what waits since.
    private var prepared: [SQLStatement] = []

    init(
        _ connection: Connection, sequence: Int64, instanceCount: Int64?, historyLimit: Int, releasedKeyLifetime: TimeInterval,
        unscopedKeysThrough: Date? = nil, isConnected: Bool = true
    ) {
        self.connection = connection
        self.isConnected = isConnected
        startSequence = sequence
        self.sequence = sequence
        startInstanceCount = instanceCount
        self.historyLimit = Int64(historyLimit)
        self.releasedKeyLifetime = releasedKeyLifetime
        self.unscopedKeysThrough = unscopedKeysThrough
    }

    /// A staged transaction is committed: from now on it uses the connection (its writer holds it).
    func connect() {
        isConnected = true
    }

    /// Runs database work, keeping the first failure.
    private func run<T>(_ what: @autoclosure () -> String, _ body: () throws(Connection.Failure) -> T) throws(StoreError) -> T {
        guard isConnected else {
            throw StoreError("\(what()): a staged transaction reads nothing before the one before it commits; nothing was changed")
        }
        do {
            return try body()
        } catch {
            failure = failure ?? error
            throw StoreError(error, doing: what())
        }
    }

    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        let found = ids.compactMap { instances[$0]?.instance }
        let unwritten = ids.filter { instances[$0] == nil }
        return try found + run("cannot read instances") { () throws(Connection.Failure) in try connection.instances(unwritten) }
    }

    func instanceCount() throws(StoreError) -> Int {
        if let startInstanceCount { return Int(startInstanceCount + instancesAdded) }
        let statements = try waitingStatements()
        return try run("cannot count instances") { () throws(Connection.Failure) in
            try connection.run(statements)
            return try connection.instanceCount()
        }
    }

    func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
        // The primary key would refuse this, but the one multi-row insert would not see the second.
        guard instances[instance.id] == nil else {
            throw StoreError("cannot store instance \(instance.id): it exists already (within this transaction)", kind: .rejectedWrite)
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
        var statements = try waitingStatements() + [
            SQLStatement("DELETE FROM instances WHERE id = $1", [.text(instance.id)]),
            SQLStatement("DELETE FROM records WHERE instance = $1", [.text(instance.id)]),
            // Its findings keep counting it (history), but it has them no more: one made again under its id starts afresh.
            SQLStatement("DELETE FROM finding_instances WHERE instance = $1", [.text(instance.id)]),
            // Its keys outlive it a while, so a replay is refused, not applied to one made again under its id.
            SQLStatement("UPDATE idempotency SET released_at = $2 WHERE instance = $1 AND released_at IS NULL", [.text(instance.id), .integer(Codec.milliseconds(time))]),
        ]
        let deleted = statements.count - 4
        statements += Connection.inserting([Codec.tombstone(numbered, of: instance, at: time, json: encode(numbered))], into: .tombstones)
        // The deletion record expires: keep its number, the largest, from reuse.
        if Connection.dialect.keepsSequenceFloor { statements.append(SQLStatement(Connection.dialect.raising("sequence_floor"), [.integer(numbered)])) }
        let changed = try run("cannot delete instance \(instance.id)") { () throws(Connection.Failure) in try connection.run(statements) }
        instancesAdded -= Int64(changed[deleted])
        sequence = numbered
        return numbered
    }

    func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord {
        let (encoded, row) = Codec.numbered(record, sequence + 1, instance: instanceID, encode: encode)
        records.append(row)
        drops.passed(historyLimit, instance: instanceID, version: record.version, sequence: encoded.sequence)
        sequence = encoded.sequence
        return encoded
    }

    func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError) {
        keys[key.key] = Codec.StoredKey(fingerprint: key.fingerprint, write: write, releasedAt: nil)
        presumedUnwritten.remove(key.key)
    }

    func readAhead(_ keys: [IdempotencyKey]) throws(StoreError) {
        let unread = keys.map(\.key).filter { self.keys[$0] == nil && keysRead[$0] == nil }
        guard !unread.isEmpty else { return }
        for key in unread { keysRead[key] = .some(nil) }
        for (key, stored) in try stored(unread) { keysRead[key] = stored }
    }

    /// The keys named that the store holds: a statement per run of them where the dialect lists each, else one.
    private func stored(_ names: [String]) throws(StoreError) -> [(key: String, stored: Codec.StoredKey)] {
        let runs = Connection.dialect.maxListedValues.map { names.indices.powerOfTwoRuns(upTo: $0) } ?? [names.indices]
        return try run("cannot read idempotency keys") { () throws(Connection.Failure) in
            var found: [(key: String, stored: Codec.StoredKey)] = []
            for run in runs {
                var values: [ColumnValue] = []
                let condition = Connection.dialect.anyOf("key", Array(names[run]), &values)
                try connection.forEachRow("\(Codec.selectKeys) WHERE \(condition)", values) { (row) throws(Connection.Failure) in
                    let key = try row.columns(KeyColumn.self).text(.key, named: "idempotency.key")
                    found.append((key, try Codec.StoredKey(row, key: key)))
                }
            }
            return found
        }
    }

    func presumeKeysNew() {
        presumesKeysNew = true
    }

    func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
        func find(_ stored: String, presumingNew: Bool = false) throws(StoreError) -> Codec.StoredKey? {
            if let waiting = keys[stored] { return waiting }
            if presumingNew {
                // Its INSERT fails the transaction if the store holds it after all; unless its write is refused, and
                // then it is read before what waits is written (``waitingStatements()``).
                presumedUnwritten.insert(stored)
                return nil
            }
            if let read = keysRead[stored] { return read }
            return try run("cannot read an idempotency key") { () throws(Connection.Failure) in
                try connection.first(Codec.selectKey, [.text(stored)]) { (row) throws(Connection.Failure) in try Codec.StoredKey(row, key: stored) }
            }
        }
        // Only the key as sent is presumed new: one stored before keys were scoped is still read.
        var found = try find(key.key, presumingNew: presumesKeysNew)
        // A key sent before keys were scoped (on SQLite) is found as it was stored, until it expires (released when made).
        if found == nil, let unscoped = key.unscopedKey, let through = unscopedKeysThrough, through.addingTimeInterval(releasedKeyLifetime) > now {
            found = try find(unscoped)
        }
        return found?.lookUp(key, now: now, lifetime: releasedKeyLifetime) ?? .unused
    }

    func addCoverage(_ counts: CoverageCounts) throws(StoreError) {
        coverage.add(counts)
    }

    func findings(_ keys: [FindingKey]) throws(StoreError) -> [StoredFinding] {
        guard !keys.isEmpty else { return [] }
        return try run("cannot read findings") { () throws(Connection.Failure) in
            var values: [ColumnValue] = []
            let condition = Connection.dialect.anyOf("key", keys.map(\.stored), &values)
            return try connection.rows("\(Codec.selectFindings) WHERE \(condition)", values, Codec.finding)
        }
    }

    func findingInstances(of instances: [String]) throws(StoreError) -> Set<FindingInstance> {
        guard !instances.isEmpty else { return [] }
        return try run("cannot read findings' instances") { () throws(Connection.Failure) in
            var values: [ColumnValue] = []
            let condition = Connection.dialect.anyOf("instance", instances, &values)
            return Set(try connection.rows("\(Codec.selectFindingInstances) WHERE \(condition)", values, Codec.findingInstance))
        }
    }

    func storeFindings(_ findings: [StoredFinding], instances: [FindingInstance]) throws(StoreError) {
        self.findings += findings
        findingInstances += instances
    }

    func prepareWrites() throws(StoreError) {
        prepared += try statementsForWaiting()
    }

    /// Statements (one a table on PostgreSQL) that write what waits, which then waits no more.
    func waitingStatements() throws(StoreError) -> [SQLStatement] {
        if !presumedUnwritten.isEmpty {
            let held = try stored(Array(presumedUnwritten))
            presumedUnwritten = []
            if let (key, _) = held.first {
                throw StoreError("idempotency key \(key) was presumed new, but it is stored: its write was decided wrongly", kind: .rejectedWrite)
            }
        }
        defer { prepared = [] }
        return try prepared + statementsForWaiting()
    }

    /// What waits, then what the history limit drops now with the writer's `backlog`: what goes before the COMMIT.
    func closingStatements(after backlog: RetentionBacklog) throws(StoreError) -> [SQLStatement] {
        try waitingStatements() + Connection.dropping(backlog.due(with: drops))
    }

    /// What waits, as statements, in the order they run; it then waits no more.
    private func statementsForWaiting() throws(StoreError) -> [SQLStatement] {
        var statements: [SQLStatement] = []
        let new = try instances.values.filter(\.isNew).map { (waiting) throws(StoreError) in try Codec.columns(of: waiting.instance) }
        let changed = try instances.values.filter { !$0.isNew }.map { (waiting) throws(StoreError) in try Codec.columns(of: waiting.instance) }
        if !new.isEmpty { statements += Connection.inserting(new, into: Connection.dialect.instances) }
        if !changed.isEmpty { statements += Connection.updating(instances: changed) }
        if !records.isEmpty { statements += Connection.inserting(records, into: .records) }
        if !keys.isEmpty {
            let now = Date()
            let rows = keys.map { Codec.key($0.key, fingerprint: $0.value.fingerprint, $0.value.write, at: now) }
            statements += Connection.inserting(rows, into: presumesKeysNew ? .newKeys : .keys)
        }
        if !coverage.isEmpty { statements += Connection.inserting(Codec.counters(coverage), into: .coverage) }
        if !findings.isEmpty { statements += Connection.inserting(findings.map(Codec.columns), into: .findings) }
        if !findingInstances.isEmpty {
            statements += Connection.inserting(findingInstances.map(Codec.findingInstance), into: .findingInstances)
        }
        (instances, records, keys, keysRead, coverage, findings, findingInstances) = ([:], [], [:], [:], CoverageCounts(), [], [])
        return statements
    }
}
