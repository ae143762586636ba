import Foundation
import LifecycleKit
import LifecycleStore
import Synchronization

/// Every live instance, its machine, and the one path by which they change.
///
/// All writes (create, delete, event, action, relaunch) go through a single committer
/// thread that takes whatever requests are waiting, applies them in arrival order and
/// commits them in one store transaction (group commit; SQLite or PostgreSQL). Only after
/// the commit are the new states published to readers, the transaction's records to the
/// stream hub (in sequence order, one transaction after another) and the requests answered,
/// so an acknowledged write is always durable and a failed commit changes nothing anyone has seen.
///
/// Other processes may write to the same store (replicas on one PostgreSQL). The instances
/// held here are then a cache, trusted for a decision only while no one else has committed
/// since it was last brought up to date: each transaction starts from the store's last
/// committed sequence number, and when that is not ``cacheThrough`` the write reads the
/// instance as committed instead. Records others committed reach the stream hub in sequence
/// order, before this process's own, from the store: after each commit that found others had
/// written, on the store's wake-up hint, and by polling (see ``catchUp(through:)``). On a
/// store no one else writes, the cache is always current and none of this reads anything.
///
/// It knows nothing of HTTP: it answers in outcomes and refusals, which the API turns into
/// responses and problems, and reports notable events to whoever made it, as the store does.
final class InstanceRegistry: @unchecked Sendable {
    let models: [String: Model]
    /// Every state of every loaded model, sorted and without repeats: what a `state` filter may name.
    let stateNames: [String]
    let store: any InstanceStore
    /// Where committed records go for streams.
    let hub: StreamHub
    /// The most instances there may be; a create past it is refused with ``Refusal/instanceLimit(_:)``.
    let maxInstances: Int
    /// Where notable events go (the service logs them).
    private let report: @Sendable (StoreEvent) -> Void

    /// A change to make, in the order it arrived.
    enum Write: Sendable {
        case create(id: String, model: String, isPut: Bool, key: IdempotencyKey?)
        /// `expectedVersions`: from `If-Match`; `nil` for any version.
        case delete(id: String, expectedVersions: [Int64]?)
        case apply(Input, id: String, expectedVersions: [Int64]?, key: IdempotencyKey?)

        var instanceID: String {
            switch self {
            case .create(let id, _, _, _), .delete(let id, _), .apply(_, let id, _, _): id
            }
        }

        /// What the write is, for logs.
        var summary: String {
            switch self {
            case .create(_, _, let isPut, _): isPut ? "put" : "create"
            case .delete: "delete"
            case .apply(.event(let name, _), _, _, _): "event \(name)"
            case .apply(.action(let name, _), _, _, _): "action \(name)"
            case .apply(.relaunch, _, _, _): "relaunch"
            }
        }
    }

    /// What a committed write did (or, replayed for its idempotency key, did when first sent).
    enum WriteOutcome: Sendable {
        /// Created the instance `id`, whose JSON as created is `json`.
        case created(id: String, json: [UInt8])
        /// Found the instance a PUT names already there with its model.
        case found(id: String, json: [UInt8])
        case deleted
        /// Applied an input: the numbered record's JSON, and whether the input was unexpected
        /// (recorded and counted all the same).
        case applied(recordJSON: [UInt8], isUnexpected: Bool)
    }

    /// Why a write or a read was refused. A refused write changed nothing.
    enum Refusal: Error, Sendable {
        /// `suggestion` names the model probably meant, or lists them.
        case unknownModel(String, suggestion: String)
        /// The instance exists, with `model`: a create may not make it again, nor a PUT
        /// with another model.
        case exists(id: String, model: String, isPut: Bool)
        case unknownInstance(String)
        /// The instance is at version `current`, which the write did not expect.
        case versionMismatch(id: String, current: Int64)
        /// The machine refused the input.
        case invalidInput(InputError)
        /// The idempotency key came with a different request before.
        case keyReused(String)
        /// The instance `key` created has since been deleted; creating it again would undo that.
        case createdInstanceDeleted(id: String, key: String)
        /// The store failed; `isDiskFull` when it failed for want of space, `isOutcomeUnknown`
        /// when the connection to its server went during the commit, which may have taken effect.
        case storageFailed(isDiskFull: Bool, isOutcomeUnknown: Bool = false)
        /// The store failed to read what the cache does not hold: `what` names it.
        case storageUnreadable(what: String)
        case stopping
        /// The instance cannot be written as JSON (logged).
        case unrenderable(id: String)
        /// There are as many instances as allowed: a create waits for a delete.
        case instanceLimit(Int)
    }

    typealias Completion = @Sendable (Result<WriteOutcome, Refusal>) -> Void

    /// Why the store could not commit, while it cannot.
    struct StorageFailure: Sendable {
        var reason: String
        var since: Date
        /// The database file is damaged: reported until a restart (which refuses to start on it).
        var isDamage = false
        /// Only reading others' commits failed (no write has failed since): a read that works
        /// again clears it. A write's failure is cleared only by a commit.
        var isReadOnly = false
        /// The database server could not be reached: a transaction that commits, even an
        /// empty one, shows it is back (see `probeCommits`).
        var isUnreachable = false
    }

    /// The most requests one transaction commits.
    static let maxBatch = 512

    private final class Entry {
        let lock = NSLock()
        private(set) var instance: StoredInstance
        private(set) var machine: Machine
        /// The instance's JSON, rendered at the first read after a change rather than on
        /// every read (and not at start-up, which must not grow with rendering work).
        private var rendered: [UInt8]?

        init(instance: StoredInstance, machine: Machine) {
            self.instance = instance
            self.machine = machine
        }

        func update(_ instance: StoredInstance, _ machine: Machine) {
            self.instance = instance
            self.machine = machine
            rendered = nil
        }

        /// Call with `lock` held. A render that fails is not kept, so the next read tries again.
        func json(_ render: (StoredInstance) throws(Refusal) -> [UInt8]) throws(Refusal) -> [UInt8] {
            if let rendered { return rendered }
            let fresh = try render(instance)
            rendered = fresh
            return fresh
        }
    }

    /// Readers take this for one look-up or one page; only the committer thread changes what it guards.
    private let entriesLock = NSLock()
    private var entries: [String: Entry] = [:]
    /// The ids, sorted, overall and per state and model: a page of the list is a binary
    /// search and a walk over matching ids only.
    private var index = InstanceIndex()
    /// Rows taken and unexpected events per state, as committed (guarded like `index`).
    private var coverageCounts = CoverageCounts()
    /// Instances read by list pages since start-up: a page reads those it returns, never the
    /// rest of the registry (a test holds it to that).
    private let listReads = Atomic<Int>(0)
    /// What commits recorded and cost, for `/metrics`: updated after each commit.
    let metrics = CommitMetrics()

    private let queue = NSCondition()
    private var pending: [Job] = []
    private var isStopping = false
    /// Set (under `queue`) when the store hints that another process committed.
    private var isCatchUpDue = false
    /// How long the committer waits, idle, before it asks the store whether others committed:
    /// the delay a lost wake-up hint can cause.
    let pollInterval: TimeInterval
    /// The cache holds every commit up to this sequence number, and (unless another process
    /// has written since) nothing later. Only the committer thread uses it.
    private var cacheThrough: Int64
    private let stopped = DispatchSemaphore(value: 0)

    /// Set when writes fail for a reason that is the store's (not their own data's);
    /// cleared by the next commit that writes something.
    private let storageFailure = Mutex<StorageFailure?>(nil)

    /// Rebuilds every stored instance; refuses to start if one names an unknown model or state.
    /// `maxInstances`: creates past it are refused. Instances already stored (under a higher
    /// limit before) are all loaded; only new ones wait for room.
    init(
        models: [String: Model], store: any InstanceStore, hub: StreamHub, maxInstances: Int = .max,
        pollInterval: TimeInterval = 1, report: @escaping @Sendable (StoreEvent) -> Void
    ) throws(StoreError) {
        self.models = models
        self.maxInstances = maxInstances
        self.pollInterval = pollInterval
        // Before the instances are read: what they show is at least as new as this, and a
        // cache newer than `cacheThrough` is only ever read again after a catch-up.
        cacheThrough = hub.lastSequence
        self.stateNames = Set(models.values.flatMap { $0.definition.states.map(\.name) }).sorted()
        self.store = store
        self.hub = hub
        self.report = report
        let instances = try store.loadInstances().sorted { $0.id < $1.id }
        for instance in instances {
            entries[instance.id] = Entry(instance: instance, machine: try Self.restoredMachine(instance, models: models))
        }
        index = InstanceIndex(sortedByID: instances.map { (id: $0.id, facts: $0.indexFacts) })
        coverageCounts = try store.loadCoverage()
        store.observeCommitsElsewhere { [weak self] in self?.catchUpSoon() }
        // The thread holds the registry until `stop()` ends it.
        let thread = Thread { [self] in runCommitter() }
        thread.name = "lifecycled-committer"
        thread.start()
    }

    var count: Int { entriesLock.withLock { entries.count } }

    /// A stored instance's machine; throws when its model, or its state in that model, is not loaded here.
    private static func restoredMachine(_ instance: StoredInstance, models: [String: Model]) throws(StoreError) -> Machine {
        guard let model = models[instance.model] else {
            throw StoreError("instance \"\(instance.id)\" uses model \"\(instance.model)\", which is not loaded")
        }
        guard let machine = Machine(model: model, restoring: instance.state) else {
            throw StoreError("instance \"\(instance.id)\" is in state \"\(instance.state.state)\", which model \"\(model.name)\" does not have")
        }
        return machine
    }

    private func entry(_ id: String) -> Entry? { entriesLock.withLock { entries[id] } }

    // MARK: reading (any thread)

    func instance(_ id: String) throws(Refusal) -> StoredInstance {
        guard let entry = entry(id) else { return try committedInstance(id) }
        return entry.lock.withLock { entry.instance }
    }

    /// An instance the cache does not hold, as the store has it: one another replica has just
    /// created is found before this one has caught up (a client that creates through one
    /// replica and reads through another gets it, not a 404).
    private func committedInstance(_ id: String) throws(Refusal) -> StoredInstance {
        let found: StoredInstance?
        do {
            found = try store.instances([id]).first
        } catch {
            log(.error, "cannot read an instance", ["id": id, "error": error.message])
            throw .storageUnreadable(what: "instance \"\(id)\"")
        }
        guard let found else { throw .unknownInstance(id) }
        return found
    }

    /// The instance as last committed: its version and its JSON.
    func renderedInstance(_ id: String) throws(Refusal) -> (version: Int64, json: [UInt8]) {
        guard let entry = entry(id) else {
            let stored = try committedInstance(id)
            return (stored.state.version, try render(stored))
        }
        entry.lock.lock()
        defer { entry.lock.unlock() }
        return (entry.instance.state.version, try entry.json(render))
    }

    /// Instances in id order after `cursor` that match `filter`.
    ///
    /// The index holds only matching ids, so the registry lock is held while one page is
    /// read, however many instances there are and however few match; the committer, which
    /// needs that lock to publish, waits at most that long.
    func list(_ filter: ListFilter, after cursor: String?, limit: Int) -> (items: [StoredInstance], hasMore: Bool) {
        let page = entriesLock.withLock {
            let page = index.page(filter, after: cursor, limit: limit)
            let items = page.ids.map { id in
                let entry = entries[id]!
                return entry.lock.withLock { entry.instance }
            }
            return (items: items, hasMore: page.hasMore)
        }
        listReads.add(page.items.count, ordering: .relaxed)
        return page
    }

    /// Instances per model and state (those with any), for `/metrics`.
    var instanceCounts: [(model: String, state: String, count: Int)] { entriesLock.withLock { index.countsByModelAndState } }

    /// A model's coverage as last committed: per row (in table order) the records that took
    /// it, and per state (in the model's order) the instances in it now, the unexpected events
    /// recorded in it and the instances in it with an incomplete launch. Counters and index
    /// are read under one lock, so they agree on which commits they include.
    func coverage(of model: Model) -> (rowsTaken: [Int64], states: [(instances: Int, unexpected: Int64, incompleteLaunches: Int)]) {
        let states = model.definition.states.map(\.name)
        return entriesLock.withLock {
            let rowsTaken = model.definition.transitions.indices.map { row in
                coverageCounts[CoverageCounts.Key(model: model.name, kind: .rowTaken, name: Model.rowID(row))]
            }
            let counts = zip(states, index.stateCounts(model: model.name, states: states)).map { state, count in
                (count.instances, coverageCounts[CoverageCounts.Key(model: model.name, kind: .unexpectedEvent, name: state)], count.incompleteLaunches)
            }
            return (rowsTaken, counts)
        }
    }

    /// Instances read by all list pages so far.
    var instancesReadByLists: Int { listReads.load(ordering: .relaxed) }

    func history(of id: String, after: Int64, limit: PageLimit) throws(Refusal) -> HistoryPage {
        _ = try instance(id)
        do {
            return try store.history(instanceID: id, after: after, limit: limit)
        } catch {
            log(.error, "cannot read history", ["id": id, "error": error.message])
            throw .storageUnreadable(what: "the history")
        }
    }

    /// Why the store cannot commit, while it cannot: `nil` once a write has committed since.
    var storageProblem: StorageFailure? { storageFailure.withLock { $0 } }

    // MARK: writing

    /// Queues a write; `completion` runs on the committer thread once it is committed or refused.
    /// `requestID` goes into the log lines the write makes.
    func submit(_ write: Write, requestID: String = "", completion: @escaping Completion) {
        queue.lock()
        guard !isStopping else {
            queue.unlock()
            completion(.failure(.stopping))
            return
        }
        pending.append((write, requestID, completion))
        queue.signal()
        queue.unlock()
    }

    /// Answers what is queued, then ends the committer thread.
    func stop() {
        queue.lock()
        let wasStopping = isStopping
        isStopping = true
        queue.signal()
        queue.unlock()
        if !wasStopping { stopped.wait() }
    }

    private typealias Job = (write: Write, requestID: String, completion: Completion)

    /// The store's hint that another process committed: the committer catches up when idle.
    private func catchUpSoon() {
        queue.lock()
        isCatchUpDue = true
        queue.signal()
        queue.unlock()
    }

    private func runCommitter() {
        while true {
            queue.lock()
            let deadline = Date().addingTimeInterval(pollInterval)
            while pending.isEmpty, !isStopping, !isCatchUpDue {
                if !queue.wait(until: deadline) { isCatchUpDue = true }
            }
            if pending.isEmpty, isStopping {
                queue.unlock()
                stopped.signal()
                return
            }
            let batch = Array(pending.prefix(Self.maxBatch))
            pending.removeFirst(batch.count)
            let isCatchUpAsked = isCatchUpDue
            isCatchUpDue = false
            queue.unlock()
            if isCatchUpAsked { catchUpWithStore() }
            if !batch.isEmpty { commit(batch) }
        }
    }

    /// Catches up with what the store says others committed: nothing to do for a store no
    /// one else writes (whose last sequence is always ``cacheThrough``).
    ///
    /// A failure is a storage problem until a read works again (or a write commits): an idle
    /// replica whose database went away says so on `/healthz` before any write fails.
    private func catchUpWithStore() {
        do {
            let latest = try store.latestSequence()
            if latest > cacheThrough { try catchUp(through: latest) }
        } catch {
            log(.warning, "cannot catch up with commits of other replicas", ["after": String(cacheThrough), "error": error.message])
            storageFailed(error, isReadOnly: true)
            return
        }
        storageReadable()
        probeCommits()
    }

    /// While a write's failure is reported and no write has come since to clear it, an empty
    /// transaction shows whether the store commits again. Without it a replica that no write
    /// reaches would report the failure for ever, and one that a load balancer takes out of
    /// rotation by `/healthz` would never get the write that clears it: after an outage of
    /// PostgreSQL, every replica that failed a write would stay out. Only for a server that
    /// could not be reached: after a full disk or an I/O error a transaction that writes
    /// nothing may commit while writes still fail, and damage is reported until a restart.
    private func probeCommits() {
        guard let failure = storageProblem, failure.isUnreachable, !failure.isReadOnly, !failure.isDamage else { return }
        do {
            try store.write { _ in }
            storageCommitted()
        } catch {
            storageFailed(error)
        }
    }

    /// Records read from the store at a time while catching up.
    static let catchUpPageSize = 1024

    /// Brings the hub and the cache up to `target`, a sequence number known committed: the
    /// records after ``cacheThrough`` go to the hub in order (those a retention or a delete
    /// has already dropped are missed, as a replay misses them), the instances they touched
    /// are read again as committed, and the coverage counters with them. Throws, changing
    /// nothing more, when the store cannot be read; the next catch-up starts where this stopped.
    private func catchUp(through target: Int64) throws(StoreError) {
        var touched: Set<String> = []
        var position = cacheThrough
        while position < target {
            let page = try store.replay(
                after: position, through: target, filter: RecordFilter(), limit: PageLimit(records: Self.catchUpPageSize, bytes: hub.settings.pageBytes)
            )
            let published = hub.lastSequence
            hub.publish(page.records.filter { $0.sequence > published }.map {
                PublishedRecord(sequence: $0.sequence, kind: $0.kind, instance: $0.instance, model: $0.model, outcome: $0.outcome, json: $0.json)
            })
            touched.formUnion(page.records.map(\.instance))
            position = max(page.coveredThrough, page.records.last?.sequence ?? position)
        }
        let fresh = try store.instances(touched.sorted())
        let coverage = try store.loadCoverage()
        var staged: [String: Staged] = Dictionary(uniqueKeysWithValues: touched.map { ($0, .deleted) })
        for instance in fresh {
            do {
                staged[instance.id] = .present(instance, try Self.restoredMachine(instance, models: models))
            } catch {
                log(.error, "an instance another replica wrote cannot be restored here", ["id": instance.id, "error": error.message])
                staged[instance.id] = nil
            }
        }
        publish(staged, coverage: nil, replacing: coverage)
        cacheThrough = target
    }

    /// Where an instance stands within the transaction being built.
    private enum Staged {
        case present(StoredInstance, Machine)
        case deleted
    }

    /// A line to log once the transaction is committed.
    private typealias Note = (message: String, fields: [(key: String, value: String)])

    /// What some writes did inside one transaction: to publish, answer and log once it commits.
    private struct Attempt {
        /// The store's last sequence number when the transaction began.
        var startSequence: Int64 = 0
        /// Whether the cache may decide this transaction's writes: no one else committed since it was current.
        var isCacheCurrent = true
        /// When it may not: the instances the transaction's writes name, as committed when it
        /// began (read at once, in one round trip), by id; an id read and not found is absent.
        var committed: [String: StoredInstance] = [:]
        var readIDs: Set<String> = []
        var staged: [String: Staged] = [:]
        var results: [Result<WriteOutcome, Refusal>] = []
        var notes: [Note] = []
        /// The records written, in sequence order: for the stream hub once committed.
        var records: [PublishedRecord] = []
        /// Whether anything was written (a commit of only refusals shows nothing about the store).
        var didWrite = false
        /// Instances made less instances deleted so far, for the limit on their number.
        var addedInstances = 0
        /// The inputs applied, with their instance's model, and the transaction's time: for ``metrics``.
        var applied: [(model: String, record: Record)] = []
        var seconds = 0.0
        /// What the records written add to the coverage counters.
        var coverage = CoverageCounts()
    }

    /// Commits a batch in one transaction; that is all a batch costs while the store works.
    private func commit(_ batch: [Job]) {
        let attempt: Attempt
        do {
            attempt = try self.attempt(batch[...])
        } catch {
            guard error.isSpecificToWrite || error.isDamage, batch.count > 1 else { return fail(batch[...], error) }
            log(.warning, "group commit failed; committing its writes in smaller groups", ["writes": String(batch.count), "error": error.message])
            commitInHalves(batch[...])
            return
        }
        finish(batch[...], attempt)
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
    private func commitInHalves(_ jobs: ArraySlice<Job>) {
        let middle = jobs.startIndex + jobs.count / 2
        for half in [jobs[..<middle], jobs[middle...]] {
            do {
                finish(half, try attempt(half))
            } catch {
                if error.isSpecificToWrite || error.isDamage, half.count > 1 { commitInHalves(half) } else { fail(half, error) }
            }
        }
    }

    /// Runs `jobs` in one transaction, in order, and commits it.
    private func attempt(_ jobs: ArraySlice<Job>) throws(StoreError) -> Attempt {
        var attempt = Attempt()
        let started = DispatchTime.now().uptimeNanoseconds
        try store.write { (transaction) throws(StoreError) in
            attempt.startSequence = transaction.startSequence
            attempt.isCacheCurrent = transaction.startSequence == cacheThrough
            if !attempt.isCacheCurrent {
                attempt.readIDs = Set(jobs.map(\.write.instanceID))
                attempt.committed = Dictionary(try transaction.instances(Array(attempt.readIDs)).map { ($0.id, $0) }) { first, _ in first }
            }
            // Instances whose state changed: stored once per transaction, however many records.
            var dirty: Set<String> = []
            for job in jobs {
                let notesBefore = attempt.notes.count
                attempt.results.append(try run(job.write, transaction, &attempt, &dirty))
                if !job.requestID.isEmpty {
                    for index in attempt.notes.indices.dropFirst(notesBefore) { attempt.notes[index].fields.append(("request_id", job.requestID)) }
                }
            }
            for id in dirty {
                if case .present(let instance, _)? = attempt.staged[id] { try transaction.update(instance) }
            }
            if !attempt.coverage.isEmpty { try transaction.addCoverage(attempt.coverage) }
        }
        attempt.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return attempt
    }

    /// Publishes what a committed transaction changed, then answers its writes.
    private func finish(_ jobs: ArraySlice<Job>, _ attempt: Attempt) {
        // Others committed before this transaction: their records go to the hub first, and
        // the cache is current again only once it holds theirs too.
        var isCaughtUp = attempt.startSequence == cacheThrough
        if !isCaughtUp {
            do {
                try catchUp(through: attempt.startSequence)
                isCaughtUp = true
            } catch {
                log(.warning, "cannot catch up with commits of other replicas", ["after": String(cacheThrough), "error": error.message])
            }
        }
        publish(attempt.staged, coverage: attempt.coverage)
        // Before the answers: a client that is answered and then resumes a stream from the
        // sequence number it was given finds the record already there. (If the records before
        // them could not be read, they wait for the next catch-up, which reads them from the store.)
        if isCaughtUp {
            if !attempt.records.isEmpty { hub.publish(attempt.records) }
            cacheThrough = attempt.records.last?.sequence ?? attempt.startSequence
        }
        if attempt.didWrite { storageCommitted() }
        metrics.committed(writes: jobs.count, seconds: attempt.seconds, applied: attempt.applied)
        for (job, result) in zip(jobs, attempt.results) { job.completion(result) }
        for note in attempt.notes { report(StoreEvent(.info, note.message, fields: note.fields)) }
    }

    /// Answers writes whose transaction failed: none of them changed anything, unless the
    /// store cannot tell (``StoreError/isOutcomeUnknown``), which they are told.
    private func fail(_ jobs: ArraySlice<Job>, _ error: StoreError) {
        if jobs.count == 1 {
            let job = jobs.first!
            report(StoreEvent(.error, "write failed", fields: [
                ("id", job.write.instanceID), ("write", job.write.summary), ("error", error.message),
            ] + (job.requestID.isEmpty ? [] : [("request_id", job.requestID)])))
        } else {
            log(.error, "writes failed", ["writes": String(jobs.count), "error": error.message])
        }
        if !error.isSpecificToWrite { storageFailed(error) }
        for job in jobs { job.completion(.failure(.storageFailed(isDiskFull: error.isDiskFull, isOutcomeUnknown: error.isOutcomeUnknown))) }
    }

    private func storageFailed(_ error: StoreError, isReadOnly: Bool = false) {
        let isNew = storageFailure.withLock { failure in
            defer {
                // The first report of damage is kept: a later failure is more likely its effect.
                if failure?.isDamage != true {
                    failure = StorageFailure(
                        reason: error.message, since: failure?.since ?? Date(), isDamage: error.isDamage,
                        isReadOnly: isReadOnly && failure?.isReadOnly != false,
                        isUnreachable: error.isUnreachable
                    )
                }
            }
            return failure == nil
        }
        if isNew { log(.error, isReadOnly ? "storage cannot be read" : "storage cannot commit", ["error": error.message]) }
    }

    /// A read of the store worked: a problem that only reads had is over.
    private func storageReadable() {
        let recovered = storageFailure.withLock { failure -> StorageFailure? in
            guard let current = failure, current.isReadOnly else { return nil }
            failure = nil
            return current
        }
        if let recovered { log(.info, "storage can be read again", ["failingSince": recovered.since.formatted(.iso8601)]) }
    }

    private func storageCommitted() {
        // Damage does not heal when writes that miss it commit: it stays reported.
        let recovered = storageFailure.withLock { failure -> StorageFailure? in
            guard let current = failure, !current.isDamage else { return nil }
            failure = nil
            return current
        }
        if let recovered { log(.info, "storage commits again", ["failingSince": recovered.since.formatted(.iso8601)]) }
    }

    /// Makes what committed visible to readers: `added` counts the commit's records, and
    /// `replacing` is the whole of the counters as read from the store.
    private func publish(_ staged: [String: Staged], coverage added: CoverageCounts?, replacing: CoverageCounts? = nil) {
        guard !staged.isEmpty || replacing != nil else { return }
        entriesLock.withLock {
            if let replacing { coverageCounts = replacing }
            if let added { coverageCounts.add(added) }
            for (id, change) in staged {
                switch change {
                case .present(let instance, let machine):
                    guard let entry = entries[id] else {
                        entries[id] = Entry(instance: instance, machine: machine)
                        index.insert(id, instance.indexFacts)
                        continue
                    }
                    let before = entry.lock.withLock {
                        defer { entry.update(instance, machine) }
                        return entry.instance.indexFacts
                    }
                    index.update(id, from: before, to: instance.indexFacts)
                case .deleted:
                    guard let entry = entries.removeValue(forKey: id) else { continue }
                    let before = entry.lock.withLock { entry.instance }
                    index.remove(id, before.indexFacts)
                }
            }
        }
    }

    /// The instance as this transaction has left it so far: from the cache while it is
    /// current, otherwise as the store has it committed.
    private func current(_ id: String, _ attempt: Attempt, _ transaction: any StoreTransaction) throws(StoreError) -> (instance: StoredInstance, machine: Machine)? {
        switch attempt.staged[id] {
        case .present(let instance, let machine)?: return (instance, machine)
        case .deleted?: return nil
        case nil:
            let cached = entry(id).map { entry in entry.lock.withLock { (instance: entry.instance, machine: entry.machine) } }
            if attempt.isCacheCurrent { return cached }
            // Every id a write names was read when the transaction began; others (the
            // instance an idempotency key created) are read now.
            guard let stored = attempt.readIDs.contains(id) ? attempt.committed[id] : try transaction.instance(id) else { return nil }
            if let cached, cached.instance == stored { return cached }
            do {
                return (stored, try Self.restoredMachine(stored, models: models))
            } catch {
                // Another replica's models: this write fails alone, not its whole batch.
                throw StoreError(error.message, isSpecificToWrite: true)
            }
        }
    }

    /// How many instances there are as this transaction has left them so far.
    private func instanceCount(_ attempt: Attempt, _ transaction: any StoreTransaction) throws(StoreError) -> Int {
        attempt.isCacheCurrent ? count + attempt.addedInstances : try transaction.instanceCount()
    }

    /// One write inside a transaction. Refusals come back as values; only store failures
    /// throw, and they roll back the whole transaction.
    private func run(
        _ write: Write, _ transaction: any StoreTransaction, _ attempt: inout Attempt, _ dirty: inout Set<String>
    ) throws(StoreError) -> Result<WriteOutcome, Refusal> {
        let time = Date().roundedToMilliseconds
        switch write {
        case .create(let id, let name, let isPut, let key):
            guard let model = models[name] else {
                return .failure(.unknownModel(name, suggestion: suggestion(for: name, among: models.keys.sorted(), kind: "model")))
            }
            if let key, let replayed = try replay(key, transaction) {
                switch replayed {
                case .success(let remembered): return try replayedCreation(remembered, key: key, attempt, transaction)
                case .failure(let refusal): return .failure(refusal)
                }
            }
            if let existing = try current(id, attempt, transaction)?.instance {
                guard isPut, existing.model == name else { return .failure(.exists(id: id, model: existing.model, isPut: isPut)) }
                return Result { () throws(Refusal) in .found(id: id, json: try render(existing)) }
            }
            guard try instanceCount(attempt, transaction) < maxInstances else { return .failure(.instanceLimit(maxInstances)) }
            let machine = Machine(model: model)
            let instance = StoredInstance(id: id, model: name, createdAt: time, updatedAt: time, state: machine.snapshot)
            let json: [UInt8]
            do {
                json = try render(instance)
            } catch {
                return .failure(error)
            }
            var created: [UInt8] = []
            let sequence = try transaction.insert(instance) { sequence in
                created = InstanceChange(sequence: sequence, kind: .created, instance: instance, time: time).jsonBytes()
                return created
            }
            if let key { try transaction.remember(key, .created(id: id, model: name, createdAt: time, json: json)) }
            attempt.records.append(PublishedRecord(sequence: sequence, kind: .created, instance: id, model: name, outcome: nil, json: created))
            attempt.didWrite = true
            attempt.staged[id] = .present(instance, machine)
            attempt.addedInstances += 1
            attempt.notes.append(("instance created", [("id", id), ("model", name)]))
            return .success(.created(id: id, json: json))

        case .delete(let id, let expectedVersions):
            guard let instance = try current(id, attempt, transaction)?.instance else { return .failure(.unknownInstance(id)) }
            if let expectedVersions, !expectedVersions.contains(instance.state.version) {
                return .failure(.versionMismatch(id: id, current: instance.state.version))
            }
            var deleted: [UInt8] = []
            let sequence = try transaction.delete(instance, at: time) { sequence in
                deleted = InstanceChange(sequence: sequence, kind: .deleted, instance: instance, time: time).jsonBytes()
                return deleted
            }
            attempt.records.append(PublishedRecord(sequence: sequence, kind: .deleted, instance: id, model: instance.model, outcome: nil, json: deleted))
            attempt.didWrite = true
            attempt.staged[id] = .deleted
            attempt.addedInstances -= 1
            attempt.notes.append(("instance deleted", [("id", id)]))
            return .success(.deleted)

        case .apply(let input, let id, let expectedVersions, let key):
            guard var (instance, machine) = try current(id, attempt, transaction) else { return .failure(.unknownInstance(id)) }
            if let key, let replayed = try replay(key, transaction) {
                return replayed.flatMap { remembered in
                    // The fingerprint holds method and path, so a create's key does not come back here.
                    guard case .applied(let json, let isUnexpected) = remembered else { return .failure(.keyReused(String(key.clientKey))) }
                    return .success(.applied(recordJSON: json, isUnexpected: isUnexpected))
                }
            }
            if let expectedVersions, !expectedVersions.contains(instance.state.version) {
                return .failure(.versionMismatch(id: id, current: instance.state.version))
            }
            let record: Record
            do {
                record = try machine.apply(input, at: time)
            } catch {
                return .failure(.invalidInput(error))
            }
            instance.state = machine.snapshot
            instance.updatedAt = time
            let encoded = try transaction.append(record, instanceID: id) { $0.jsonBytes() }
            let isUnexpected = record.outcome == .unexpected
            if let key { try transaction.remember(key, .applied(recordJSON: encoded.recordJSON, isUnexpected: isUnexpected)) }
            attempt.records.append(PublishedRecord(
                sequence: encoded.sequence, kind: RecordKind(record.kind), instance: id, model: instance.model, outcome: record.outcome,
                json: encoded.recordJSON
            ))
            attempt.didWrite = true
            attempt.staged[id] = .present(instance, machine)
            attempt.coverage.count(record, model: instance.model)
            attempt.applied.append((instance.model, record))
            dirty.insert(id)
            if isUnexpected {
                attempt.notes.append(("unexpected event", [("id", id), ("event", record.name), ("state", record.from), ("seq", String(encoded.sequence))]))
            }
            if let incomplete = record.incompleteLaunch {
                attempt.notes.append(("incomplete launch", [("id", id), ("step", incomplete.step), ("sceneConnected", String(incomplete.isSceneConnected))]))
            }
            return .success(.applied(recordJSON: encoded.recordJSON, isUnexpected: isUnexpected))
        }
    }

    /// What a reused key's write did, a refusal for a key reused on another request, or `nil`
    /// for a new key.
    private func replay(_ key: IdempotencyKey, _ transaction: any StoreTransaction) throws(StoreError) -> Result<RememberedWrite, Refusal>? {
        switch try transaction.lookUp(key, now: Date()) {
        case .unused: nil
        case .replay(let write): .success(write)
        case .conflict: .failure(.keyReused(String(key.clientKey)))
        }
    }

    /// A create's outcome, replayed while the instance it made still exists.
    ///
    /// The id comes from what was stored, not from this request: a POST without an id draws
    /// a fresh one each time it is sent, and only the first was created. Once that instance
    /// is deleted (even if another has since been made with its id: one with another model
    /// or creation time), answering "created" would claim something that is gone, so the
    /// replay is refused naming the instance; creating it again would undo a delete the client
    /// may have made on purpose. (One re-made in the same millisecond with the same model is
    /// in every way what was created, and is answered as such.)
    private func replayedCreation(
        _ remembered: RememberedWrite, key: IdempotencyKey, _ attempt: Attempt, _ transaction: any StoreTransaction
    ) throws(StoreError) -> Result<WriteOutcome, Refusal> {
        // The fingerprint holds method and path, so an input's key does not come back here.
        guard case .created(let id, let model, let createdAt, let json) = remembered else { return .failure(.keyReused(String(key.clientKey))) }
        guard let existing = try current(id, attempt, transaction)?.instance, existing.model == model, existing.createdAt == createdAt else {
            return .failure(.createdInstanceDeleted(id: id, key: String(key.clientKey)))
        }
        return .success(.created(id: id, json: json))
    }

    /// The instance's JSON. Encoding fails only on a value JSON cannot hold (a number that is
    /// not finite); that is logged with the instance and refused, never answered with an empty body.
    func render(_ instance: StoredInstance) throws(Refusal) -> [UInt8] {
        do {
            return try instance.jsonBytes()
        } catch {
            log(.error, "cannot render instance", ["id": instance.id, "version": String(instance.state.version), "error": "\(error)"])
            throw .unrenderable(id: instance.id)
        }
    }

    private func log(_ level: StoreEvent.Level, _ message: String, _ fields: KeyValuePairs<String, String>) {
        report(StoreEvent(level, message, fields))
    }
}
