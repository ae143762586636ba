import Foundation
import LifecycleKit

/// An instance as the store keeps it: enough to rebuild its machine exactly.
public struct StoredInstance: Sendable, Equatable {
    public var id: String
    public var model: String
    public var createdAt: Date
    public var updatedAt: Date
    public var state: InstanceState

    public init(id: String, model: String, createdAt: Date, updatedAt: Date, state: InstanceState) {
        self.id = id
        self.model = model
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.state = state
    }
}

/// What a write with an `Idempotency-Key` did, kept so that its retries are answered alike.
public enum RememberedWrite: Sendable, Equatable {
    /// It created an instance: which one (one made later with the same id has another model
    /// or creation time) and its JSON as created.
    case created(id: String, model: String, createdAt: Date, json: [UInt8])
    /// It applied an input: the numbered record's JSON, and whether the input was unexpected.
    case applied(recordJSON: [UInt8], isUnexpected: Bool)
}

/// A client's `Idempotency-Key` with what identifies its request (method, path, body).
public struct IdempotencyKey: Sendable, Equatable {
    /// The key as stored: the client's, within the scope of whoever sent it.
    public var key: String
    public var fingerprint: [UInt8]
    /// The client's key as versions before scoping stored it: looked up too while keys
    /// stored then have not expired, so a retry across the upgrade is still recognised.
    public var unscopedKey: String?

    public init(key: String, fingerprint: [UInt8], unscopedKey: String? = nil) {
        self.key = key
        self.fingerprint = fingerprint
        self.unscopedKey = unscopedKey
    }
}

/// What the store knows of an idempotency key.
public enum IdempotencyLookup: Sendable, Equatable {
    /// Never seen (or expired): apply the request.
    case unused
    /// Seen with the same request: answer with what it did then.
    case replay(RememberedWrite)
    /// Seen with a different request.
    case conflict
}

/// A numbered record and its JSON, as stored.
public struct EncodedRecord: Sendable {
    public var sequence: Int64
    public var recordJSON: [UInt8]
}

/// What a stored record is: an applied input, or the creation or deletion of an instance.
/// Kept with each record (in SQLite as its raw value) so that replays can filter and name it.
public enum RecordKind: Int64, Sendable, CaseIterable {
    case event = 0
    case action = 1
    case relaunch = 2
    /// An instance was made: its first record, version 0.
    case created = 3
    /// An instance was deleted with its history; its record outlives it for a while.
    case deleted = 4

    /// The kind of a record of an applied input.
    public init(_ input: InputKind) {
        self = switch input {
        case .event: .event
        case .action: .action
        case .relaunch: .relaunch
        }
    }
}

/// Which records a replay or a stream wants. Every condition given must hold; an absent one
/// holds for all. Creation and deletion records have no outcome, so an outcome filter leaves
/// them out.
public struct RecordFilter: Sendable, Equatable {
    public var model: String?
    public var instances: Set<String>?
    public var outcomes: Set<Outcome>?

    public init(model: String? = nil, instances: Set<String>? = nil, outcomes: Set<Outcome>? = nil) {
        self.model = model
        self.instances = instances
        self.outcomes = outcomes
    }

    /// Whether a record of `instance` (of `model`) with `outcome` passes.
    public func matches(instance: String, model: String, outcome: Outcome?) -> Bool {
        if let instances, !instances.contains(instance) { return false }
        if let wanted = self.model, wanted != model { return false }
        if let outcomes {
            guard let outcome, outcomes.contains(outcome) else { return false }
        }
        return true
    }
}

/// A record as a replay returns it.
public struct ReplayedRecord: Sendable, Equatable {
    public var sequence: Int64
    public var kind: RecordKind
    /// The instance it is a record of, and that instance's model.
    public var instance: String
    public var model: String
    /// The outcome of an applied input; `nil` for a creation or deletion record.
    public var outcome: Outcome?
    /// The record's JSON, as stored.
    public var json: [UInt8]

    public init(sequence: Int64, kind: RecordKind, instance: String, model: String, outcome: Outcome?, json: [UInt8]) {
        self.sequence = sequence
        self.kind = kind
        self.instance = instance
        self.model = model
        self.outcome = outcome
        self.json = json
    }
}

/// How much one page of records read at once may hold: at most `records` of them, and at most
/// `bytes` bytes of their JSON unless its one record alone is bigger (so every record can be
/// read). What a client that does not read can pin is thus a page per connection.
public struct PageLimit: Sendable, Equatable {
    /// The default of `--page-bytes`: a page of 1000 typical records (about 0.4 KiB each)
    /// is far below it, one of records with an 8192-character url (about 16 KiB, the url
    /// repeated as the action it replaced) holds about 250.
    public static let defaultBytes = 4 * 1024 * 1024

    /// The most records on a page (at least 1).
    public var records: Int
    /// The most bytes of records' JSON on a page of more than one record.
    public var bytes: Int

    /// At most `records` records (1 if fewer is asked) and `bytes` bytes of them.
    public init(records: Int, bytes: Int = PageLimit.defaultBytes) {
        self.records = max(1, records)
        self.bytes = bytes
    }
}

/// A page being filled from rows in order, within its ``PageLimit``: both stores page by it,
/// and so does the instance list.
public struct PageFill {
    /// What the page holds at most.
    public let limit: PageLimit
    private var count = 0
    private var bytes = 0
    /// Whether a row was turned away: the page ends before it, and more follow.
    public private(set) var turnedAway = false

    /// An empty page within `limit`.
    public init(_ limit: PageLimit) {
        self.limit = limit
    }

    /// Whether the page can take no more: a row was turned away, or it holds `limit.records`.
    public var isFull: Bool { turnedAway || count >= limit.records }

    /// Takes a record of `size` bytes if the page has room for it; once it has not, no later one.
    public mutating func admits(size: Int) -> Bool {
        guard !turnedAway, count < limit.records, count == 0 || bytes + size <= limit.bytes else {
            turnedAway = true
            return false
        }
        count += 1
        bytes += size
        return true
    }
}

/// One page of a replay of all instances' records, in sequence order.
public struct ReplayPage: Sendable {
    /// The matching records, oldest first.
    public var records: [ReplayedRecord]
    /// Every matching record kept with a sequence number up to this one is on this page or
    /// an earlier one: the next page starts after it.
    public var coveredThrough: Int64
    /// The largest sequence number retention ever dropped (the history limit, expired
    /// deletion records, or data loss accepted at start); 0 if none. A replay after an
    /// earlier number may lack records.
    public var droppedThrough: Int64
    /// The oldest sequence number still kept, or `nil` when none is.
    public var oldestKept: Int64?
}

/// One page of an instance's history, oldest first.
public struct HistoryPage: Sendable {
    /// Each record's JSON, as stored.
    public var records: [[UInt8]]
    /// Sequence number of the last record on the page.
    public var lastSequence: Int64?
    /// Whether more records follow this page.
    public var hasMore: Bool
    /// The oldest version still kept; greater than 1 when retention dropped older ones.
    public var oldestRetainedVersion: Int64?
    /// The sequence number of that oldest record kept: on the numbering `after` pages by.
    public var oldestRetainedSequence: Int64?
}

/// How often each transition row of a model was taken and how many unexpected events each of
/// its states saw, over every record ever appended (records later dropped by retention or with
/// their deleted instance included): counters kept beside the records, never counted from them.
public struct CoverageCounts: Sendable, Equatable {
    /// What a counter counts.
    public enum Kind: Int64, Sendable {
        /// Records that took the transition row `name` (its stable id, such as `r2`).
        case rowTaken = 0
        /// Unexpected events recorded while in state `name`.
        case unexpectedEvent = 1
    }

    /// One counter: of `model`, counting `kind` of `name`.
    public struct Key: Hashable, Sendable {
        public var model: String
        public var kind: Kind
        public var name: String

        public init(model: String, kind: Kind, name: String) {
            self.model = model
            self.kind = kind
            self.name = name
        }
    }

    /// Every counter that is not zero.
    public private(set) var counts: [Key: Int64] = [:]

    public init() {}

    /// The counter's value (0 when it never counted anything).
    public subscript(_ key: Key) -> Int64 { counts[key] ?? 0 }

    public var isEmpty: Bool { counts.isEmpty }

    /// Counts what a record of an instance of `model` adds: the row it took, or the
    /// unexpected event in the state it was recorded in.
    public mutating func count(_ record: Record, model: String) {
        if let row = record.row { add(1, to: Key(model: model, kind: .rowTaken, name: row)) }
        if record.outcome == .unexpected { add(1, to: Key(model: model, kind: .unexpectedEvent, name: record.from)) }
    }

    /// Adds every counter of `other`.
    public mutating func add(_ other: CoverageCounts) {
        for (key, count) in other.counts { add(count, to: key) }
    }

    /// Adds `count` to one counter.
    public mutating func add(_ count: Int64, to key: Key) {
        guard count != 0 else { return }
        counts[key, default: 0] += count
    }
}

/// Why the store could not do what it was asked. Nothing was written.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// Whether the disk is full.
    public var isDiskFull: Bool
    /// Whether the failure lies in what was being written (a constraint, a value too big)
    /// rather than in the store, so that other writes can still commit.
    public var isSpecificToWrite: Bool
    /// Whether the database file is damaged (see ``SQLiteError/isDamage``).
    public var isDamage: Bool
    /// Whether the store refused to open because data it had committed is gone; opening
    /// with ``SQLiteStore/Options/acceptDataLoss`` accepts the loss.
    public var isDataLoss: Bool
    /// Whether the database server could not be reached: the store connects again by itself,
    /// so a transaction that commits (even an empty one) shows it is back.
    public var isUnreachable: Bool
    /// Whether the transaction may have committed all the same: the connection to the
    /// database server was lost, or given up, once its COMMIT had been sent.
    public var isOutcomeUnknown: Bool

    public init(
        _ message: String, isDiskFull: Bool = false, isSpecificToWrite: Bool = false, isDamage: Bool = false, isDataLoss: Bool = false,
        isUnreachable: Bool = false, isOutcomeUnknown: Bool = false
    ) {
        self.message = message
        self.isDiskFull = isDiskFull
        self.isSpecificToWrite = isSpecificToWrite
        self.isDamage = isDamage
        self.isDataLoss = isDataLoss
        self.isUnreachable = isUnreachable
        self.isOutcomeUnknown = isOutcomeUnknown
    }

    init(_ error: SQLiteError, doing what: String) {
        self.init(
            "\(what): \(error.message) (SQLite code \(error.code))", isDiskFull: error.isDiskFull,
            isSpecificToWrite: error.isSpecificToWrite, isDamage: error.isDamage
        )
    }

    public var description: String { message }
}

/// Something the store noticed that an operator should know of. The store knows nothing of
/// the service's logger: whoever opens it passes a handler that logs these.
public struct StoreEvent: Sendable {
    public enum Level: Sendable {
        case info, warning, error
    }

    public var level: Level
    public var message: String
    public var fields: [(key: String, value: String)]

    public init(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String> = [:]) {
        self.init(level, message, fields: fields.map { ($0.key, $0.value) })
    }

    /// As ``init(_:_:_:)``, for fields assembled at run time.
    public init(_ level: Level, _ message: String, fields: [(key: String, value: String)]) {
        self.level = level
        self.message = message
        self.fields = fields
    }

    /// `level message key=value ...` on standard error: for a store opened without a logger.
    @Sendable public static func writeToStandardError(_ event: StoreEvent) {
        let fields = event.fields.map { " \($0.key)=\($0.value.debugDescription)" }.joined()
        FileHandle.standardError.write(Data("\(event.level) \(event.message)\(fields)\n".utf8))
    }
}

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
    /// Waits for the check of the stored data begun at opening, and throws if it failed:
    /// nothing may be served before. A store whose server checks its own data has none.
    func verifyIntegrity() throws(StoreError)
    /// `failure`, explained by what the store knows of the data's soundness (a failed start-up check).
    func reason(for failure: StoreError) -> StoreError
    /// The database file, for a store kept in one: its size and its WAL's are reported.
    var databaseFile: String? { get }
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
