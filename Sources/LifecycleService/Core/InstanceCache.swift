import Dispatch
import LifecycleHTTP
import LifecycleKit
import LifecycleStore
import LifecycleLog
import LifecycleLocks

/// Where an instance stands after a commit (or within the transaction being built).
enum StagedInstance {
    /// It exists, as this, with this machine.
    case present(StoredInstance, Machine)
    /// It does not (any more).
    case deleted
}

/// Every instance as last committed, the index a list page searches, the
/// coverage counters and each instance's JSON once rendered: what every read is answered from.
///
/// All of it is one value under one lock, so a reader sees one commit or the next, never half
/// of one (a page, the counters and the index agree). Only the committer changes it
/// (``publish(_:adding:replacing:)``), after the store has committed the change.
final class InstanceCache: Sendable {
    private let state: LockedValue<CacheState>
    /// Where a failed render is logged.
    private let report: @Sendable (ServiceEvent) -> Void

    /// A cache holding `instances` (sorted by id) and `coverage`. Machines are not kept: a
    /// write restores the one it needs from the instance's state, as a restart does, so a
    /// million instances do not each hold a second copy of their state.
    init(
        sortedByID instances: [StoredInstance], coverage: CoverageCounts, findings: StoredFindings = StoredFindings(),
        report: @escaping @Sendable (ServiceEvent) -> Void
    ) {
        // Both halves take about as long at a million instances, and a restart waits for them:
        // one is built on each of two threads.
        let built = LockedValue<(entries: CachedInstances?, index: InstanceIndex?)>((nil, nil))
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            if half == 0 {
                let entries = CachedInstances(instances)
                built.withLock { $0.entries = entries }
            } else {
                let index = InstanceIndex(sortedByID: instances.lazy.map { (id: $0.id, facts: $0.indexFacts) })
                built.withLock { $0.index = index }
            }
        }
        var state = built.withLock { CacheState(entries: $0.entries!, index: $0.index!, coverage: coverage) }
        state.apply(.replaced(findings))
        self.state = LockedValue(state)
        self.report = report
    }

    /// How many instances there are.
    var count: Int { state.withLock { $0.entries.count } }

    /// The instance `id`, if the cache holds it.
    func instance(_ id: String) -> StoredInstance? { state.withLock { $0.entries[id]?.instance } }

    /// An instance as a GET answers it.
    struct Rendering: Sendable {
        /// ``InstanceRegistry/InstanceTag/etag``.
        var etag: String
        var json: [UInt8]
    }

    /// The instance's `ETag` and JSON, if the cache holds it.
    ///
    /// Both are made at the first read after a change rather than on every read (and not at
    /// start-up, which must not grow with rendering work), outside the lock: two readers may
    /// both render it, and only a rendering of what is still cached is kept.
    func rendered(_ id: String) throws(InstanceRegistry.Refusal) -> Rendering? {
        guard let cached = state.withLock({ $0.entries[id] }) else { return nil }
        if let rendered = cached.rendered { return rendered }
        let rendered = Rendering(etag: InstanceRegistry.InstanceTag(cached.instance).etag, json: try render(cached.instance))
        state.withLock { state in state.entries.keep(rendered, for: id, madeAt: cached.stamp) }
        return rendered
    }

    /// Instances in id order after `cursor` that match `filter`.
    ///
    /// The index holds only matching ids, so the lock is held while one page is read, however
    /// many instances there are and however few match; the committer, which needs the lock to
    /// publish, waits at most that long.
    func page(_ filter: ListFilter, after cursor: String?, limit: Int) -> (items: [StoredInstance], hasMore: Bool) {
        state.withLock { state in
            let page = state.index.page(filter, after: cursor, limit: limit)
            let items = page.ids.map { state.entries[$0]!.instance }
            state.listReads += items.count
            return (items, page.hasMore)
        }
    }

    /// Instances read by list pages since start-up: a page reads those it returns, never the
    /// rest of the cache (a test holds it to that).
    var instancesReadByLists: Int { state.withLock { $0.listReads } }

    /// Instances per model and state (those with any).
    var instanceCounts: [(model: String, state: String, count: Int)] { state.withLock { $0.index.countsByModelAndState } }

    /// A model's coverage: per row (in table order) the records that took it and those of them
    /// that diverged, and per state (in the model's order) the instances in it now, the
    /// unexpected events recorded in it, the divergent records that ended in it and the
    /// instances in it with an incomplete launch.
    func coverage(of model: Model) -> ModelCoverage {
        let states = model.definition.states.map(\.name)
        return state.withLock { state in
            func count(_ kind: CoverageCounts.Kind, _ name: String) -> Int64 {
                state.coverage[CoverageCounts.Key(model: model.name, kind: kind, name: name)]
            }
            let rows = model.definition.transitions.indices.map { row in
                ModelCoverage.Row(taken: count(.rowTaken, Model.rowID(row)), divergent: count(.divergentRow, Model.rowID(row)))
            }
            let counts = zip(states, state.index.stateCounts(model: model.name, states: states)).map { name, counts in
                ModelCoverage.State(
                    instances: counts.instances, unexpected: count(.unexpectedEvent, name), divergences: count(.divergentState, name),
                    incompleteLaunches: counts.incompleteLaunches
                )
            }
            return ModelCoverage(rows: rows, states: counts)
        }
    }

    /// Makes what committed visible to readers, all at once: `added` counts the commit's
    /// records, and `replacing` is the whole of the counters as read from the store. For the
    /// committer only.
    func publish(_ changes: [String: StagedInstance], adding added: CoverageCounts?, replacing: CoverageCounts? = nil, findings: FindingChanges = .none) {
        if changes.isEmpty, replacing == nil, case .none = findings { return }
        state.withLock { state in
            if let replacing { state.coverage = replacing }
            if let added { state.coverage.add(added) }
            for (id, change) in changes { state.apply(change, to: id) }
            // After the instances: a finding's instance deleted in the same commit is not filed.
            state.apply(findings)
        }
    }

    /// The findings over every instance (`label` `nil`) or over those carrying `label`, that
    /// pass `isWanted`, most widespread first (instances, then records, then signature), at
    /// most `limit`. Walks the findings of that label only.
    func findings(label: LabelMatch?, limit: Int, where isWanted: (StoredFinding) -> Bool) -> [StoredFinding] {
        let found = state.withLock { state in (state.findings[label?.text ?? ""] ?? [:]).values.filter(isWanted) }
        return Array(found.sorted { a, b in
            (a.totals.instances, a.totals.count, b.subject.signature) > (b.totals.instances, b.totals.count, a.subject.signature)
        }.prefix(limit))
    }

    /// How many findings there are over every instance, per kind.
    var findingCounts: [FindingKind: Int] {
        state.withLock { state in
            (state.findings[""] ?? [:]).values.reduce(into: [:]) { counts, finding in counts[finding.subject.kind, default: 0] += 1 }
        }
    }

    /// The instance's JSON. Encoding fails only on a value JSON cannot hold (a number that is
    /// not finite); that is logged with the instance and refused, never answered with an empty body.
    func render(_ instance: StoredInstance) throws(InstanceRegistry.Refusal) -> [UInt8] {
        try refusingUnrenderable(instance) { try instance.jsonBytes() }
    }

    /// Appends the instance's JSON object (``render(_:)`` without the newline) to `json`: a list
    /// page writes each of its instances into its own body rather than copying one body per instance.
    func write(_ instance: StoredInstance, to json: inout JSONBuffer) throws(InstanceRegistry.Refusal) {
        try refusingUnrenderable(instance) { try instance.write(to: &json) }
    }

    /// What `encode` writes of `instance`; its failure logged and turned into the refusal both ways of rendering give.
    private func refusingUnrenderable<Result>(_ instance: StoredInstance, _ encode: () throws -> Result) throws(InstanceRegistry.Refusal) -> Result {
        do {
            return try encode()
        } catch {
            report(ServiceEvent(.error, "cannot render instance", ["id": instance.id, "version": String(instance.state.version), "error": "\(error)"]))
            throw .unrenderable(id: instance.id)
        }
    }
}

/// A model's coverage as counted: rows in table order, states in the model's order.
struct ModelCoverage: Equatable {
    struct Row: Equatable {
        /// Records that took the row.
        var taken: Int64
        /// Those of them with a divergence.
        var divergent: Int64
    }

    struct State: Equatable {
        /// Instances in the state now.
        var instances: Int
        /// Unexpected events recorded in it.
        var unexpected: Int64
        /// Divergent records that ended in it.
        var divergences: Int64
        /// Instances in it with an incomplete launch.
        var incompleteLaunches: Int
    }

    var rows: [Row]
    var states: [State]
}

/// The cached instances, stored densely: the instances in an array, in no order, and their
/// positions by id.
///
/// A dictionary of instances by id kept every value in its table of a power of two buckets,
/// most of them empty: about two million instance-sized buckets for a million instances, most
/// of the service's memory. Here the table holds positions and the array exactly the
/// instances. A removal moves the last instance into the hole, so positions stay dense.
private struct CachedInstances {
    /// The instances, in no order.
    private var instances: [StoredInstance]
    /// What reads made of each instance, at the same position: a separate array so that the
    /// instances loaded at start-up are kept as loaded, not copied.
    private var renderings: [Rendered]
    private var positions: [String: Int]

    /// One instance as read.
    struct Entry {
        var instance: StoredInstance
        /// Its tag and JSON, once a read has rendered them; `nil` again after each change.
        var rendered: InstanceCache.Rendering?
        /// Which change this is: a rendering is kept only if no change came while it was made.
        var stamp: UInt64
    }

    private struct Rendered {
        var rendering: InstanceCache.Rendering? = nil
        var stamp: UInt64 = 0
    }

    init(_ instances: [StoredInstance]) {
        self.instances = instances
        renderings = Array(repeating: Rendered(), count: instances.count)
        positions = Dictionary(minimumCapacity: instances.count)
        // By index: iterating the elements would copy each instance, a retain and release of each of its members.
        for position in instances.indices { positions[instances[position].id] = position }
    }

    var count: Int { instances.count }

    subscript(id: String) -> Entry? {
        positions[id].map { Entry(instance: instances[$0], rendered: renderings[$0].rendering, stamp: renderings[$0].stamp) }
    }

    func contains(_ id: String) -> Bool { positions[id] != nil }

    /// Keeps a rendering of `id` made from its change `stamp`, unless another change came since.
    mutating func keep(_ rendering: InstanceCache.Rendering, for id: String, madeAt stamp: UInt64) {
        guard let position = positions[id], renderings[position].stamp == stamp else { return }
        renderings[position].rendering = rendering
    }

    /// Adds `instance` or replaces the one of its id, as change `stamp`; the one replaced, if any.
    mutating func set(_ instance: StoredInstance, stamp: UInt64) -> StoredInstance? {
        guard let position = positions[instance.id] else {
            positions[instance.id] = instances.count
            instances.append(instance)
            renderings.append(Rendered(stamp: stamp))
            return nil
        }
        defer {
            instances[position] = instance
            renderings[position] = Rendered(stamp: stamp)
        }
        return instances[position]
    }

    /// Removes `id`; the instance removed, if there was one.
    mutating func remove(_ id: String) -> StoredInstance? {
        guard let position = positions.removeValue(forKey: id) else { return nil }
        let removed = instances[position]
        let last = (instances.removeLast(), renderings.removeLast())
        if position < instances.count {
            (instances[position], renderings[position]) = last
            positions[last.0.id] = position
        }
        return removed
    }
}

/// Everything the cache's lock guards.
private struct CacheState {
    var entries: CachedInstances
    /// The ids, sorted, overall and per state and model: a page of the list is a binary
    /// search and a walk over matching ids only.
    var index: InstanceIndex
    /// Rows taken (and taken with a divergence), unexpected events and divergences per state, as committed.
    var coverage: CoverageCounts
    /// Per label (`""`: every instance) and signature, the findings as committed.
    var findings: [String: [String: StoredFinding]] = [:]
    var listReads = 0
    /// The last ``CachedInstances/Entry/stamp`` given.
    var changes: UInt64 = 0

    mutating func apply(_ changes: FindingChanges) {
        switch changes {
        case .none: return
        case .written(let written, let instances):
            for finding in written { findings[finding.label, default: [:]][finding.subject.signature] = finding }
            for pair in instances where entries.contains(pair.instance) { index.fileFinding(pair.signature, of: pair.instance) }
        case .replaced(let stored):
            findings = [:]
            for finding in stored.findings { findings[finding.label, default: [:]][finding.subject.signature] = finding }
            index.removeAllFindings()
            for pair in stored.instances where entries.contains(pair.instance) { index.fileFinding(pair.signature, of: pair.instance) }
        }
    }

    mutating func apply(_ change: StagedInstance, to id: String) {
        switch change {
        case .present(let instance, _):
            changes += 1
            if let before = entries.set(instance, stamp: changes) {
                index.update(id, from: before.indexFacts, to: instance.indexFacts)
            } else {
                index.insert(id, instance.indexFacts)
            }
        case .deleted:
            guard let before = entries.remove(id) else { return }
            index.remove(id, before.indexFacts)
        }
    }
}

extension StoredInstance {
    /// The instance's machine, restored; throws when its model, or its state in that model,
    /// is not among `models`.
    func restoredMachine(among models: [String: Model]) throws(StoreError) -> Machine {
        guard let model = models[model] else {
            throw StoreError("instance \"\(id)\" uses model \"\(self.model)\", which is not loaded")
        }
        guard let machine = Machine(model: model, restoring: state) else {
            throw StoreError("instance \"\(id)\" is in state \"\(state.state)\", which model \"\(model.name)\" does not have")
        }
        return machine
    }
}
