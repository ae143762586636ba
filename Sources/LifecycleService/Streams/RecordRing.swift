import LifecycleKit
import LifecycleStore

/// A record in the ring, framed for every subscriber alike.
struct RingEntry {
    let sequence: Int64
    let instance: String
    let model: String
    let outcome: Outcome?
    let isDivergent: Bool
    let frame: [UInt8]

    func passes(_ filter: RecordFilter) -> Bool {
        filter.matches(instance: instance, model: model, outcome: outcome, isDivergent: isDivergent)
    }
}

/// Recent records, oldest first, addressed by absolute index (the count of records appended
/// before), bounded in bytes: the oldest leave as new ones arrive.
struct RecordRing {
    let capacity: Int
    private var entries: [RingEntry] = []
    /// Index in `entries` of the oldest entry kept.
    private var head = 0
    /// Absolute index of the oldest entry kept.
    private(set) var firstIndex = 0
    private(set) var bytes = 0
    /// The last sequence number published.
    private(set) var lastSequence: Int64
    /// Every record published after this sequence number is in the ring.
    private(set) var coversAfter: Int64

    init(capacity: Int, lastSequence: Int64) {
        self.capacity = capacity
        self.lastSequence = lastSequence
        coversAfter = lastSequence
    }

    /// Absolute index after the newest entry.
    var endIndex: Int { firstIndex + entries.count - head }

    subscript(index: Int) -> RingEntry { entries[head + index - firstIndex] }

    /// What an entry costs beyond its frame: its strings and the array slot.
    private static func cost(_ entry: RingEntry) -> Int { entry.frame.count + entry.instance.utf8.count + entry.model.utf8.count + 96 }

    mutating func append(_ entry: RingEntry) {
        entries.append(entry)
        bytes += Self.cost(entry)
        lastSequence = entry.sequence
        while bytes > capacity, head < entries.count {
            let oldest = entries[head]
            bytes -= Self.cost(oldest)
            coversAfter = oldest.sequence
            head += 1
            firstIndex += 1
        }
        // Drop the slots of evicted entries now and then: amortised O(1) per append.
        if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The sequence number of the entry before `index` (one the ring holds, or its end).
    func sequence(before index: Int) -> Int64 {
        index > firstIndex ? self[index - 1].sequence : coversAfter
    }

    /// Where a subscription that resumes after `lastEventID` (or does not resume) starts,
    /// when the store has committed up to `committedThrough`.
    func opening(resumingAfter lastEventID: Int64?, committedThrough: Int64 = 0) -> Opening {
        guard let resume = lastEventID else { return .live(index: endIndex, sequence: lastSequence) }
        if resume > lastSequence {
            return resume <= committedThrough ? .ahead(index: endIndex) : .future(index: endIndex, newest: lastSequence)
        }
        if resume >= coversAfter { return .ring(index: firstIndex(after: resume)) }
        return .store
    }

    /// The absolute index of the first entry with a sequence number after `sequence`
    /// (``endIndex`` if none).
    func firstIndex(after sequence: Int64) -> Int {
        var low = head
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].sequence <= sequence { low = middle + 1 } else { high = middle }
        }
        return firstIndex + low - head
    }
}
