import Foundation
import LifecycleKit

/// Durable storage for instances, records and idempotency keys.
///
/// All writes happen inside ``write(_:)``: one transaction, committed when the body
/// returns (durable to the configured sync level) and rolled back when it throws.
/// Reads outside a write see only committed data.
///
/// Other processes may write to the same store (replicas on one PostgreSQL). Write
/// transactions are serialised across all of them and numbered densely in commit order, so a
/// transaction that finds ``StoreTransaction/startSequence`` equal to the last number its
/// process knows of knows nobody else wrote in between.
public protocol InstanceStore: AnyObject, Sendable {
    /// Every instance's current state; start-up cost grows with instances, not records.
    func loadInstances() throws(StoreError) -> [StoredInstance]
    /// The committed state of the instances named that exist, in no particular order.
    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance]
    /// The last sequence number this process committed or read as committed (0 for a new store).
    var lastSequence: Int64 { get }
    /// The last sequence number committed by any process: asks the database where others may write.
    func latestSequence() throws(StoreError) -> Int64
    /// Calls `wake` (on any thread, any number of times) when another process may have
    /// committed. Only a hint: a lost one must delay, never lose, what follows it, so whoever
    /// listens also asks ``latestSequence()`` now and then. A store no one else writes never calls it.
    func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void)
    /// Runs `body` in one transaction. Writes are serialised.
    func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T
    /// Committed records of one instance with sequence numbers after `after`, oldest first,
    /// as many as `limit` allows: applied inputs only (its creation record is not history).
    func history(instanceID: String, after: Int64, limit: PageLimit) throws(StoreError) -> HistoryPage
    /// Committed records of every instance, and deletion records, with sequence numbers in
    /// `after...through` (excluding `after`) that pass `filter`, in sequence order, as many as
    /// `limit` allows. Records of a deleted instance went with it; only its deletion record
    /// is replayed.
    func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage
    /// The committed coverage counters of every model (see ``StoreTransaction/addCoverage(_:)``).
    func loadCoverage() throws(StoreError) -> CoverageCounts
    /// Ends the store's connections and threads; later calls fail.
    func close()
}

/// The writes one transaction can make. Reads through it see its own writes.
public protocol StoreTransaction {
    /// The last sequence number committed before this transaction began. No other write
    /// commits while it runs, so its reads see every record up to this number and no later one.
    var startSequence: Int64 { get }
    /// The instances named as committed (with this transaction's writes): those that exist,
    /// in no particular order, read at once (one round trip to a database server).
    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance]
    /// How many instances there are, as committed (with this transaction's writes).
    func instanceCount() throws(StoreError) -> Int
    /// Stores a new instance with its creation record: numbered with the next sequence
    /// number, its JSON is what `encode` makes of that number. Returns the number.
    func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64
    /// Replaces the stored state of an existing instance.
    func update(_ instance: StoredInstance) throws(StoreError)
    /// Deletes an instance and its history, and keeps its deletion record (numbered with the
    /// next sequence number, its JSON made by `encode`) for replays until it expires.
    /// Returns the number.
    func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64
    /// Numbers the record with the next sequence number, names its instance, stores what
    /// `encode` makes of it, and drops the instance's records beyond the history limit.
    func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord
    /// Keeps what a write did for its idempotency key.
    func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError)
    /// What is known of an idempotency key younger than the retention period.
    func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup
    /// Adds `counts` to the stored coverage counters, with the records they count: call once
    /// per transaction with what its records add, so each counter is written once.
    func addCoverage(_ counts: CoverageCounts) throws(StoreError)
}

extension StoreTransaction {
    /// The instance as committed (with this transaction's writes), or `nil` if there is none.
    public func instance(_ id: String) throws(StoreError) -> StoredInstance? {
        try instances([id]).first
    }
}

extension Date {
    /// This time to the whole millisecond: the precision the store keeps, so a time
    /// read back after a restart equals the one held before it.
    public var roundedToMilliseconds: Date {
        Date(timeIntervalSince1970: (timeIntervalSince1970 * 1000).rounded() / 1000)
    }
}
