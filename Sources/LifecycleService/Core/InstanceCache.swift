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

/// Every instance as last committed, with its machine, the index a list page searches, the
/// coverage counters and each instance's JSON once rendered: what every read is answered from.
///
/// All of it is one value under one lock, so a reader sees one commit or the next, never half
/// of one (a page, the counters and the index agree). Only the committer changes it
/// (``publish(_:adding:replacing:)``), after the store has committed the change.
final class InstanceCache: Sendable {
    private let state: LockedValue<CacheState>
    /// Where a failed render is logged.
    private let report: @Sendable (ServiceEvent) -> Void

    /// A cache holding `instances` (sorted by id, each with its machine) and `coverage`.
    init(
        sortedByID instances: [(StoredInstance, Machine)], coverage: CoverageCounts, findings: StoredFindings = StoredFindings(),
        report: @escaping @Sendable (ServiceEvent) -> Void
    ) {
        var entries: [String: CachedInstance] = [:]
        entries.reserveCapacity(instances.count)
        for (instance, machine) in instances { entries[instance.id] = CachedInstance(instance: instance, machine: machine) }
        let index = InstanceIndex(sortedByID: instances.map { (id: $0.0.id, facts: $0.0.indexFacts) })
        var state = CacheState(entries: entries, index: index, coverage: coverage)
        state.apply(.replaced(findings))
        self.state = LockedValue(state)
        self.report = report
    }

    /// How many instances there are.
    var count: Int { state.withLock { $0.entries.count } }

    /// The instance `id` and its machine, if the cache holds it.
    func committed(_ id: String) -> (instance: StoredInstance, machine: Machine)? {
        state.withLock { state in state.entries[id].map { ($0.instance, $0.machine) } }
    }

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
        state.withLock { state in
            if state.entries[id]?.stamp == cached.stamp { state.entries[id]?.rendered = rendered }
        }
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
        do {
            return try instance.jsonBytes()
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

/// One cached instance.
private struct CachedInstance {
    var instance: StoredInstance
    var machine: Machine
    /// Its tag and JSON, once a read has rendered them; `nil` again after each change.
    var rendered: InstanceCache.Rendering?
    /// Which change this is: a rendering is kept only if no change came while it was made.
    var stamp: UInt64 = 0
}

/// Everything the cache's lock guards.
private struct CacheState {
    var entries: [String: CachedInstance]
    /// The ids, sorted, overall and per state and model: a page of the list is a binary
    /// search and a walk over matching ids only.
    var index: InstanceIndex
    /// Rows taken (and taken with a divergence), unexpected events and divergences per state, as committed.
    var coverage: CoverageCounts
    /// Per label (`""`: every instance) and signature, the findings as committed.
    var findings: [String: [String: StoredFinding]] = [:]
    var listReads = 0
    /// The last ``CachedInstance/stamp`` given.
    var changes: UInt64 = 0

    mutating func apply(_ changes: FindingChanges) {
        switch changes {
        case .none: return
        case .written(let written, let instances):
            for finding in written { findings[finding.label, default: [:]][finding.subject.signature] = finding }
            for pair in instances where entries[pair.instance] != nil { index.fileFinding(pair.signature, of: pair.instance) }
        case .replaced(let stored):
            findings = [:]
            for finding in stored.findings { findings[finding.label, default: [:]][finding.subject.signature] = finding }
            index.removeAllFindings()
            for pair in stored.instances where entries[pair.instance] != nil { index.fileFinding(pair.signature, of: pair.instance) }
        }
    }

    mutating func apply(_ change: StagedInstance, to id: String) {
        switch change {
        case .present(let instance, let machine):
            changes += 1
            if let before = entries[id]?.instance {
                index.update(id, from: before.indexFacts, to: instance.indexFacts)
            } else {
                index.insert(id, instance.indexFacts)
            }
            entries[id] = CachedInstance(instance: instance, machine: machine, stamp: changes)
        case .deleted:
            guard let before = entries.removeValue(forKey: id) else { return }
            index.remove(id, before.instance.indexFacts)
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
