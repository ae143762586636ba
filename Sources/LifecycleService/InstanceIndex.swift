import LifecycleStore

/// Ids in ascending order, kept in chunks of at most ``chunkCapacity`` so that an insert or a
/// removal moves one chunk's worth of elements rather than the whole list (a flat sorted array
/// moved up to every id on each change, which the committer pays for under the registry lock).
///
/// Chunks are made only by splitting a full one, so there are never more than
/// (the most ids ever held) / (chunkCapacity / 2) of them; empty ones are dropped.
struct SortedIDs {
    static let chunkCapacity = 512

    private var chunks: [[String]] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    init() {}

    /// Ids already ascending and without repeats (as start-up has them), in half-full chunks
    /// so that the first inserts do not split at once; no search per id.
    init(sorted ids: [String]) {
        let size = Self.chunkCapacity / 2
        chunks = stride(from: 0, to: ids.count, by: size).map { Array(ids[$0..<min($0 + size, ids.count)]) }
        count = ids.count
    }

    /// Adds `id`; `false` if it was already there.
    @discardableResult
    mutating func insert(_ id: String) -> Bool {
        guard !chunks.isEmpty else {
            chunks = [[id]]
            count = 1
            return true
        }
        let chunk = min(chunkIndex(notBelow: id), chunks.count - 1)
        let position = Self.firstIndex(notBelow: id, in: chunks[chunk])
        if position < chunks[chunk].count, chunks[chunk][position] == id { return false }
        chunks[chunk].insert(id, at: position)
        count += 1
        if chunks[chunk].count > Self.chunkCapacity {
            let half = chunks[chunk].count / 2
            let upper = Array(chunks[chunk][half...])
            chunks[chunk].removeSubrange(half...)
            chunks.insert(upper, at: chunk + 1)
        }
        return true
    }

    /// Removes `id`; `false` if it was not there.
    @discardableResult
    mutating func remove(_ id: String) -> Bool {
        let chunk = chunkIndex(notBelow: id)
        guard chunk < chunks.count else { return false }
        let position = Self.firstIndex(notBelow: id, in: chunks[chunk])
        guard position < chunks[chunk].count, chunks[chunk][position] == id else { return false }
        chunks[chunk].remove(at: position)
        count -= 1
        if chunks[chunk].isEmpty { chunks.remove(at: chunk) }
        return true
    }

    /// Up to `limit` ids after `cursor` (from the first when `nil`), and whether more follow.
    /// Touches only the ids it returns and one more: a binary search, then a short walk.
    func page(after cursor: String?, limit: Int) -> (ids: [String], hasMore: Bool) {
        var chunk = 0
        var position = 0
        if let cursor {
            chunk = chunkIndex(above: cursor)
            if chunk < chunks.count { position = Self.firstIndex(above: cursor, in: chunks[chunk]) }
        }
        var ids: [String] = []
        ids.reserveCapacity(min(limit, count))
        while chunk < chunks.count {
            if position == chunks[chunk].count {
                chunk += 1
                position = 0
                continue
            }
            if ids.count == limit { return (ids, true) }
            ids.append(chunks[chunk][position])
            position += 1
        }
        return (ids, false)
    }

    /// The first chunk whose last id is `id` or greater (`chunks.count` if none).
    private func chunkIndex(notBelow id: String) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle].last! < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first chunk whose last id is greater than `id` (`chunks.count` if none).
    private func chunkIndex(above id: String) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle].last! <= id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func firstIndex(notBelow id: String, in ids: [String]) -> Int {
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func firstIndex(above id: String, in ids: [String]) -> Int {
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] <= id { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// Every instance id, and the ids per state, per model and per model and state, each sorted,
/// so a filtered list page walks only ids that match; and per model and state how many
/// instances have an incomplete launch on their counters. The committer keeps it as it publishes.
struct InstanceIndex {
    private struct ModelAndState: Hashable {
        var model: String
        var state: String
    }

    /// What an instance is filed under.
    typealias Facts = (model: String, state: String, hasIncompleteLaunch: Bool)

    private(set) var all = SortedIDs()
    private var byState: [String: SortedIDs] = [:]
    private var byModel: [String: SortedIDs] = [:]
    private var byModelAndState: [ModelAndState: SortedIDs] = [:]
    /// Counted, not listed: no request pages through them.
    private var incompleteLaunches: [ModelAndState: Int] = [:]

    init() {}

    /// The index of instances given in ascending id order, built in one pass: start-up
    /// time grows with instances, so it pays for an append per list rather than a search.
    init(sortedByID instances: [(id: String, facts: Facts)]) {
        var byState: [String: [String]] = [:]
        var byModel: [String: [String]] = [:]
        var byModelAndState: [ModelAndState: [String]] = [:]
        for (id, instance) in instances {
            byState[instance.state, default: []].append(id)
            byModel[instance.model, default: []].append(id)
            let key = ModelAndState(model: instance.model, state: instance.state)
            byModelAndState[key, default: []].append(id)
            if instance.hasIncompleteLaunch { incompleteLaunches[key, default: 0] += 1 }
        }
        all = SortedIDs(sorted: instances.map(\.id))
        self.byState = byState.mapValues { SortedIDs(sorted: $0) }
        self.byModel = byModel.mapValues { SortedIDs(sorted: $0) }
        self.byModelAndState = byModelAndState.mapValues { SortedIDs(sorted: $0) }
    }

    mutating func insert(_ id: String, _ facts: Facts) {
        all.insert(id)
        byModel[facts.model, default: SortedIDs()].insert(id)
        add(id, facts)
    }

    mutating func remove(_ id: String, _ facts: Facts) {
        all.remove(id)
        Self.remove(id, from: &byModel, at: facts.model)
        drop(id, facts)
    }

    /// Moves `id` between state lists and counts when its state (or model, or whether it
    /// had an incomplete launch) changed.
    mutating func update(_ id: String, from old: Facts, to new: Facts) {
        guard old != new else { return }
        if old.model != new.model {
            Self.remove(id, from: &byModel, at: old.model)
            byModel[new.model, default: SortedIDs()].insert(id)
        }
        drop(id, old)
        add(id, new)
    }

    /// Per state of `model`, in the order given: the instances in it now, and how many of
    /// them have an incomplete launch on their counters.
    func stateCounts(model: String, states: [String]) -> [(instances: Int, incompleteLaunches: Int)] {
        states.map { state in
            let key = ModelAndState(model: model, state: state)
            return (byModelAndState[key]?.count ?? 0, incompleteLaunches[key] ?? 0)
        }
    }

    /// A page of the ids matching both filters (either may be absent); see ``SortedIDs/page(after:limit:)``.
    func page(state: String?, model: String?, after cursor: String?, limit: Int) -> (ids: [String], hasMore: Bool) {
        let ids: SortedIDs? = switch (state, model) {
        case (nil, nil): all
        case (let state?, nil): byState[state]
        case (nil, let model?): byModel[model]
        case (let state?, let model?): byModelAndState[ModelAndState(model: model, state: state)]
        }
        return ids?.page(after: cursor, limit: limit) ?? ([], false)
    }

    /// How many instances each model has in each state that has any.
    var countsByModelAndState: [(model: String, state: String, count: Int)] {
        byModelAndState.map { (model: $0.key.model, state: $0.key.state, count: $0.value.count) }
    }

    private mutating func add(_ id: String, _ facts: Facts) {
        let key = ModelAndState(model: facts.model, state: facts.state)
        byState[facts.state, default: SortedIDs()].insert(id)
        byModelAndState[key, default: SortedIDs()].insert(id)
        if facts.hasIncompleteLaunch { incompleteLaunches[key, default: 0] += 1 }
    }

    private mutating func drop(_ id: String, _ facts: Facts) {
        let key = ModelAndState(model: facts.model, state: facts.state)
        Self.remove(id, from: &byState, at: facts.state)
        Self.remove(id, from: &byModelAndState, at: key)
        if facts.hasIncompleteLaunch {
            incompleteLaunches[key, default: 0] -= 1
            if incompleteLaunches[key] == 0 { incompleteLaunches[key] = nil }
        }
    }

    /// Removes `id` from one list, and the list once empty, so keys do not outlive their ids.
    private static func remove<Key: Hashable>(_ id: String, from lists: inout [Key: SortedIDs], at key: Key) {
        lists[key]?.remove(id)
        if lists[key]?.isEmpty == true { lists[key] = nil }
    }
}

extension StoredInstance {
    /// What ``InstanceIndex`` files the instance under.
    var indexFacts: InstanceIndex.Facts { (model, state.state, state.counters.incompleteLaunches > 0) }
}
