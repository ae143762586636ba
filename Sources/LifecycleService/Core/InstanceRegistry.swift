import Foundation
import LifecycleHTTP
import LifecycleKit
import LifecycleStore
import LifecycleLog

/// Every live instance, its machine, and the one path by which they change: the front the
/// API calls.
///
/// Reads are answered from the ``InstanceCache`` (or, for an instance it does not hold, from
/// the store). Writes are queued for the ``Committer``, whose one thread decides them by the
/// ``WriteRules``, commits them in batches (``BatchCommitter``), publishes what committed to
/// the cache and the stream hub and then answers. ``ReplicaCatchUp`` keeps the cache level
/// with other processes that write to the same store, and ``StorageStatus`` says whether the
/// store works, for `/healthz`.
///
/// It knows nothing of HTTP: it answers in outcomes and refusals (Writes.swift), which the API
/// turns into responses and problems, and reports notable events to whoever made it, as the
/// store does.
final class InstanceRegistry: Sendable {
    /// The models instances may have, by name.
    let models: [String: Model]
    /// Every state of every loaded model, sorted and without repeats: what a `state` filter may name.
    let stateNames: [String]
    /// Where instances and records are committed.
    let store: any InstanceStore
    /// Where committed records go for streams.
    let hub: StreamHub
    /// The most instances there may be; a create past it is refused with ``Refusal/instanceLimit(_:)``.
    let maxInstances: Int
    /// What commits recorded and cost, for `/metrics`: updated after each commit.
    let metrics = CommitMetrics()
    private let cache: InstanceCache
    private let committer: Committer
    private let storage: StorageStatus
    /// Where notable events go (the service logs them).
    private let report: @Sendable (ServiceEvent) -> Void

    /// Rebuilds every stored instance; refuses to start if one names an unknown model or state.
    /// `maxInstances`: creates past it are refused. Instances already stored (under a higher
    /// limit before) are all loaded; only new ones wait for room. `pollInterval`: how long the
    /// committer waits, idle, before it asks the store whether others committed (the delay a
    /// lost wake-up hint can cause).
    init(
        models: [String: Model], store: any InstanceStore, hub: StreamHub, maxInstances: Int = .max,
        pollInterval: TimeInterval = 1, report: @escaping @Sendable (ServiceEvent) -> Void
    ) throws(StoreError) {
        self.models = models
        self.stateNames = Set(models.values.flatMap { $0.definition.states.map(\.name) }).sorted()
        self.store = store
        self.hub = hub
        self.maxInstances = maxInstances
        self.report = report
        // Before the instances are read: what they show is at least as new as this, and a
        // cache newer than `cacheThrough` is only ever read again after a catch-up.
        let cacheThrough = hub.lastSequence
        var instances = try store.loadInstances()
        // The stores read in id order, but a database's collation need not be Swift's.
        if !instances.indices.dropFirst().allSatisfy({ instances[$0 - 1].id < instances[$0].id }) { instances.sort { $0.id < $1.id } }
        cache = InstanceCache(sortedByID: instances, coverage: try store.loadCoverage(), findings: try store.loadFindings(), report: report)
        // Every model and state an instance is in must be loaded: checked once a pair, not once an
        // instance, and refused as restoring one instance in the pair refuses it.
        for pair in cache.instanceCounts where models[pair.model]?.definition.states.contains(where: { $0.name == pair.state }) != true {
            _ = try instances.first { $0.model == pair.model && $0.state.state == pair.state }?.restoredMachine(among: models)
        }
        storage = StorageStatus(report: report)
        let catchUp = ReplicaCatchUp(
            store: store, cache: cache, hub: hub, health: storage, models: models, cacheThrough: cacheThrough, report: report
        )
        committer = Committer(
            batches: BatchCommitter(
                store: store, cache: cache, hub: hub, health: storage, metrics: metrics, models: models, maxInstances: maxInstances,
                report: report, catchUp: catchUp
            ),
            pollInterval: pollInterval
        )
        store.observeCommitsElsewhere { [weak committer] in committer?.catchUpSoon() }
    }

    /// How many instances there are.
    var count: Int { cache.count }

    // MARK: reading (any thread)

    /// The instance as last committed.
    func instance(_ id: String) throws(Refusal) -> StoredInstance {
        if let cached = cache.instance(id) { return cached }
        return try committedInstance(id)
    }

    /// An instance the cache does not hold, as the store has it: one another replica has just
    /// created is found before this one has caught up (a client that creates through one
    /// replica and reads through another gets it, not a 404).
    private func committedInstance(_ id: String) throws(Refusal) -> StoredInstance {
        let found: StoredInstance?
        do {
            found = try store.instances([id]).first
        } catch {
            report(ServiceEvent(.error, "cannot read an instance", ["id": id, "error": error.message]))
            throw .storageUnreadable(what: "instance \"\(id)\"")
        }
        guard let found else { throw .unknownInstance(id) }
        return found
    }

    /// The instance as last committed: its `ETag` and its JSON.
    func renderedInstance(_ id: String) throws(Refusal) -> InstanceCache.Rendering {
        if let rendered = try cache.rendered(id) { return rendered }
        let stored = try committedInstance(id)
        return InstanceCache.Rendering(etag: InstanceTag(stored).etag, json: try cache.render(stored))
    }

    /// Instances in id order after `cursor` that match `filter`: one page.
    func list(_ filter: ListFilter, after cursor: String?, limit: Int) -> (items: [StoredInstance], hasMore: Bool) {
        cache.page(filter, after: cursor, limit: limit)
    }

    /// Instances per model and state (those with any), for `/metrics`.
    var instanceCounts: [(model: String, state: String, count: Int)] { cache.instanceCounts }

    /// A model's coverage as last committed (``InstanceCache/coverage(of:)``): counters and
    /// index are read under one lock, so they agree on which commits they include.
    func coverage(of model: Model) -> ModelCoverage {
        cache.coverage(of: model)
    }

    /// Findings as last committed (``InstanceCache/findings(label:limit:where:)``).
    func findings(label: LabelMatch?, limit: Int, where isWanted: (StoredFinding) -> Bool) -> [StoredFinding] {
        cache.findings(label: label, limit: limit, where: isWanted)
    }

    /// Findings over every instance, per kind, for `/metrics`.
    var findingCounts: [FindingKind: Int] { cache.findingCounts }

    /// Instances read by all list pages so far.
    var instancesReadByLists: Int { cache.instancesReadByLists }

    /// A page of the instance's records, from the store.
    func history(of id: String, after: Int64, divergentOnly: Bool, limit: PageLimit) throws(Refusal) -> HistoryPage {
        _ = try instance(id)
        do {
            return try store.history(instanceID: id, after: after, divergentOnly: divergentOnly, limit: limit)
        } catch {
            report(ServiceEvent(.error, "cannot read history", ["id": id, "error": error.message]))
            throw .storageUnreadable(what: "the history")
        }
    }

    /// The store's data was found damaged outside a write (its integrity check): reported
    /// as a write's damage is, until a restart.
    func storageDamaged(_ damage: StoreError) {
        storage.failed(damage)
    }

    /// Why the store cannot commit, while it cannot: `nil` once a write has committed since.
    var storageProblem: StorageFailure? { storage.problem }

    /// Appends the instance's JSON object to `json`; a value JSON cannot hold is logged and refused.
    func write(_ instance: StoredInstance, to json: inout JSONBuffer) throws(Refusal) {
        try cache.write(instance, to: &json)
    }

    // MARK: writing

    /// Queues a write; `completion` runs on the committer thread once it is committed or refused.
    /// `requestID` goes into the log lines the write makes.
    func submit(_ write: Write, requestID: String = "", completion: @escaping Completion) {
        committer.submit(CommitJob(write: write, requestID: requestID, completion: completion))
    }

    /// Queues one request's writes, in order, to commit together (``Committer/submit(group:)``);
    /// each is answered on its own completion.
    func submit(group: [CommitJob]) {
        committer.submit(group: group)
    }

    /// Answers what is queued, then ends the committer thread.
    func stop() {
        committer.stop()
    }
}
