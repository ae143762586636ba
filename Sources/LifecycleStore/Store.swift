import Foundation
import LifecycleKit

/// Durable storage for instances, records and idempotency keys. Writes happen in ``write(_:)``, one transaction;
/// reads outside see only committed data. Transactions of every process (replicas on one PostgreSQL) are serialised
/// and numbered densely in commit order, so ``StoreTransaction/startSequence`` says whether another process wrote.
public protocol InstanceStore: AnyObject, Sendable {
    /// Every instance's current state; start-up cost grows with instances, not records.
    func loadInstances() throws(StoreError) -> [StoredInstance]
    /// The committed state of the instances named that exist, in no particular order.
    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance]
    /// The last sequence number this process committed or read as committed (0 for a new store).
    var lastSequence: Int64 { get }
    /// The last sequence number committed by any process: asks the database where others may write.
    func latestSequence() throws(StoreError) -> Int64
    /// Calls `wake` (on any thread) when another process may have committed: a hint; poll ``latestSequence()`` too.
    func observeCommitsElsewhere(_ wake: @escaping @Sendable () -> Void)
    /// Runs `body` in one transaction. Writes are serialised.
    func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T
    /// A transaction to make writes in now, in memory, and to commit later with ``commit(_:_:)``:
    /// while the one before it commits on another thread. It starts after sequence number
    /// `sequence` (where the transaction before it ends; `nil`: after what is committed). It
    /// reads nothing from the database: a read fails, and its writes are then made again in
    /// ``write(_:)``. `nil` where writes are made only inside a transaction (PostgreSQL, which
    /// other processes write to as well).
    func stage(after sequence: Int64?) -> (any StoreTransaction)?
    /// Commits a transaction from ``stage(after:)`` once every transaction before it has
    /// committed, running `body` in it first (reads of the database are allowed there).
    func commit<T>(_ staged: any StoreTransaction, _ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T
    /// Committed records of one instance after sequence number `after`, oldest first, within `limit`; applied inputs only,
    /// and only those with a ``LifecycleKit/Record/divergence`` if `divergentOnly`.
    func history(instanceID: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(StoreError) -> HistoryPage
    /// Committed records and deletion records numbered in (`after`, `through`] that pass `filter`, in order, within `limit`.
    func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage
    /// The committed coverage counters of every model (see ``StoreTransaction/addCoverage(_:)``).
    func loadCoverage() throws(StoreError) -> CoverageCounts
    /// The committed findings and their instances (see ``StoreTransaction/storeFindings(_:instances:)``).
    func loadFindings() throws(StoreError) -> StoredFindings
    /// Ends the store's connections and threads; later calls fail.
    func close()
}

/// The writes one transaction can make. Reads through it see its own writes.
public protocol StoreTransaction {
    /// The last sequence number committed before this transaction began; no other commits while it runs.
    var startSequence: Int64 { get }
    /// The instances named that exist, with this transaction's writes, in one round trip, in no particular order.
    func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance]
    /// How many instances there are, as committed (with this transaction's writes).
    func instanceCount() throws(StoreError) -> Int
    /// Stores a new instance with its creation record, numbered next (returned) and encoded by `encode`.
    func insert(_ instance: StoredInstance, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64
    /// Replaces the stored state of an existing instance.
    func update(_ instance: StoredInstance) throws(StoreError)
    /// Deletes an instance and its history, keeping its deletion record (numbered next, returned) until it expires.
    func delete(_ instance: StoredInstance, at time: Date, encode: (Int64) -> [UInt8]) throws(StoreError) -> Int64
    /// Numbers, names and stores the record (as `encode` makes it), dropping records beyond the history limit.
    func append(_ record: Record, instanceID: String, encode: (Record) -> [UInt8]) throws(StoreError) -> EncodedRecord
    /// Keeps what a write did for its idempotency key.
    func remember(_ key: IdempotencyKey, _ write: RememberedWrite) throws(StoreError)
    /// What is known of an idempotency key younger than the retention period.
    func lookUp(_ key: IdempotencyKey, now: Date) throws(StoreError) -> IdempotencyLookup
    /// From now on a key this transaction has not written is looked up as unused, without a read, and stored by a plain
    /// INSERT (or, if its write was refused and it is not stored, read once before anything is written): one the store
    /// holds already (a replay, a key released or expired but not yet purged) fails the transaction
    /// (``StoreError/Kind/rejectedWrite``), which commits nothing, and the caller runs its writes again in a transaction
    /// that reads each key. Keys stored before keys were scoped (SQLite) are read all the same.
    func presumeKeysNew()
    /// Reads the keys named at once (one round trip on PostgreSQL, a statement per 512 on SQLite), so that their
    /// ``lookUp(_:now:)`` in this transaction need no statement of their own; every look-up answers as it would without.
    func readAhead(_ keys: [IdempotencyKey]) throws(StoreError)
    /// Adds `counts` to the stored coverage counters: once a transaction, so that each counter is written once.
    func addCoverage(_ counts: CoverageCounts) throws(StoreError)
    /// The findings stored under `keys`, as committed (one round trip).
    func findings(_ keys: [FindingKey]) throws(StoreError) -> [StoredFinding]
    /// Which of the instances named have which findings, as committed (one round trip).
    func findingInstances(of instances: [String]) throws(StoreError) -> Set<FindingInstance>
    /// Stores `findings` (each replacing the one under its key) and the pairs `instances`: once a transaction, so that
    /// each finding is written once however many records it counts. A delete drops the instance's pairs.
    func storeFindings(_ findings: [StoredFinding], instances: [FindingInstance]) throws(StoreError)
    /// Makes the writes waiting so far into what the commit writes, reading nothing: called on a
    /// staged transaction by the thread that staged it, so that the commit, on the writer's
    /// thread, only runs it.
    func prepareWrites() throws(StoreError)
}

extension StoreTransaction {
    /// The instance as committed (with this transaction's writes), or `nil` if there is none.
    public func instance(_ id: String) throws(StoreError) -> StoredInstance? {
        try instances([id]).first
    }
}

extension Date {
    /// Whole milliseconds since 1970, as the store keeps times: what reads it back give.
    public var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    /// This time to the whole millisecond, the precision the store keeps.
    public var roundedToMilliseconds: Date {
        Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000)
    }
}

/// Why the store could not do what it was asked. Nothing was written, unless ``isOutcomeUnknown``.
///
/// A caller switches over ``kind``; each driver maps its codes to a kind in one place
/// (`SQLiteError.kind`, `PostgreSQLError.kind`).
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// What a failure means for the caller, whichever database it came from.
    public enum Kind: Sendable, Hashable {
        /// The failure lies in what was being written (a constraint, a value too big or of the wrong
        /// type, data that does not encode), not in the store: other writes can still commit.
        case rejectedWrite
        /// The disk (or the database's size limit) is full.
        case diskFull
        /// The database is damaged: it does not heal while the service runs, though writes that miss
        /// the damage may still commit.
        case damaged
        /// The store refused to open because committed data is gone (see ``SQLiteStore/Options/acceptDataLoss``).
        case dataLoss
        /// The database server could not be reached (or did not answer in time); the store connects
        /// again by itself.
        case unavailable
        /// Another connection held a lock the operation needed, or the database gave up a transaction
        /// that conflicted with another (a deadlock, a serialization failure): the same work may succeed later.
        case busy
        /// Any other failure of the store: an I/O error, a full connection table, a misuse.
        case other
    }

    /// The database library's code for a failure, as the driver gave it.
    public enum Code: Sendable, Hashable, CustomStringConvertible {
        /// An SQLite extended result code.
        case sqlite(Int32)
        /// A PostgreSQL SQLSTATE.
        case sqlState(String)

        public var description: String {
            switch self {
            case .sqlite(let code): "SQLite code \(code)"
            case .sqlState(let state): "SQLSTATE \(state)"
            }
        }
    }

    /// What failed, for a log or an answer: what was being done, then the driver's message.
    public var message: String
    /// What the failure means for the caller.
    public var kind: Kind
    /// Whether the transaction may have committed all the same: the connection was lost after its
    /// COMMIT was sent. Apart from ``kind``, which says why it failed.
    public var isOutcomeUnknown: Bool
    /// The driver's code, or `nil` when lifecycled found the failure itself or the driver gave none
    /// (a lost connection).
    public var code: Code?

    /// A failure with `message`; the driver's `code` when it came from one.
    public init(_ message: String, kind: Kind = .other, isOutcomeUnknown: Bool = false, code: Code? = nil) {
        self.message = message
        self.kind = kind
        self.isOutcomeUnknown = isOutcomeUnknown
        self.code = code
    }

    public var description: String { message }
}

/// An error of a store's database library, which says what it means for the store.
protocol StoreFailure: Error {
    func storeError(doing what: String) -> StoreError
}

extension StoreError {
    init(_ failure: some StoreFailure, doing what: String) { self = failure.storeError(doing: what) }
}

/// Runs database work, turning its error into a ``StoreError`` that says what was being done.
@discardableResult
func checked<T, Failure: StoreFailure>(_ what: String, _ body: () throws(Failure) -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError(error, doing: what)
    }
}
