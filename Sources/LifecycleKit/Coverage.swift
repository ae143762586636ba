import Foundation

/// How often each transition row of a model was taken and each state saw an unexpected event or a divergence, over
/// every record ever appended: counters kept beside the records, since retention drops records.
public struct CoverageCounts: Sendable, Equatable {
    /// What a counter counts.
    public enum Kind: Int64, Sendable {
        /// Records that took the transition row `name` (its stable id, such as `r2`).
        case rowTaken = 0
        /// Unexpected events recorded while in state `name`.
        case unexpectedEvent = 1
        /// Records that took the transition row `name` and showed a ``Divergence``.
        case divergentRow = 2
        /// Records with a ``Divergence`` whose `to` is state `name` (an unexpected event's `to` is its `from`).
        case divergentState = 3
    }

    /// One counter: of `model`, counting `kind` of `name`.
    public struct Key: Hashable, Sendable {
        /// The model's name.
        public var model: String
        /// What is counted.
        public var kind: Kind
        /// The transition row's id or the state's name, as `kind` says.
        public var name: String

        /// The counter of `kind` of `name` in `model`.
        public init(model: String, kind: Kind, name: String) {
            self.model = model
            self.kind = kind
            self.name = name
        }
    }

    /// Every counter that is not zero.
    public private(set) var counts: [Key: Int64] = [:]
    /// No counts.
    public init() {}

    /// The counter's value (0 when it never counted anything).
    public subscript(_ key: Key) -> Int64 { counts[key] ?? 0 }

    /// Whether every counter is zero.
    public var isEmpty: Bool { counts.isEmpty }

    /// Counts what a record of an instance of `model` adds: the row it took, or its unexpected event, and whether
    /// what the app reported of it diverged.
    public mutating func count(_ record: Record, model: String) {
        if let row = record.row { add(1, to: Key(model: model, kind: .rowTaken, name: row)) }
        if record.outcome == .unexpected { add(1, to: Key(model: model, kind: .unexpectedEvent, name: record.from)) }
        guard record.divergence != nil else { return }
        if let row = record.row { add(1, to: Key(model: model, kind: .divergentRow, name: row)) }
        add(1, to: Key(model: model, kind: .divergentState, name: record.to))
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
