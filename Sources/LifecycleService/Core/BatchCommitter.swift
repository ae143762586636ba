import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleLog
import LifecycleLocks

/// Commits batches of writes, one transaction each, on the committer thread (which owns it).
///
/// The writes of a batch are decided in arrival order by ``WriteRules``, each against what
/// the ones before it left, and carried out in one store transaction (group commit; SQLite or
/// PostgreSQL): that is all a batch costs while the store works. Only after the commit are the
/// new states published to the cache, the transaction's records to the stream hub (in sequence
/// order, one transaction after another) and the writes answered, so an acknowledged write is
/// always durable and a failed commit changes nothing anyone has seen.
///
/// Where the store stages transactions (SQLite, ``InstanceStore/stage(after:)``) and more
/// writes wait behind a batch, it is decided in memory and committed on the writer thread,
/// while this thread decides the next batch against what the one committing will leave:
/// deciding and committing take turns on two cores rather than one. Nothing of the next batch is answered or shown before the one
/// committing has committed; if it fails instead, the next is decided again.
struct BatchCommitter {
    /// Where batches commit.
    let store: any InstanceStore
    /// Where committed instances are published, and the decisions read while it is current.
    let cache: InstanceCache
    /// Where committed records are published.
    let hub: StreamHub
    /// Whether the store commits, as the batches find it.
    let health: StorageStatus
    /// What commits recorded and cost.
    let metrics: CommitMetrics
    /// The models instances may have, by name.
    let models: [String: Model]
    /// The most instances there may be.
    let maxInstances: Int
    /// Where notable events go.
    let report: @Sendable (ServiceEvent) -> Void
    /// What others committed: read before a transaction's own records are published.
    var catchUp: ReplicaCatchUp
    /// Where staged transactions commit, one at a time.
    private let writer = DispatchQueue(label: "lifecycled-writer")
    /// The creation times of instances deleted lately, for the creates that follow them.
    private let deletions = RecentDeletions()
    /// The batch the writer thread is committing, if any.
    private var committing: Staged?

    /// Whether a batch is committing on the writer thread: answered only by ``settle()``.
    var isCommitting: Bool { committing != nil }

    init(
        store: any InstanceStore, cache: InstanceCache, hub: StreamHub, health: StorageStatus, metrics: CommitMetrics, models: [String: Model],
        maxInstances: Int, report: @escaping @Sendable (ServiceEvent) -> Void, catchUp: ReplicaCatchUp
    ) {
        self.store = store
        self.cache = cache
        self.hub = hub
        self.health = health
        self.metrics = metrics
        self.models = models
        self.maxInstances = maxInstances
        self.report = report
        self.catchUp = catchUp
    }

    /// Commits `batch` in one transaction, or in smaller ones if one write's data fails it.
    /// Where the store stages transactions and `isMoreWaiting` (writes wait behind this
    /// batch), it is decided now and handed to the writer thread, and then the batch that was
    /// committing there is published and answered. With nothing waiting there is nothing to
    /// decide while it commits, so it commits here: a round trip through the writer thread
    /// would only add to every write's wait (single writes from many clients, which the
    /// committer takes all at once).
    mutating func commit(_ batch: [CommitJob], isMoreWaiting: Bool) {
        let jobs = batch[...]
        guard isMoreWaiting, let next = stage(jobs) else {
            settle()
            return commitNow(jobs)
        }
        if let previous = committing {
            committing = nil
            let (result, seconds) = previous.outcome.wait()
            guard case .success = result else {
                conclude(previous, result, seconds)
                // Decided against writes that did not commit: decided again.
                return commit(batch, isMoreWaiting: isMoreWaiting)
            }
            // The writer thread commits the next while this one publishes and answers.
            start(next)
            committing = next
            return conclude(previous, result, seconds)
        }
        start(next)
        committing = next
    }

    /// Waits for the batch committing on the writer thread, then publishes and answers it:
    /// before the committer sleeps, catches up or stops, as nothing else would answer it.
    mutating func settle() {
        guard let previous = committing else { return }
        committing = nil
        let (result, seconds) = previous.outcome.wait()
        conclude(previous, result, seconds)
    }

    /// `jobs` decided in a staged transaction that follows the batch committing, if any; `nil`
    /// where the store stages nothing, the cache cannot decide them (another process committed),
    /// or they read the database (a delete), which they then do in ``commitNow(_:)``.
    private func stage(_ jobs: ArraySlice<CommitJob>) -> Staged? {
        guard let transaction = store.stage(after: committing?.attempt.endSequence) else { return nil }
        // A staged batch follows one the cache decided, or the cache is current.
        guard committing != nil || transaction.startSequence == catchUp.cacheThrough else { return nil }
        let started = DispatchTime.now().uptimeNanoseconds
        let presuming = jobs.contains(where: \.write.hasIdempotencyKey)
        var view = TransactionView(
            transaction: transaction, cache: cache, models: models, deletions: deletions, isCacheCurrent: true, committing: committing?.attempt
        )
        do {
            var attempt = try decide(jobs, presumingKeysNew: presuming, &view, transaction)
            // Its statements made here too: the writer thread, which the rate waits on, only runs them.
            try transaction.prepareWrites()
            attempt.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            return Staged(jobs: jobs, attempt: attempt, handover: Handover(transaction: transaction, tally: attempt.tally), isPresumingKeysNew: presuming)
        } catch {
            // Decided again in a transaction of its own, where a failure that is real shows as it always did.
            return nil
        }
    }

    /// Hands a staged batch to the writer thread, which commits it with its findings.
    private func start(_ staged: Staged) {
        let (store, handover, outcome) = (store, staged.handover, staged.outcome)
        writer.async {
            let started = DispatchTime.now().uptimeNanoseconds
            let result = Result { () throws(StoreError) in
                try store.commit(handover.transaction) { (transaction) throws(StoreError) in try Self.storeFindings(handover.tally, in: transaction) }
            }
            outcome.complete(result, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        }
    }

    /// What a staged batch's commit came to: published and answered, or, if it failed, as
    /// ``commitNow(_:)`` goes on after a failed first transaction.
    private mutating func conclude(_ staged: Staged, _ result: Result<FindingChanges, StoreError>, _ seconds: Double) {
        switch result {
        case .success(let findings):
            var attempt = staged.attempt
            attempt.findings = findings
            attempt.seconds += seconds
            finish(staged.jobs, attempt)
        case .failure(let error) where staged.isPresumingKeysNew && error.kind == .rejectedWrite:
            do {
                finish(staged.jobs, try attempt(staged.jobs, presumingKeysNew: false))
            } catch {
                failed(staged.jobs, error)
            }
        case .failure(let error):
            failed(staged.jobs, error)
        }
    }

    /// Commits `jobs` here, in one transaction, or in smaller ones if one write's data fails it.
    private mutating func commitNow(_ jobs: ArraySlice<CommitJob>) {
        do {
            finish(jobs, try attempt(jobs))
        } catch {
            failed(jobs, error)
        }
    }

    /// After a group's transaction failed: committed again in halves, or answered failed.
    private mutating func failed(_ jobs: ArraySlice<CommitJob>, _ error: StoreError) {
        guard Self.splits(error), jobs.count > 1 else { return fail(jobs, error) }
        report(ServiceEvent(.warning, "group commit failed; committing its writes in smaller groups", ["writes": String(jobs.count), "error": error.message]))
        commitInHalves(jobs)
    }

    /// After a failed transaction every answer it would have given is void: each was decided
    /// against writes that are now rolled back (a refused create of an id whose creation was
    /// undone, a 404 after an undone delete, a 412 against a version never stored). When
    /// the failure lies in one write's data, the writes are committed again in two halves, in
    /// order, each half decided against what the halves before it committed, down to single
    /// writes; only the write that fails on its own is answered 503, and it costs its batch
    /// about 2·log2(n) transactions, not n. A failure of the store itself (a full disk, an I/O
    /// error, a lock held elsewhere) would fail every part the same way, after as long a wait
    /// each time, so the group is answered 503 at once.
    private mutating func commitInHalves(_ jobs: ArraySlice<CommitJob>) {
        let middle = jobs.startIndex + jobs.count / 2
        for half in [jobs[..<middle], jobs[middle...]] {
            do {
                finish(half, try attempt(half))
            } catch {
                if Self.splits(error), half.count > 1 { commitInHalves(half) } else { fail(half, error) }
            }
        }
    }

    /// Whether a failed group is committed again in halves: when the failure may be one write's
    /// (its data; or damage, which may lie only in what one write touches). Any other failure is
    /// the store's, which would fail every half the same way.
    private static func splits(_ error: StoreError) -> Bool {
        switch error.kind {
        case .rejectedWrite, .damaged: true
        case .diskFull, .dataLoss, .unavailable, .busy, .other: false
        }
    }

    /// Runs `jobs` in one transaction, in order, and commits it.
    ///
    /// Writes with idempotency keys go first in a transaction that presumes their keys new
    /// (``StoreTransaction/presumeKeysNew()``), which reads no key: the store's unique key
    /// refuses one stored already. If the store refuses it (a replayed key, or a write's data),
    /// nothing of it was committed or shown, and the writes are decided again in a transaction
    /// that reads every key: a replay is answered as its first request was, and a write that
    /// fails on its own fails as it always did. A replayed batch costs two transactions.
    private func attempt(_ jobs: ArraySlice<CommitJob>) throws(StoreError) -> Attempt {
        if jobs.contains(where: \.write.hasIdempotencyKey) {
            do throws(StoreError) {
                return try attempt(jobs, presumingKeysNew: true)
            } catch where error.kind == .rejectedWrite {
                // Decided again below, reading each key.
            }
        }
        return try attempt(jobs, presumingKeysNew: false)
    }

    private func attempt(_ jobs: ArraySlice<CommitJob>, presumingKeysNew: Bool) throws(StoreError) -> Attempt {
        let started = DispatchTime.now().uptimeNanoseconds
        let cacheThrough = catchUp.cacheThrough
        var attempt = try store.write { (transaction) throws(StoreError) -> Attempt in
            var view = TransactionView(
                transaction: transaction, cache: cache, models: models, deletions: deletions, isCacheCurrent: transaction.startSequence == cacheThrough
            )
            if !view.isCacheCurrent {
                view.readIDs = Set(jobs.map(\.write.instanceID))
                view.committed = Dictionary(try transaction.instances(Array(view.readIDs)).map { ($0.id, $0) }) { first, _ in first }
            }
            var attempt = try decide(jobs, presumingKeysNew: presumingKeysNew, &view, transaction)
            attempt.findings = try Self.storeFindings(attempt.tally, in: transaction)
            return attempt
        }
        attempt.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return attempt
    }

    /// Decides `jobs` in order and makes their writes in `transaction`, all but the findings
    /// (``storeFindings(_:in:)``), which read what is committed.
    private func decide(
        _ jobs: ArraySlice<CommitJob>, presumingKeysNew: Bool, _ view: inout TransactionView, _ transaction: any StoreTransaction
    ) throws(StoreError) -> Attempt {
        var attempt = Attempt()
        attempt.startSequence = transaction.startSequence
        if presumingKeysNew {
            transaction.presumeKeysNew()
        } else {
            // Every write with a key looks it up first: all of them read at once, not a statement each.
            let keys = jobs.compactMap(\.write.idempotencyKey)
            if keys.count > 1 { try transaction.readAhead(keys) }
        }
        // Instances whose state changed: stored once per transaction, however many records.
        var dirty: Set<String> = []
        attempt.results.reserveCapacity(jobs.count)
        // By index: a job taken out of the slice would be copied, its write and key with it.
        for index in jobs.indices {
            let notesBefore = attempt.notes.count
            attempt.results.append(try run(jobs[index].write, &view, &attempt, &dirty, transaction))
            if !jobs[index].requestID.isEmpty {
                for note in attempt.notes.indices.dropFirst(notesBefore) { attempt.notes[note].fields.append(("request_id", jobs[index].requestID)) }
            }
        }
        for id in dirty {
            if case .present(let instance, _)? = view.staged[id] { try transaction.update(instance) }
        }
        if !attempt.coverage.isEmpty { try transaction.addCoverage(attempt.coverage) }
        attempt.staged = view.staged
        attempt.addedInstances = view.addedInstances
        return attempt
    }

    /// Stores what the writes add to the findings; what was stored, to publish.
    private static func storeFindings(_ tally: FindingTally, in transaction: any StoreTransaction) throws(StoreError) -> FindingChanges {
        let stored = try tally.store(in: transaction)
        return stored.findings.isEmpty ? .none : .written(stored.findings, instances: stored.instances)
    }

    /// One write inside a transaction: decided by the rules, then carried out. Refusals come
    /// back as values; only store failures throw, and they roll back the whole transaction.
    private func run(
        _ write: InstanceRegistry.Write, _ view: inout TransactionView, _ attempt: inout Attempt, _ dirty: inout Set<String>,
        _ transaction: any StoreTransaction
    ) throws(StoreError) -> Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal> {
        let time = Date().roundedToMilliseconds
        switch try WriteRules.decide(write, at: time, models: models, maxInstances: maxInstances, in: view) {
        case .answer(let result):
            return result

        case .found(let existing):
            return Result { () throws(InstanceRegistry.Refusal) in .found(id: existing.id, json: try cache.render(existing)) }

        case .create(let instance, let machine):
            let json: [UInt8]
            do {
                json = try cache.render(instance)
            } catch {
                return .failure(error)
            }
            var created: [UInt8] = []
            let sequence = try transaction.insert(instance) { sequence in
                created = InstanceChange(sequence: sequence, kind: .created, instance: instance, time: time).jsonBytes()
                return created
            }
            if let key = write.idempotencyKey {
                try transaction.remember(key, .created(id: instance.id, model: instance.model, createdAt: instance.createdAt, json: json))
            }
            attempt.records.append(ReplayedRecord(sequence: sequence, kind: .created, instance: instance.id, model: instance.model, outcome: nil, json: created))
            attempt.didWrite = true
            view.staged[instance.id] = .present(instance, machine)
            view.addedInstances += 1
            attempt.notes.append(("instance created", [("id", instance.id), ("model", instance.model)]))
            return .success(.created(id: instance.id, json: json))

        case .delete(let instance):
            var deleted: [UInt8] = []
            let sequence = try transaction.delete(instance, at: time) { sequence in
                deleted = InstanceChange(sequence: sequence, kind: .deleted, instance: instance, time: time).jsonBytes()
                return deleted
            }
            attempt.records.append(ReplayedRecord(sequence: sequence, kind: .deleted, instance: instance.id, model: instance.model, outcome: nil, json: deleted))
            attempt.didWrite = true
            view.staged[instance.id] = .deleted
            deletions.record(instance, at: time)
            view.addedInstances -= 1
            attempt.tally.delete(instance.id)
            attempt.notes.append(("instance deleted", [("id", instance.id)]))
            return .success(.deleted)

        case .apply(let record, let instance, let machine):
            let id = instance.id
            let encoded = try transaction.append(record, instanceID: id) { $0.jsonBytes() }
            let unexpected = record.outcome == .unexpected ? InstanceRegistry.UnexpectedInput(record) : nil
            if let key = write.idempotencyKey {
                let made = KeyedInstance(id: id, createdAt: instance.createdAt)
                try transaction.remember(key, .applied(recordJSON: encoded.recordJSON, isUnexpected: unexpected != nil, instance: made))
            }
            attempt.records.append(ReplayedRecord(
                sequence: encoded.sequence, kind: RecordKind(record.kind), instance: id, model: instance.model, outcome: record.outcome,
                json: encoded.recordJSON, isDivergent: record.divergence != nil
            ))
            attempt.didWrite = true
            view.staged[id] = .present(instance, machine)
            attempt.coverage.count(record, model: instance.model)
            attempt.tally.count(record, of: instance)
            attempt.counts.count(record, model: instance.model)
            dirty.insert(id)
            if unexpected != nil {
                attempt.notes.append(("unexpected event", [("id", id), ("event", record.name), ("state", record.from), ("seq", String(encoded.sequence))]))
            }
            if let incomplete = record.incompleteLaunch {
                attempt.notes.append(("incomplete launch", [("id", id), ("step", incomplete.step), ("sceneConnected", String(incomplete.isSceneConnected))]))
            }
            return .success(.applied(recordJSON: encoded.recordJSON, unexpected: unexpected))
        }
    }

    /// Publishes what a committed transaction changed, then answers its writes.
    private mutating func finish(_ jobs: ArraySlice<CommitJob>, _ attempt: Attempt) {
        // Others committed before this transaction: their records go to the hub first, and
        // the cache is current again only once it holds theirs too.
        let isCaughtUp = catchUp.catchUp(before: attempt.startSequence)
        cache.publish(attempt.staged, adding: attempt.coverage, findings: attempt.findings)
        // Before the answers: a client that is answered and then resumes a stream from the
        // sequence number it was given finds the record already there. (If the records before
        // them could not be read, they wait for the next catch-up, which reads them from the store.)
        if isCaughtUp {
            if !attempt.records.isEmpty { hub.publish(attempt.records) }
            catchUp.published(through: attempt.records.last?.sequence ?? attempt.startSequence)
        }
        if attempt.didWrite { health.committed() }
        metrics.committed(writes: jobs.count, seconds: attempt.seconds, counts: attempt.counts)
        for (index, result) in zip(jobs.indices, attempt.results) { jobs[index].completion(result) }
        for note in attempt.notes { report(ServiceEvent(.info, note.message, fields: note.fields)) }
    }

    /// Answers writes whose transaction failed: none of them changed anything, unless the
    /// store cannot tell (``StoreError/isOutcomeUnknown``), which they are told.
    private func fail(_ jobs: ArraySlice<CommitJob>, _ error: StoreError) {
        if jobs.count == 1 {
            let job = jobs.first!
            report(ServiceEvent(.error, "write failed", fields: [
                ("id", job.write.instanceID), ("write", job.write.summary), ("error", error.message),
            ] + (job.requestID.isEmpty ? [] : [("request_id", job.requestID)])))
        } else {
            report(ServiceEvent(.error, "writes failed", ["writes": String(jobs.count), "error": error.message]))
        }
        if error.kind != .rejectedWrite { health.failed(error) }
        for job in jobs { job.completion(.failure(.storageFailed(error.kind, isOutcomeUnknown: error.isOutcomeUnknown))) }
    }
}

/// A line to log once the transaction is committed.
private typealias Note = (message: String, fields: [(key: String, value: String)])

/// What some writes did inside one transaction: to publish, answer and log once it commits.
private struct Attempt {
    /// The store's last sequence number when the transaction began.
    var startSequence: Int64 = 0
    /// Where each instance the writes touched stands.
    var staged: [String: StagedInstance] = [:]
    /// Instances made less instances deleted.
    var addedInstances = 0
    var results: [Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>] = []
    var notes: [Note] = []
    /// The records written, in sequence order: for the stream hub once committed.
    var records: [ReplayedRecord] = []
    /// Whether anything was written (a commit of only refusals shows nothing about the store).
    var didWrite = false
    /// What the inputs applied add to the commit metrics (``BatchCommitter/metrics``).
    var counts = CommitCounts()
    var seconds = 0.0
    /// What the records written add to the coverage counters.
    var coverage = CoverageCounts()
    /// What they add to the findings, and what was stored of them.
    var tally = FindingTally()
    var findings = FindingChanges.none

    /// The last sequence number the writes took: where the transaction after them starts.
    var endSequence: Int64 { records.last?.sequence ?? startSequence }
}

/// A batch decided in a staged transaction, and the outcome of its commit on the writer thread.
private struct Staged {
    let jobs: ArraySlice<CommitJob>
    var attempt: Attempt
    /// Its transaction, for the writer thread.
    let handover: Handover
    /// Whether its keys were presumed new: if the store refuses one, the batch is decided again reading them.
    let isPresumingKeysNew: Bool
    let outcome = CommitOutcome()
}

/// A staged transaction and the findings its commit stores, on their way to the writer thread.
// @unchecked: the committer hands them over and does not touch them again; the writer thread alone uses them.
private struct Handover: @unchecked Sendable {
    let transaction: any StoreTransaction
    let tally: FindingTally
}

/// What the writer thread's commit of a staged transaction came to, and how long it took.
private final class CommitOutcome: Sendable {
    private let result = LockedValue<(Result<FindingChanges, StoreError>, seconds: Double)?>(nil)
    // A LockedValue cannot be waited on: the committer waits on this until the result is in.
    private let done = DispatchSemaphore(value: 0)

    func complete(_ result: Result<FindingChanges, StoreError>, seconds: Double) {
        self.result.withLock { $0 = (result, seconds) }
        done.signal()
    }

    func wait() -> (Result<FindingChanges, StoreError>, seconds: Double) {
        done.wait()
        return result.withLock { $0! }
    }
}

/// What is committed as one transaction's writes see it: from the cache while it is current,
/// otherwise as the store has it, and in either case with what earlier writes of the
/// transaction did (``staged``).
private struct TransactionView: CommittedState {
    let transaction: any StoreTransaction
    let cache: InstanceCache
    let models: [String: Model]
    let deletions: RecentDeletions
    /// Whether the cache may decide this transaction's writes: no one else committed since it was current.
    let isCacheCurrent: Bool
    /// When it may not: the instances the transaction's writes name, as committed when it
    /// began (read at once, in one round trip), by id; an id read and not found is absent.
    var committed: [String: StoredInstance] = [:]
    var readIDs: Set<String> = []
    var staged: [String: StagedInstance] = [:]
    /// Instances made less instances deleted so far, for the limit on their number.
    var addedInstances = 0
    /// What the batch committing on the writer thread leaves, over the cache: it is not published yet.
    private let committing: [String: StagedInstance]
    private let committingAdded: Int

    init(
        transaction: any StoreTransaction, cache: InstanceCache, models: [String: Model], deletions: RecentDeletions, isCacheCurrent: Bool,
        committing: Attempt? = nil
    ) {
        self.transaction = transaction
        self.cache = cache
        self.models = models
        self.deletions = deletions
        self.isCacheCurrent = isCacheCurrent
        self.committing = committing?.staged ?? [:]
        committingAdded = committing?.addedInstances ?? 0
    }

    func instance(_ id: String) throws(StoreError) -> (instance: StoredInstance, machine: Machine)? {
        switch staged[id] ?? committing[id] {
        case .present(let instance, let machine)?: return (instance, machine)
        case .deleted?: return nil
        case nil:
            let stored: StoredInstance?
            if isCacheCurrent {
                stored = cache.instance(id)
            } else {
                // Every id a write names was read when the transaction began; others (the
                // instance an idempotency key created) are read now.
                stored = readIDs.contains(id) ? committed[id] : try transaction.instance(id)
            }
            guard let stored else { return nil }
            do {
                // The cache keeps no machines: each is restored from its instance's state, as at a restart.
                return (stored, try stored.restoredMachine(among: models))
            } catch {
                // Another replica's models: this write fails alone, not its whole batch.
                throw StoreError(error.message, kind: .rejectedWrite)
            }
        }
    }

    func instanceCount() throws(StoreError) -> Int {
        isCacheCurrent ? cache.count + committingAdded + addedInstances : try transaction.instanceCount()
    }

    func lookUp(_ key: IdempotencyKey) throws(StoreError) -> IdempotencyLookup {
        try transaction.lookUp(key, now: Date())
    }

    func deletedCreation(of id: String) -> Date? {
        deletions.creation(of: id)
    }
}

/// When instances this process deleted lately were created, by id: a create of the same id
/// within the millisecond of such a creation would take the same creation time, which names an
/// instance in ETags and idempotency keys (``WriteRules``). Kept a second, for a clock set back
/// a little; a deletion recorded whether or not its transaction commits (what it may cost is a
/// creation a millisecond later than it could be).
// @unchecked: only the committer thread touches it, which owns the BatchCommitter holding it.
private final class RecentDeletions: @unchecked Sendable {
    private var created: [String: Date] = [:]

    func record(_ instance: StoredInstance, at time: Date) {
        let horizon = time.addingTimeInterval(-1)
        if !created.isEmpty { created = created.filter { $0.value >= horizon } }
        if instance.createdAt >= horizon { created[instance.id] = instance.createdAt }
    }

    func creation(of id: String) -> Date? {
        created[id]
    }
}

extension InstanceRegistry.Write {
    /// The write's idempotency key, if it has one: remembered with what the write did.
    fileprivate var idempotencyKey: IdempotencyKey? {
        switch self {
        case .create(_, _, _, let key, _), .apply(_, _, _, let key): key
        case .delete: nil
        }
    }

    /// Whether the write has an idempotency key, without copying it out.
    fileprivate var hasIdempotencyKey: Bool {
        switch self {
        case .create(_, _, _, nil, _), .apply(_, _, _, nil), .delete: false
        case .create, .apply: true
        }
    }
}
