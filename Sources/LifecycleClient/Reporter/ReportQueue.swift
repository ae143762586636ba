import Foundation

/// The reporter's queue as a value: the journal's entries replayed, the bound, what is in flight.
/// No I/O: each mutating function that changes the journal returns the entries to write, and
/// the caller applies them (`apply`) only once they are durable.
struct ReportQueue {
    /// The bound on undelivered items.
    struct Bound {
        var items: Int
        var bytes: Int
    }

    /// What one batch holds: the pending gaps first (each before its instance's next items),
    /// then the oldest items, in order.
    struct Batch {
        var gaps: [PendingGap]
        var items: [QueuedItem]
        var count: Int { gaps.count + items.count }
    }

    private(set) var items: [QueuedItem] = []
    private var sizes: [Int] = []
    private(set) var gaps: [PendingGap] = []
    /// Gaps made in this process and never handed to a batch: only these may grow (invariant 5).
    private var mergeable: Set<String> = []
    /// The number of leading items and gaps in the batch in flight (nil: none).
    private var inFlight: (gaps: Int, items: Int)?
    private(set) var nextSequence: UInt64 = 1
    private(set) var liveBytes = 0
    let bound: Bound

    init(bound: Bound, replaying entries: [Journal.Entry], sizes: [Int]) {
        self.bound = bound
        for (entry, size) in zip(entries, sizes) { apply(entry, size: size) }
    }

    /// Applies one durable entry.
    mutating func apply(_ entry: Journal.Entry, size: Int) {
        switch entry.t {
        case .base:
            nextSequence = max(nextSequence, entry.nextSequence ?? 1)
        case .item:
            guard let item = entry.item else { return }
            items.append(item)
            sizes.append(size)
            liveBytes += size
            nextSequence = max(nextSequence, item.sequence + 1)
        case .ack:
            let through = entry.through ?? 0
            let done = items.prefix { $0.sequence <= through }.count
            liveBytes -= sizes.prefix(done).reduce(0, +)
            items.removeFirst(done)
            sizes.removeFirst(done)
            let keys = Set(entry.gapKeys ?? [])
            gaps.removeAll { keys.contains($0.key) }
        case .drop:
            if let from = entry.from, let through = entry.through, from <= through {
                let range = items.indices.filter { (from...through).contains(items[$0].sequence) }
                if let first = range.first, let last = range.last {
                    liveBytes -= sizes[first...last].reduce(0, +)
                    items.removeSubrange(first...last)
                    sizes.removeSubrange(first...last)
                }
            }
            for gap in entry.gaps ?? [] {
                if let at = gaps.firstIndex(where: { $0.key == gap.key }) { gaps[at] = gap } else { gaps.append(gap) }
            }
        }
    }

    /// The entries that queue `item` (framed as `size` bytes): a `drop` first when the bound would
    /// be passed (the oldest items not in flight), then the item. `makeKey` makes a new gap's key.
    func entries(queueing item: QueuedItem, size: Int, makeKey: () -> String) -> [Journal.Entry] {
        let start = inFlight?.items ?? 0
        var end = start
        var count = items.count + 1
        var bytes = liveBytes + size
        while count > bound.items || bytes > bound.bytes, end < items.count {
            count -= 1
            bytes -= sizes[end]
            end += 1
        }
        let itemEntry = Journal.Entry(t: .item, item: item)
        guard end > start else { return [itemEntry] }
        var dropped: [String: Int] = [:]
        var order: [String] = []
        for item in items[start..<end] {
            if dropped[item.instance] == nil { order.append(item.instance) }
            dropped[item.instance, default: 0] += 1
        }
        let changed = order.map { instance -> PendingGap in
            if let gap = gaps.first(where: { $0.instance == instance && mergeable.contains($0.key) }) {
                return PendingGap(key: gap.key, instance: instance, dropped: gap.dropped + dropped[instance]!)
            }
            return PendingGap(key: makeKey(), instance: instance, dropped: dropped[instance]!)
        }
        let drop = Journal.Entry(t: .drop, through: items[end - 1].sequence, from: items[start].sequence, gaps: changed)
        return [drop, itemEntry]
    }

    /// Notes that gaps made by `entries(queueing:)` in this process may still grow.
    mutating func noteMergeable(_ entries: [Journal.Entry]) {
        for entry in entries where entry.t == .drop { for gap in entry.gaps ?? [] { mergeable.insert(gap.key) } }
    }

    /// The next batch to send, of at most `limit`; nil when one is in flight or nothing waits.
    mutating func takeBatch(limit: Int) -> Batch? {
        guard inFlight == nil, !(items.isEmpty && gaps.isEmpty) else { return nil }
        let batchGaps = Array(gaps.prefix(limit))
        let batchItems = Array(items.prefix(limit - batchGaps.count))
        for gap in batchGaps { mergeable.remove(gap.key) }
        inFlight = (batchGaps.count, batchItems.count)
        return Batch(gaps: batchGaps, items: batchItems)
    }

    /// The batch in flight was not answered: it will be sent again, keys unchanged.
    mutating func release() { inFlight = nil }

    /// The `ack` entry for the first `answered` members of `batch` (nil when none), once it was
    /// answered; the batch is no longer in flight.
    mutating func acknowledgement(of batch: Batch, answered: Int) -> Journal.Entry? {
        inFlight = nil
        guard answered > 0 else { return nil }
        let gapKeys = batch.gaps.prefix(answered).map(\.key)
        let itemCount = max(0, answered - batch.gaps.count)
        let through = itemCount > 0 ? batch.items[itemCount - 1].sequence : 0
        return Journal.Entry(t: .ack, through: through, gapKeys: gapKeys)
    }

    /// The live state as entries (for a compaction), when the file holds more than `threshold`
    /// dead bytes and more dead bytes than live ones; nil otherwise.
    func compacted(fileSize: Int, threshold: Int) -> [Journal.Entry]? {
        let dead = fileSize - liveBytes
        guard dead > threshold, dead > liveBytes, inFlight == nil else { return nil }
        var entries = [Journal.Entry(t: .base, nextSequence: nextSequence)]
        if !gaps.isEmpty { entries.append(Journal.Entry(t: .drop, gaps: gaps)) }
        entries += items.map { Journal.Entry(t: .item, item: $0) }
        return entries
    }

    /// No gap may grow any more: another process appended to the journal, and may have sent any.
    mutating func forgetMergeable() { mergeable = [] }

    /// Forgets the state before a compaction's entries are applied anew.
    mutating func reset() {
        let keep = mergeable
        self = ReportQueue(bound: bound, replaying: [], sizes: [])
        mergeable = keep
    }
}
