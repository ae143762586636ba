import LifecycleStore

/// Ids in ascending order, kept in chunks of at most ``chunkCapacity`` so that an insert or a
/// removal moves one chunk's worth of elements rather than the whole list (a flat sorted array
/// moved up to every id on each change, which the committer pays for under the instance cache's lock).
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

/// What a list page can ask for; a `nil` or `false` member matches every instance.
struct ListFilter: Hashable, Sendable {
    var model: String? = nil
    var state: String? = nil
    /// Only instances with an unexpected event on their counters.
    var hasUnexpected = false
    /// Only instances with an incomplete launch on their counters.
    var hasIncompleteLaunch = false
    /// Only instances with a divergence on their counters: where the app's code went wrong.
    var hasDivergence = false
}

/// The sorted ids matching each ``ListFilter`` that matches any instance, so a filtered list
/// page walks only ids that match, however few that is. An instance is in every list whose
/// filter it passes: four without a counted problem (any or its model, any or its state),
/// up to thirty-two with all three. The ``InstanceCache`` keeps it, under its lock, as the committer publishes.
struct InstanceIndex {
    /// What an instance is filed under.
    typealias Facts = (model: String, state: String, hasUnexpected: Bool, hasIncompleteLaunch: Bool, hasDivergence: Bool)

    private var lists: [ListFilter: SortedIDs] = [:]

    init() {}

    /// The index of instances given in ascending id order, built in one pass: start-up
    /// time grows with instances, so it pays for an append per list rather than a search.
    init(sortedByID instances: [(id: String, facts: Facts)]) {
        var lists: [ListFilter: [String]] = [:]
        for (id, facts) in instances {
            for filter in Self.filters(passedBy: facts) { lists[filter, default: []].append(id) }
        }
        self.lists = lists.mapValues { SortedIDs(sorted: $0) }
    }

    mutating func insert(_ id: String, _ facts: Facts) {
        for filter in Self.filters(passedBy: facts) { lists[filter, default: SortedIDs()].insert(id) }
    }

    mutating func remove(_ id: String, _ facts: Facts) {
        for filter in Self.filters(passedBy: facts) {
            lists[filter]?.remove(id)
            // Lists go with their last id, so filters do not outlive their instances.
            if lists[filter]?.isEmpty == true { lists[filter] = nil }
        }
    }

    /// Moves `id` between lists when what it is filed under changed.
    mutating func update(_ id: String, from old: Facts, to new: Facts) {
        guard old != new else { return }
        remove(id, old)
        insert(id, new)
    }

    /// Per state of `model`, in the order given: the instances in it now, and how many of
    /// them have an incomplete launch on their counters.
    func stateCounts(model: String, states: [String]) -> [(instances: Int, incompleteLaunches: Int)] {
        states.map { state in
            (lists[ListFilter(model: model, state: state)]?.count ?? 0,
             lists[ListFilter(model: model, state: state, hasIncompleteLaunch: true)]?.count ?? 0)
        }
    }

    /// A page of the ids matching `filter`; see ``SortedIDs/page(after:limit:)``.
    func page(_ filter: ListFilter, after cursor: String?, limit: Int) -> (ids: [String], hasMore: Bool) {
        lists[filter]?.page(after: cursor, limit: limit) ?? ([], false)
    }

    /// How many instances each model has in each state that has any.
    var countsByModelAndState: [(model: String, state: String, count: Int)] {
        lists.compactMap { filter, ids in
            guard let model = filter.model, let state = filter.state, !filter.hasUnexpected, !filter.hasIncompleteLaunch, !filter.hasDivergence
            else { return nil }
            return (model: model, state: state, count: ids.count)
        }
    }

    /// Every filter an instance with `facts` passes.
    private static func filters(passedBy facts: Facts) -> [ListFilter] {
        var filters: [ListFilter] = []
        for model in [nil, facts.model] {
            for state in [nil, facts.state] {
                for hasUnexpected in facts.hasUnexpected ? [false, true] : [false] {
                    for hasIncompleteLaunch in facts.hasIncompleteLaunch ? [false, true] : [false] {
                        for hasDivergence in facts.hasDivergence ? [false, true] : [false] {
                            filters.append(ListFilter(
                                model: model, state: state, hasUnexpected: hasUnexpected, hasIncompleteLaunch: hasIncompleteLaunch, hasDivergence: hasDivergence
                            ))
                        }
                    }
                }
            }
        }
        return filters
    }
}

extension StoredInstance {
    /// What ``InstanceIndex`` files the instance under.
    var indexFacts: InstanceIndex.Facts {
        (model, state.state, state.counters.unexpected > 0, state.counters.incompleteLaunches > 0, state.counters.divergences > 0)
    }
}
