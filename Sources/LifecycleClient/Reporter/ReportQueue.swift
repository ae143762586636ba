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

    /// What one batch holds, in the order sent: the oldest items, each pending gap (an instance
    /// may have several) just before its instance's first item that is not a `create` (so the
    /// instance exists when the gap arrives and the gap precedes what was kept), or first when
    /// its instance has none queued;
    /// a gap for items lost to damage, just before the first item after them (`lostFrom`).
    struct Batch {
        enum Member {
            case gap(PendingGap)
            case item(QueuedItem)
        }

        var members: [Member]
        var count: Int { members.count }
    }

    private(set) var items: [QueuedItem] = []
    private var sizes: [Int] = []
    private(set) var gaps: [PendingGap] = []
    /// Gaps made in this process and never handed to a batch: only these may grow (invariant 5).
    private var mergeable: Set<String> = []
    /// The batch in flight by its last item's sequence (0: gaps only; nil: no batch), not by a
    /// count: another process's `ack` or `drop`, applied meanwhile, removes leading items.
    private var inFlight: UInt64?
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

    /// The entries that queue `item` (framed as `size` bytes): `drop` entries first when the
    /// bound would be passed (the oldest items not in flight), then the item. An instance's
    /// last `create`, which its items kept or queued later need, stays (`keptCreates`) and still
    /// counts, so the bound drops more in its place; when only such creates are left to drop,
    /// the queue holds them past the bound (one an instance at most). `makeKey` makes a new
    /// gap's key.
    func entries(queueing item: QueuedItem, size: Int, makeKey: () -> String) -> [Journal.Entry] {
        let start = inFlightItems
        var end = start
        var kept: [Int] = []
        // Kept creates make room for fewer drops, and a longer range may keep other creates:
        // widen until the bound holds with the creates the range keeps (end only grows).
        while true {
            var count = items.count + 1 - (end - start) + kept.count
            var bytes = liveBytes + size - sizes[start..<end].reduce(0, +) + kept.reduce(0) { $0 + sizes[$1] }
            while count > bound.items || bytes > bound.bytes, end < items.count {
                count -= 1
                bytes -= sizes[end]
                end += 1
            }
            let next = keptCreates(start..<end, queueing: item)
            if next == kept { break }
            kept = next
        }
        let itemEntry = Journal.Entry(t: .item, item: item)
        let dropped = (start..<end).filter { !kept.contains($0) }
        guard !dropped.isEmpty else { return [itemEntry] }
        var counts: [String: Int] = [:]
        var order: [String] = []
        // A create dropped is one a later create of its instance stands for: not an input lost.
        for at in dropped where items[at].kind != .create {
            if counts[items[at].instance] == nil { order.append(items[at].instance) }
            counts[items[at].instance, default: 0] += 1
        }
        let changed = order.map { instance -> PendingGap in
            if let gap = gaps.first(where: { $0.instance == instance && mergeable.contains($0.key) }) {
                return PendingGap(key: gap.key, instance: instance, dropped: gap.dropped + counts[instance]!)
            }
            return PendingGap(key: makeKey(), instance: instance, dropped: counts[instance]!)
        }
        // One `drop` per run of dropped items between kept creates: each is a range of sequences.
        var drops: [Journal.Entry] = []
        var runStart = dropped[0]
        for (at, next) in zip(dropped, dropped.dropFirst() + [-1]) where next != at + 1 {
            drops.append(Journal.Entry(t: .drop, through: items[at].sequence, from: items[runStart].sequence))
            runStart = next
        }
        drops[drops.count - 1].gaps = changed
        return drops + [itemEntry]
    }

    /// The indices in `range` (the items about to be dropped) of the creates to keep: for each
    /// instance, its last create in the range, unless a create of it is in flight or its first
    /// item after the range (or `item`, queued after it) is a create. Without it every item of
    /// the instance kept or queued later, and its gap, would be answered 404.
    private func keptCreates(_ range: Range<Int>, queueing item: QueuedItem) -> [Int] {
        var last: [String: Int] = [:]
        for at in range where items[at].kind == .create { last[items[at].instance] = at }
        guard !last.isEmpty else { return [] }
        let sending = Set(items[..<range.lowerBound].lazy.filter { $0.kind == .create }.map(\.instance))
        return last.filter { instance, _ in
            guard !sending.contains(instance) else { return false }
            let next = items[range.upperBound...].first { $0.instance == instance } ?? (item.instance == instance ? item : nil)
            return next?.kind != .create
        }.values.sorted()
    }

    /// The number of leading items in the batch in flight: those queued still.
    private var inFlightItems: Int {
        guard let through = inFlight else { return 0 }
        return items.prefix { $0.sequence <= through }.count
    }

    /// Notes that gaps made by `entries(queueing:)` in this process may still grow.
    mutating func noteMergeable(_ entries: [Journal.Entry]) {
        for entry in entries where entry.t == .drop { for gap in entry.gaps ?? [] { mergeable.insert(gap.key) } }
    }

    /// The next batch to send, of at most `limit`; nil when one is in flight or nothing waits.
    mutating func takeBatch(limit: Int) -> Batch? {
        guard inFlight == nil, !(items.isEmpty && gaps.isEmpty) else { return nil }
        // A gap of an instance with a create queued waits for the instance's first other item:
        // sent before the create, it would be answered 404 and lost.
        let creating = Set(items.lazy.filter { $0.kind == .create }.map(\.instance))
        var held = gaps.filter { creating.contains($0.instance) || $0.lostFrom != nil }
        var members = gaps.filter { !creating.contains($0.instance) && $0.lostFrom == nil }.prefix(limit).map(Batch.Member.gap)
        var itemCount = 0
        var through: UInt64 = 0
        for item in items where members.count < limit {
            // Every gap of its instance waiting for it: there is one for each process that
            // dropped its items (a gap another process made may have been sent, so none grows),
            // and what each counts came before this item, the first kept.
            while item.kind != .create, members.count < limit,
                let at = held.firstIndex(where: { $0.instance == item.instance && item.sequence >= $0.lostFrom ?? 0 }) {
                members.append(.gap(held.remove(at: at)))
            }
            guard members.count < limit else { break }
            members.append(.item(item))
            itemCount += 1
            through = item.sequence
        }
        // Gaps of instances whose only queued items are creates, all in this batch: after them.
        if itemCount == items.count { members += held.prefix(limit - members.count).map(Batch.Member.gap) }
        for case .gap(let gap) in members { mergeable.remove(gap.key) }
        inFlight = through
        return Batch(members: members)
    }

    /// The batch in flight was not answered: it will be sent again, keys unchanged.
    mutating func release() { inFlight = nil }

    /// The `ack` entry for the first `answered` members of `batch` (nil when none), once it was
    /// answered; the batch is no longer in flight.
    mutating func acknowledgement(of batch: Batch, answered: Int) -> Journal.Entry? {
        inFlight = nil
        guard answered > 0 else { return nil }
        var gapKeys: [String] = []
        var through: UInt64 = 0
        for member in batch.members.prefix(answered) {
            switch member {
            case .gap(let gap): gapKeys.append(gap.key)
            case .item(let item): through = item.sequence
            }
        }
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

    /// Forgets the state before a compaction's entries are applied anew; what is in flight
    /// stays so, or the bound could drop it (a gap for items delivered) and a second batch go.
    mutating func reset() {
        let keep = (mergeable, inFlight)
        self = ReportQueue(bound: bound, replaying: [], sizes: [])
        (mergeable, inFlight) = keep
    }
}
