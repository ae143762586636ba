import Foundation
import LifecycleKit

/// One write transaction's view of an ``SQLiteStore``, valid inside its `write`: each write a statement at once.
final class SQLiteTransaction: StoreTransaction {
    private let statements: WriteStatements
    private let options: SQLiteStore.Options
    private let unscopedKeysThrough: Date?
    let startSequence: Int64
    /// The last sequence number assigned in this transaction.
    private(set) var sequence: Int64
    /// The largest sequence number the history limit dropped in this transaction.
    private var droppedThrough: Int64 = 0

    init(statements: WriteStatements, options: SQLiteStore.Options, unscopedKeysThrough: Date?, sequence: Int64) {
        self.statements = statements
        self.options = options
        self.unscopedKeysThrough = unscopedKeysThrough
        self.sequence = sequence
        startSequence = sequence
    }

    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        try checked("cannot read instances") { () throws(SQLiteError) in try statements.selectInstance.instances(ids) }
    }

    func instanceCount() throws(StoreError) -> Int {
        try checked("cannot count instances") { () throws(SQLiteError) in
            try statements.countInstances.first { Int($0.integer(0)) } ?? 0
        }
    }

    func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
        let numbered = sequence + 1
        let columns = try Codec.columns(of: instance)
        try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in
            try statements.insertInstance.run(columns)
            try statements.insertRecord.run(Codec.record(numbered, instance: instance.id, version: 0, kind: .created, outcome: nil, json: encode(numbered)))
        }
        sequence = numbered
        return numbered
    }

    func update(_ instance: StoredInstance) throws(StoreError) {
        let columns = try Codec.columns(of: instance)
        try checked("cannot store instance \(instance.id)") { () throws(SQLiteError) in try statements.updateInstance.run(columns) }
    }

    func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64 {
        let numbered = sequence + 1
        try checked("cannot delete instance \(instance.id)") { () throws(SQLiteError) in
            try statements.deleteInstance.run([.text(instance.id)])
            try statements.deleteRecords.run([.text(instance.id)])
            try statements.insertTombstone.run(Codec.tombstone(numbered, of: instance, at: time, json: encode(numbered)))
            // The deletion record expires: keep its number, the largest, from reuse.
            try statements.raiseSequenceFloor.run([.integer(numbered)])
        }
        sequence = numbered
        return numbered
    }

    func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord {
        let (encoded, row) = Codec.numbered(record, sequence + 1, instance: instanceID, encode: encode)
        let limit = Int64(options.historyLimit)
        try checked("cannot store a record of \(instanceID)") { () throws(SQLiteError) in
            try statements.insertRecord.run(row)
            if record.version > limit {
                try statements.dropOldRecords.forEachRow([.text(instanceID), .integer(record.version - limit)]) { row in
                    droppedThrough = max(droppedThrough, row.integer(0))
                }
            }
        }
        sequence = encoded.sequence
        return encoded
    }

    /// Before the commit: the floor of dropped records, once a transaction rather than per record.
    func finish() throws(StoreError) {
        guard droppedThrough > 0 else { return }
        try checked("cannot raise the floor of dropped records") { () throws(SQLiteError) in
            try statements.raiseDroppedFloor.run([.integer(droppedThrough)])
        }
    }

    func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError) {
        try checked("cannot store an idempotency key") { () throws(SQLiteError) in
            try statements.insertKey.run(Codec.key(key.key, fingerprint: key.fingerprint, write, at: Date()))
        }
    }

    func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup {
        func find(_ stored: String) throws(StoreError) -> Codec.StoredKey? {
            try checked("cannot read an idempotency key") { () throws(SQLiteError) in
                try statements.selectKey.first([.text(stored)]) { (row) throws(SQLiteError) in try Codec.StoredKey(row, key: stored) }
            }
        }
        var found = try find(key.key)
        // A key sent before keys were scoped is found as it was stored, until it expires.
        if found == nil, let unscoped = key.unscopedKey, let through = unscopedKeysThrough,
           through.addingTimeInterval(options.idempotencyLifetime) > now {
            found = try find(unscoped)
        }
        return found?.lookUp(key, now: now, lifetime: options.idempotencyLifetime) ?? .unused
    }

    func addCoverage(_ counts: CoverageCounts) throws(StoreError) {
        try checked("cannot count coverage") { () throws(SQLiteError) in
            for counter in Codec.counters(counts) { try statements.addCoverage.run(counter) }
        }
    }
}
