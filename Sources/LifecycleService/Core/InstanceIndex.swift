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

    /// Adds `id`, greater than every id here (as start-up has them, in order), to the last
    /// chunk, filling chunks only half so that the first inserts do not split at once; no search.
    mutating func append(greatest id: String) {
        if chunks.last.map({ $0.count >= Self.chunkCapacity / 2 }) ?? true {
            chunks.append([])
            chunks[chunks.count - 1].reserveCapacity(Self.chunkCapacity / 2)
        }
        chunks[chunks.count - 1].append(id)
        count += 1
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

    /// Whether `id` is here: a binary search.
    func contains(_ id: String) -> Bool {
        let chunk = chunkIndex(notBelow: id)
        guard chunk < chunks.count else { return false }
        let position = Self.firstIndex(notBelow: id, in: chunks[chunk])
        return position < chunks[chunk].count && chunks[chunk][position] == id
    }

    /// Where a walk in ascending order stands in the ids: see ``contains(_:movingForward:)``.
    struct Position {
        fileprivate var chunk = 0
        fileprivate var index = 0
    }

    /// Whether `id` is here, for a walk that asks of ids in ascending order: `position` moves
    /// forward to the first id not below `id`, and the next question starts there. Within a
    /// chunk each costs about the log of the distance moved (a gallop); leaving a chunk costs a
    /// search of the chunks after it. So a page that keeps the ids of one list that another
    /// also holds walks both once, rather than searching the other from its first id each time.
    func contains(_ id: String, movingForward position: inout Position) -> Bool {
        if position.chunk < chunks.count, chunks[position.chunk].last! < id {
            position.chunk = chunkIndex(notBelow: id, from: position.chunk + 1)
            position.index = 0
        }
        guard position.chunk < chunks.count else { return false }
        let ids = chunks[position.chunk]
        // Every id before `low` is below `id`, and the chunk's last is not: the gallop ends in it.
        var low = position.index
        var high = low
        var step = 1
        while ids[high] < id {
            low = high + 1
            high = min(low + step, ids.count - 1)
            step *= 2
        }
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        position.index = low
        return ids[low] == id
    }

    /// Up to `limit` ids after `cursor` (from the first when `nil`) that pass `isWanted`, and whether more follow.
    /// Touches only the ids it returns and one more: a binary search, then a short walk (with `isWanted`, the ids
    /// it turns away too).
    func page(after cursor: String?, limit: Int, where isWanted: (String) -> Bool = { _ in true }) -> (ids: [String], hasMore: Bool) {
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
            let id = chunks[chunk][position]
            position += 1
            guard isWanted(id) else { continue }
            if ids.count == limit { return (ids, true) }
            ids.append(id)
        }
        return (ids, false)
    }

    /// The first chunk from `first` on whose last id is `id` or greater (`chunks.count` if none).
    private func chunkIndex(notBelow id: String, from first: Int = 0) -> Int {
        var low = first
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
    /// Only instances carrying every one of these labels.
    var labels: Set<LabelMatch> = []
    /// Only instances that have this finding (its ``FindingKey/signature``).
    var finding: String? = nil

    /// The filter without labels and finding: what ``InstanceIndex`` keeps one list for each of.
    var withoutSets: ListFilter { ListFilter(model: model, state: state, hasUnexpected: hasUnexpected, hasIncompleteLaunch: hasIncompleteLaunch, hasDivergence: hasDivergence) }
}

/// The sorted ids matching each ``ListFilter`` that matches any instance, so a filtered list
/// page walks only ids that match, however few that is. An instance is in every list whose
/// filter it passes: four without a counted problem (any or its model, any or its state),
/// up to thirty-two with all three. The ``InstanceCache`` keeps it, under its lock, as the committer publishes.
///
/// Besides, one list per label (`key=value`) and one per finding (signature) an instance has.
/// Labels and findings are not multiplied into the lists above (an instance with sixteen labels
/// would be in hundreds of lists): a page that names them walks the shortest of the lists its
/// filter names and keeps the ids every other one holds (walking each forward beside it), so a page of
/// one label or one finding alone walks only matching ids, and a combination walks at most the
/// rarest part of it. Only the ids kept are read as instances.
struct InstanceIndex {
    /// What an instance is filed under.
    typealias Facts = (model: String, state: String, hasUnexpected: Bool, hasIncompleteLaunch: Bool, hasDivergence: Bool, labels: [String: String])

    private var lists: [ListFilter: SortedIDs] = [:]
    /// Per label, `key=value`, the instances carrying it.
    private var labelLists: [String: SortedIDs] = [:]
    /// Per finding's signature, the instances that have it (``fileFinding(_:of:)``).
    private var findingLists: [String: SortedIDs] = [:]
    /// Per instance with findings, their signatures: what a delete takes out of ``findingLists``.
    private var findingsOf: [String: Set<String>] = [:]

    init() {}

    /// The index of instances given in ascending id order, built in one pass: start-up
    /// time grows with instances, so it pays for an append per list rather than a search,
    /// and works out the lists of each distinct set of facts, and the name of each label's
    /// list, once rather than per instance.
    init(sortedByID instances: some Sequence<(id: String, facts: Facts)>) {
        var ids: [SortedIDs] = []
        var filtersOfList: [ListFilter] = []
        // Per instance's own filter (its model, state and counters exactly), the lists it is in.
        var listsOfFacts: [ListFilter: [Int]] = [:]
        var labelList: [LabelMatch: Int] = [:]
        var labelNames: [String] = []
        var labelIDs: [SortedIDs] = []
        for (id, facts) in instances {
            let own = ListFilter(
                model: facts.model, state: facts.state, hasUnexpected: facts.hasUnexpected,
                hasIncompleteLaunch: facts.hasIncompleteLaunch, hasDivergence: facts.hasDivergence
            )
            let lists: [Int]
            if let known = listsOfFacts[own] {
                lists = known
            } else {
                lists = Self.filters(passedBy: facts).map { filter in
                    if let known = filtersOfList.firstIndex(of: filter) { return known }
                    filtersOfList.append(filter)
                    ids.append(SortedIDs())
                    return ids.count - 1
                }
                listsOfFacts[own] = lists
            }
            for list in lists { ids[list].append(greatest: id) }
            for (key, value) in facts.labels {
                let label = LabelMatch(key: key, value: value)
                if let list = labelList[label] {
                    labelIDs[list].append(greatest: id)
                } else {
                    labelList[label] = labelIDs.count
                    labelNames.append(label.text)
                    labelIDs.append(SortedIDs())
                    labelIDs[labelIDs.count - 1].append(greatest: id)
                }
            }
        }
        self.lists = Dictionary(uniqueKeysWithValues: zip(filtersOfList, ids))
        self.labelLists = Dictionary(uniqueKeysWithValues: zip(labelNames, labelIDs))
    }

    mutating func insert(_ id: String, _ facts: Facts) {
        for filter in Self.filters(passedBy: facts) { lists[filter, default: SortedIDs()].insert(id) }
        for (key, value) in facts.labels { labelLists[LabelMatch(key: key, value: value).text, default: SortedIDs()].insert(id) }
    }

    /// Takes `id` out of every list, its findings' too: a deleted instance has none any more.
    mutating func remove(_ id: String, _ facts: Facts) {
        unfile(id, facts)
        for signature in findingsOf.removeValue(forKey: id) ?? [] { Self.remove(id, from: signature, in: &findingLists) }
    }

    /// Takes `id` out of the lists `facts` file it under.
    private mutating func unfile(_ id: String, _ facts: Facts) {
        for filter in Self.filters(passedBy: facts) {
            lists[filter]?.remove(id)
            // Lists go with their last id, so filters do not outlive their instances.
            if lists[filter]?.isEmpty == true { lists[filter] = nil }
        }
        for (key, value) in facts.labels { Self.remove(id, from: LabelMatch(key: key, value: value).text, in: &labelLists) }
    }

    /// Files `id` under the finding `signature` (again is a no-op).
    mutating func fileFinding(_ signature: String, of id: String) {
        guard findingsOf[id, default: []].insert(signature).inserted else { return }
        findingLists[signature, default: SortedIDs()].insert(id)
    }

    /// Forgets every finding's instances (a replica reads them again from the store).
    mutating func removeAllFindings() {
        findingLists = [:]
        findingsOf = [:]
    }

    private static func remove(_ id: String, from list: String, in lists: inout [String: SortedIDs]) {
        lists[list]?.remove(id)
        if lists[list]?.isEmpty == true { lists[list] = nil }
    }

    /// Moves `id` between lists when what it is filed under changed.
    mutating func update(_ id: String, from old: Facts, to new: Facts) {
        guard old != new else { return }
        unfile(id, old)
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
        var named: [SortedIDs] = []
        for label in filter.labels {
            guard let list = labelLists[label.text] else { return ([], false) }
            named.append(list)
        }
        if let finding = filter.finding {
            guard let list = findingLists[finding] else { return ([], false) }
            named.append(list)
        }
        guard let base = lists[filter.withoutSets] else { return ([], false) }
        if named.isEmpty { return base.page(after: cursor, limit: limit) }
        // A filter of no model, state or counter: every instance's list, which the named ones are within.
        if filter.withoutSets != ListFilter() { named.append(base) }
        named.sort { $0.count < $1.count }
        let others = Array(named.dropFirst())
        var positions = Array(repeating: SortedIDs.Position(), count: others.count)
        return named[0].page(after: cursor, limit: limit) { id in
            others.indices.allSatisfy { others[$0].contains(id, movingForward: &positions[$0]) }
        }
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
        (model, state.state, state.counters.unexpected > 0, state.counters.incompleteLaunches > 0, state.counters.divergences > 0, labels)
    }
}
