import Foundation
import LifecycleKit

/// An instance as the store keeps it: enough to rebuild its machine exactly.
public struct StoredInstance: Sendable, Equatable {
    public var id: String
    public var model: String
    public var createdAt: Date
    public var updatedAt: Date
    public var state: InstanceState
    /// Who the instance is (an app's version, a test run's id): set at creation, never changed.
    public var labels: [String: String]

    public init(id: String, model: String, createdAt: Date, updatedAt: Date, state: InstanceState, labels: [String: String] = [:]) {
        self.id = id
        self.model = model
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.state = state
        self.labels = labels
    }
}

/// What a write with an `Idempotency-Key` did, kept so that its retries are answered alike.
public enum RememberedWrite: Sendable, Equatable {
    /// It created an instance (model and time tell it from a later one of the same id); its JSON as created.
    case created(id: String, model: String, createdAt: Date, json: [UInt8])
    /// It applied an input: the numbered record's JSON, whether the input was unexpected, and the instance it went to
    /// (`nil` for a key stored before lifecycled kept it), which tells a later instance made under the same id from it.
    case applied(recordJSON: [UInt8], isUnexpected: Bool, instance: KeyedInstance? = nil)
}

/// The instance a keyed input was applied to, as created: one deleted and made again under its id has another
/// creation time.
public struct KeyedInstance: Sendable, Equatable {
    /// The instance's id.
    public var id: String
    /// When it was created.
    public var createdAt: Date

    /// The instance `id` created at `createdAt`.
    public init(id: String, createdAt: Date) {
        self.id = id
        self.createdAt = createdAt
    }
}

/// A client's `Idempotency-Key` with what identifies its request (method, path, body).
public struct IdempotencyKey: Sendable, Equatable {
    /// The key as stored: the client's, within the scope of whoever sent it.
    public var key: String
    /// What identifies the request: the same for every spelling of the same request.
    public var fingerprint: [UInt8]
    /// The client's key as versions before scoping stored it, so a retry across the upgrade is recognised.
    public var unscopedKey: String?
    /// The fingerprint versions before canonical fingerprints stored for the same request sent
    /// alone (its body's bytes as sent), so that a retry across the upgrade is recognised too.
    public var formerFingerprint: [UInt8]?

    public init(key: String, fingerprint: [UInt8], unscopedKey: String? = nil, formerFingerprint: [UInt8]? = nil) {
        self.key = key
        self.fingerprint = fingerprint
        self.unscopedKey = unscopedKey
        self.formerFingerprint = formerFingerprint
    }
}

/// What the store knows of an idempotency key.
public enum IdempotencyLookup: Sendable, Equatable {
    /// Never seen (or released with its deleted instance, and expired since): apply the request.
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

/// What a stored record is: an applied input, or an instance's creation or deletion (kept for replay filters).
public enum RecordKind: Int64, Sendable, CaseIterable {
    case event = 0
    case action = 1
    case relaunch = 2
    /// An instance was made: its first record, version 0.
    case created = 3
    /// An instance was deleted with its history; its record outlives it for a while.
    case deleted = 4
    /// Inputs an app's reporter dropped before delivery.
    case gap = 5
    /// How long a deletion record stays replayable by default: a watcher back within a day learns of it.
    @usableFromInline static let deletionRecordLifetime: TimeInterval = 24 * 3600

    /// The kind of a record of an applied input.
    public init(_ input: InputKind) {
        self = switch input {
        case .event: .event
        case .action: .action
        case .relaunch: .relaunch
        case .gap: .gap
        }
    }
}

/// Which records a replay or a stream wants: every condition given holds. An outcome filter or `divergentOnly` leaves out creations and deletions.
public struct RecordFilter: Sendable, Equatable {
    public var model: String?
    public var instances: Set<String>?
    public var outcomes: Set<Outcome>?
    /// Only records with a ``LifecycleKit/Record/divergence``.
    public var divergentOnly: Bool

    public init(model: String? = nil, instances: Set<String>? = nil, outcomes: Set<Outcome>? = nil, divergentOnly: Bool = false) {
        self.model = model
        self.instances = instances
        self.outcomes = outcomes
        self.divergentOnly = divergentOnly
    }

    /// Whether a record of `instance` (of `model`) with `outcome`, divergent or not, passes.
    public func matches(instance: String, model: String, outcome: Outcome?, isDivergent: Bool) -> Bool {
        if let instances, !instances.contains(instance) { return false }
        if let wanted = self.model, wanted != model { return false }
        if let outcomes {
            guard let outcome, outcomes.contains(outcome) else { return false }
        }
        return isDivergent || !divergentOnly
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
    /// Whether it has a ``LifecycleKit/Record/divergence`` (never a creation or deletion record).
    public var isDivergent: Bool

    public init(sequence: Int64, kind: RecordKind, instance: String, model: String, outcome: Outcome?, json: [UInt8], isDivergent: Bool = false) {
        self.sequence = sequence
        self.kind = kind
        self.instance = instance
        self.model = model
        self.outcome = outcome
        self.json = json
        self.isDivergent = isDivergent
    }
}

/// How much one page of records may hold: `records` of them, and `bytes` of their JSON unless one record alone is
/// bigger. A client that does not read thus pins a page per connection at most.
public struct PageLimit: Sendable, Equatable {
    /// The default of `--page-bytes`: far above 1000 typical records, about 250 of 16 KiB (an 8192-character url).
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

/// A page being filled from rows in order, within its ``PageLimit`` (both stores and the instance list).
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
    /// Every matching record kept up to this sequence number is on this page or an earlier one.
    public var coveredThrough: Int64
    /// The largest sequence number retention (or accepted data loss) ever dropped, 0 if none: a replay from before may lack records.
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
