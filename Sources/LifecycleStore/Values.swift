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
    /// It created an instance (model and time tell it from a later one of the same id); its JSON as created.
    case created(id: String, model: String, createdAt: Date, json: [UInt8])
    /// It applied an input: the numbered record's JSON, and whether the input was unexpected.
    case applied(recordJSON: [UInt8], isUnexpected: Bool)
}

/// A client's `Idempotency-Key` with what identifies its request (method, path, body).
public struct IdempotencyKey: Sendable, Equatable {
    /// The key as stored: the client's, within the scope of whoever sent it.
    public var key: String
    public var fingerprint: [UInt8]
    /// The client's key as versions before scoping stored it, so a retry across the upgrade is recognised.
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

/// What a stored record is: an applied input, or an instance's creation or deletion (kept for replay filters).
public enum RecordKind: Int64, Sendable, CaseIterable {
    case event = 0
    case action = 1
    case relaunch = 2
    /// An instance was made: its first record, version 0.
    case created = 3
    /// An instance was deleted with its history; its record outlives it for a while.
    case deleted = 4

    /// How long a deletion record stays replayable by default: a watcher back within a day learns of it.
    @usableFromInline static let deletionRecordLifetime: TimeInterval = 24 * 3600

    /// The kind of a record of an applied input.
    public init(_ input: InputKind) {
        self = switch input {
        case .event: .event
        case .action: .action
        case .relaunch: .relaunch
        }
    }
}

/// Which records a replay or a stream wants: every condition given holds. An outcome filter leaves out creations and deletions.
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

/// How often each transition row of a model was taken and each state saw an unexpected event, over every record ever
/// appended: counters kept beside the records, since retention drops records.
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

    /// Counts what a record of an instance of `model` adds: the row it took, or its unexpected event.
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
