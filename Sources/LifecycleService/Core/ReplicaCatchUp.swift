import LifecycleKit
import LifecycleStore
import LifecycleLog

/// Keeps the cache and the stream hub level with commits other processes make to the same
/// store (replicas on one PostgreSQL). Runs on the committer thread only, which owns it.
///
/// The cache is trusted for a decision only while no one else has committed since it was
/// last brought up to date: ``cacheThrough``. Each transaction starts from the store's last
/// committed sequence number, and when that is not ``cacheThrough`` the transaction's writes
/// read instances as committed instead (``BatchCommitter``), and the records others committed
/// reach the hub first, from the store, in sequence order. Besides after such a commit,
/// catching up happens on the store's wake-up hint and by polling (``catchUpWithStore()``).
///
/// On a store no one else writes (the embedded SQLite store) the last sequence is always
/// ``cacheThrough``: none of this reads anything.
struct ReplicaCatchUp {
    private let store: any InstanceStore
    private let cache: InstanceCache
    private let hub: StreamHub
    private let health: StorageStatus
    private let models: [String: Model]
    private let report: @Sendable (ServiceEvent) -> Void
    /// The cache holds every commit up to this sequence number, and (unless another process
    /// has written since) nothing later.
    private(set) var cacheThrough: Int64

    /// Records read from the store at a time while catching up.
    static let pageSize = 1024

    /// A catch-up for a cache that holds every commit through `cacheThrough`.
    init(
        store: any InstanceStore, cache: InstanceCache, hub: StreamHub, health: StorageStatus, models: [String: Model],
        cacheThrough: Int64, report: @escaping @Sendable (ServiceEvent) -> Void
    ) {
        self.store = store
        self.cache = cache
        self.hub = hub
        self.health = health
        self.models = models
        self.cacheThrough = cacheThrough
        self.report = report
    }

    /// Catches up with what the store says others committed, when idle or told to.
    ///
    /// A failure is a storage problem until a read works again (or a write commits): an idle
    /// replica whose database went away says so on `/healthz` before any write fails.
    mutating func catchUpWithStore() {
        do {
            let latest = try store.latestSequence()
            if latest > cacheThrough { try catchUp(through: latest) }
        } catch {
            warnCannotCatchUp(error)
            health.failed(error, isReadOnly: true)
            return
        }
        health.readable()
        probeCommits()
    }

    /// Before a transaction that began at `start` is published: brings the cache and the hub
    /// up to it if others committed first. Whether they are up to it; if not, the records
    /// before it wait for the next catch-up, which reads them from the store.
    mutating func catchUp(before start: Int64) -> Bool {
        guard start != cacheThrough else { return true }
        do {
            try catchUp(through: start)
            return true
        } catch {
            warnCannotCatchUp(error)
            return false
        }
    }

    /// This process's own records through `sequence` are published: the cache holds them.
    mutating func published(through sequence: Int64) {
        cacheThrough = sequence
    }

    /// An empty transaction, while ``StorageHealth/needsProbe``.
    private func probeCommits() {
        guard health.needsProbe else { return }
        do {
            try store.write { _ in }
            health.committed()
        } catch {
            health.failed(error)
        }
    }

    /// Brings the hub and the cache up to `target`, a sequence number known committed: the
    /// records after ``cacheThrough`` go to the hub in order (those a retention or a delete
    /// has already dropped are missed, as a replay misses them), each page's after the
    /// instances it touched are read again as committed and put in the cache, as this
    /// process's own commits are published: a client that sees a record on a stream and then
    /// reads its instance finds the instance at least that far along. Then the coverage
    /// counters and findings. Throws, changing nothing more, when the store cannot be read;
    /// the next catch-up starts where this stopped.
    private mutating func catchUp(through target: Int64) throws(StoreError) {
        var position = cacheThrough
        while position < target {
            let page = try store.replay(
                after: position, through: target, filter: RecordFilter(), limit: PageLimit(records: Self.pageSize, bytes: hub.settings.pageBytes)
            )
            try publishInstances(Set(page.records.map(\.instance)))
            let published = hub.lastSequence
            hub.publish(page.records.filter { $0.sequence > published })
            position = max(page.coveredThrough, page.records.last?.sequence ?? position)
        }
        let coverage = try store.loadCoverage()
        let findings = try store.loadFindings()
        cache.publish([:], adding: nil, replacing: coverage, findings: .replaced(findings))
        cacheThrough = target
    }

    /// The instances `ids` as committed now, into the cache; an id not found was deleted.
    private func publishInstances(_ ids: Set<String>) throws(StoreError) {
        guard !ids.isEmpty else { return }
        let fresh = try store.instances(ids.sorted())
        var changes: [String: StagedInstance] = Dictionary(uniqueKeysWithValues: ids.map { ($0, .deleted) })
        for instance in fresh {
            do {
                changes[instance.id] = .present(instance, try instance.restoredMachine(among: models))
            } catch {
                report(ServiceEvent(.error, "an instance another replica wrote cannot be restored here", ["id": instance.id, "error": error.message]))
                changes[instance.id] = nil
            }
        }
        cache.publish(changes, adding: nil)
    }

    private func warnCannotCatchUp(_ error: StoreError) {
        report(ServiceEvent(.warning, "cannot catch up with commits of other replicas", ["after": String(cacheThrough), "error": error.message]))
    }
}
