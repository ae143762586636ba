import Foundation
import LifecycleKit
import LifecycleStore
import MicroHTTP

/// Every live instance, its machine, and the one path by which they change.
///
/// All writes (create, delete, event, action, relaunch) go through a single committer
/// thread that takes whatever requests are waiting, applies them in arrival order and
/// commits them in one SQLite transaction (group commit). Only after the commit are the
/// new states published to readers and the requests answered, so an acknowledged write
/// is always durable and a failed commit changes nothing anyone has seen.
final class InstanceRegistry: @unchecked Sendable {
    let models: [String: Model]
    let store: any InstanceStore
    let logger: Logger

    /// A change to make, in the order it arrived.
    enum Write: Sendable {
        case create(id: String, model: String, isPut: Bool, key: IdempotencyKey?)
        /// `expectedVersions`: from `If-Match`; `nil` for any version.
        case delete(id: String, expectedVersions: [Int64]?)
        case apply(Input, id: String, expectedVersions: [Int64]?, key: IdempotencyKey?)
    }

    typealias Completion = @Sendable (Result<StoredResponse, Problem>) -> Void

    /// The most requests one transaction commits.
    static let maxBatch = 512

    private final class Entry {
        let lock = NSLock()
        private(set) var instance: StoredInstance
        private(set) var machine: Machine
        /// The GET response, rendered at the first read after a change rather than on
        /// every read (and not at start-up, which must not grow with rendering work).
        private var rendered: Response?

        init(instance: StoredInstance, machine: Machine) {
            self.instance = instance
            self.machine = machine
        }

        func update(_ instance: StoredInstance, _ machine: Machine) {
            self.instance = instance
            self.machine = machine
            rendered = nil
        }

        /// Call with `lock` held.
        var response: Response {
            if let rendered { return rendered }
            let fresh = Response(
                status: 200,
                headers: [("Content-Type", "application/json"), ("ETag", "\"\(instance.state.version)\"")],
                body: InstanceRegistry.render(instance)
            )
            rendered = fresh
            return fresh
        }
    }

    /// Readers take this briefly; only the committer thread changes the dictionary.
    private let entriesLock = NSLock()
    private var entries: [String: Entry] = [:]
    /// Every id in order, so a page of the list is a binary search and a short walk.
    private var sortedIDs: [String] = []

    private let queue = NSCondition()
    private var pending: [(write: Write, completion: Completion)] = []
    private var isStopping = false
    private let stopped = DispatchSemaphore(value: 0)

    /// Rebuilds every stored instance; refuses to start if one names an unknown model or state.
    init(models: [String: Model], store: any InstanceStore, logger: Logger) throws(StoreError) {
        self.models = models
        self.store = store
        self.logger = logger
        for instance in try store.loadInstances() {
            guard let model = models[instance.model] else {
                throw StoreError("instance \"\(instance.id)\" uses model \"\(instance.model)\", which is not loaded")
            }
            guard let machine = Machine(model: model, restoring: instance.state) else {
                throw StoreError("instance \"\(instance.id)\" is in state \"\(instance.state.state)\", which model \"\(model.name)\" does not have")
            }
            entries[instance.id] = Entry(instance: instance, machine: machine)
        }
        sortedIDs = entries.keys.sorted()
        // The thread holds the registry until `stop()` ends it.
        let thread = Thread { [self] in runCommitter() }
        thread.name = "lifecycled-committer"
        thread.start()
    }

    var count: Int { entriesLock.withLock { entries.count } }

    private func entry(_ id: String) -> Entry? { entriesLock.withLock { entries[id] } }

    // MARK: reading (any thread)

    func instance(_ id: String) throws(Problem) -> StoredInstance {
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        return entry.lock.withLock { entry.instance }
    }

    /// The instance as last committed, as a GET answers it (with its version as ETag).
    func renderedInstance(_ id: String) throws(Problem) -> Response {
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        return entry.lock.withLock { entry.response }
    }

    /// Instances in id order after `cursor`, filtered by state and model.
    func list(state: String?, model: String?, after cursor: String?, limit: Int) -> (items: [StoredInstance], hasMore: Bool) {
        entriesLock.withLock {
            var index = cursor.map { Self.firstIndex(after: $0, in: sortedIDs) } ?? 0
            var items: [StoredInstance] = []
            while index < sortedIDs.count {
                let entry = entries[sortedIDs[index]]!
                index += 1
                let instance = entry.lock.withLock { entry.instance }
                if let state, instance.state.state != state { continue }
                if let model, instance.model != model { continue }
                if items.count == limit { return (items, true) }
                items.append(instance)
            }
            return (items, false)
        }
    }

    /// The index of the first id greater than `id` (binary search).
    private static func firstIndex(after id: String, in ids: [String]) -> Int {
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] <= id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func history(of id: String, after: Int64, limit: Int) throws(Problem) -> HistoryPage {
        _ = try instance(id)
        do {
            return try store.history(instanceID: id, after: after, limit: limit)
        } catch {
            throw storeFailure(error)
        }
    }

    // MARK: writing

    /// Queues a write; `completion` runs on the committer thread once it is committed or refused.
    func submit(_ write: Write, completion: @escaping Completion) {
        queue.lock()
        guard !isStopping else {
            queue.unlock()
            completion(.failure(.unavailable("lifecycled is stopping; nothing was changed")))
            return
        }
        pending.append((write, completion))
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

    private func runCommitter() {
        while true {
            queue.lock()
            while pending.isEmpty, !isStopping { queue.wait() }
            if pending.isEmpty {
                queue.unlock()
                stopped.signal()
                return
            }
            let batch = Array(pending.prefix(Self.maxBatch))
            pending.removeFirst(batch.count)
            queue.unlock()
            commit(batch)
        }
    }

    /// Where an instance stands within the batch being built.
    private enum Staged {
        case present(StoredInstance, Machine)
        case deleted
    }

    /// A line to log once the batch is committed.
    private typealias Note = (message: String, fields: KeyValuePairs<String, String>)

    private func commit(_ batch: [(write: Write, completion: Completion)]) {
        var staged: [String: Staged] = [:]
        var results: [Result<StoredResponse, Problem>?] = Array(repeating: nil, count: batch.count)
        var notes: [Note] = []
        do {
            try store.write { (transaction) throws(StoreError) in
                // Instances whose state changed: stored once per batch, however many records.
                var dirty: Set<String> = []
                for (index, job) in batch.enumerated() {
                    results[index] = try run(job.write, transaction, &staged, &dirty, &notes)
                }
                for id in dirty {
                    if case .present(let instance, _)? = staged[id] { try transaction.update(instance) }
                }
            }
        } catch {
            let failure = storeFailure(error)
            for (index, job) in batch.enumerated() {
                if case .failure(let problem)? = results[index] {
                    job.completion(.failure(problem))  // refused before touching the store
                } else {
                    job.completion(.failure(failure))
                }
            }
            return
        }
        entriesLock.withLock {
            for (id, change) in staged {
                switch change {
                case .present(let instance, let machine):
                    if let entry = entries[id] {
                        entry.lock.withLock { entry.update(instance, machine) }
                    } else {
                        entries[id] = Entry(instance: instance, machine: machine)
                        sortedIDs.insert(id, at: Self.firstIndex(after: id, in: sortedIDs))
                    }
                case .deleted:
                    if entries.removeValue(forKey: id) != nil {
                        sortedIDs.remove(at: Self.firstIndex(after: id, in: sortedIDs) - 1)
                    }
                }
            }
        }
        for (index, job) in batch.enumerated() { job.completion(results[index]!) }
        for note in notes { logger.info(note.message, note.fields) }
    }

    /// The instance as this batch has left it so far.
    private func current(_ id: String, _ staged: [String: Staged]) -> (instance: StoredInstance, machine: Machine)? {
        switch staged[id] {
        case .present(let instance, let machine)?: return (instance, machine)
        case .deleted?: return nil
        case nil:
            guard let entry = entry(id) else { return nil }
            return entry.lock.withLock { (entry.instance, entry.machine) }
        }
    }

    /// One write inside the batch's transaction. Refusals come back as values; only
    /// store failures throw, and they fail the whole batch.
    private func run(
        _ write: Write, _ transaction: any StoreTransaction, _ staged: inout [String: Staged], _ dirty: inout Set<String>, _ notes: inout [Note]
    ) throws(StoreError) -> Result<StoredResponse, Problem> {
        let time = Date().roundedToMilliseconds
        switch write {
        case .create(let id, let name, let isPut, let key):
            guard let model = models[name] else {
                return .failure(.unprocessable("unknown model \"\(name)\"; known: \(models.keys.sorted().joined(separator: ", "))"))
            }
            if let key, let replayed = try replay(key, transaction) { return replayed }
            if let existing = current(id, staged)?.instance {
                guard isPut, existing.model == name else {
                    return .failure(.conflict(isPut
                        ? "instance \"\(id)\" exists with model \"\(existing.model)\""
                        : "instance \"\(id)\" exists; PUT it to fetch it idempotently"))
                }
                return .success(StoredResponse(status: 200, contentType: "application/json", body: Self.render(existing)))
            }
            let machine = Machine(model: model)
            let instance = StoredInstance(id: id, model: name, createdAt: time, updatedAt: time, state: machine.snapshot)
            let response = StoredResponse(status: 201, contentType: "application/json", body: Self.render(instance))
            try transaction.insert(instance)
            if let key { try transaction.remember(key, response) }
            staged[id] = .present(instance, machine)
            notes.append(("instance created", ["id": id, "model": name]))
            return .success(response)

        case .delete(let id, let expectedVersions):
            guard let instance = current(id, staged)?.instance else { return .failure(.unknownInstance(id)) }
            if let expectedVersions, !expectedVersions.contains(instance.state.version) {
                return .failure(.preconditionFailed("instance \"\(id)\" is at version \(instance.state.version), which If-Match does not name"))
            }
            try transaction.delete(instanceID: id)
            staged[id] = .deleted
            notes.append(("instance deleted", ["id": id]))
            return .success(StoredResponse(status: 204, contentType: "", body: []))

        case .apply(let input, let id, let expectedVersions, let key):
            guard var (instance, machine) = current(id, staged) else { return .failure(.unknownInstance(id)) }
            if let key, let replayed = try replay(key, transaction) { return replayed }
            if let expectedVersions, !expectedVersions.contains(instance.state.version) {
                return .failure(.preconditionFailed("instance \"\(id)\" is at version \(instance.state.version), which If-Match does not name"))
            }
            let record: Record
            do {
                record = try machine.apply(input, at: time)
            } catch {
                return .failure(.unprocessable(error.description))
            }
            instance.state = machine.snapshot
            instance.updatedAt = time
            let encoded = try transaction.append(record, instanceID: id, encode: Self.encode)
            if let key { try transaction.remember(key, encoded.response) }
            staged[id] = .present(instance, machine)
            dirty.insert(id)
            if record.outcome == .unexpected {
                notes.append(("unexpected event", ["id": id, "event": record.name, "state": record.from, "seq": String(encoded.sequence)]))
            }
            if let incomplete = record.incompleteLaunch {
                notes.append(("incomplete launch", ["id": id, "step": incomplete.step, "sceneConnected": String(incomplete.isSceneConnected)]))
            }
            return .success(encoded.response)
        }
    }

    /// A stored response for a reused key, a refusal for a key reused on another request,
    /// or `nil` for a new key.
    private func replay(_ key: IdempotencyKey, _ transaction: any StoreTransaction) throws(StoreError) -> Result<StoredResponse, Problem>? {
        switch try transaction.lookUp(key, now: Date()) {
        case .unused: nil
        case .replay(let response): .success(response)
        case .conflict: .failure(.unprocessable("Idempotency-Key \"\(key.key)\" was used for a different request"))
        }
    }

    /// A numbered record as stored (its JSON) and as answered: 200 with the record,
    /// or 409 with a problem that carries it when the event was unexpected.
    private static func encode(_ record: Record) -> EncodedRecord {
        let json = record.jsonBytes()
        guard record.outcome == .unexpected else {
            return EncodedRecord(sequence: record.sequence, recordJSON: json, response: StoredResponse(status: 200, contentType: "application/json", body: json))
        }
        let problem = Problem(
            status: 409, title: "Unexpected Event",
            detail: "\"\(record.name)\" is not expected in state \"\(record.from)\"; it was recorded and counted",
            type: "https://lifecycled.dev/problems/unexpected-event",
            extensions: ["record": JSONFragment(record)]
        )
        let body = Response.problem(problem).body
        return EncodedRecord(sequence: record.sequence, recordJSON: json, response: StoredResponse(status: 409, contentType: "application/problem+json", body: body))
    }

    fileprivate static func render(_ instance: StoredInstance) -> [UInt8] {
        (try? JSON.encode(InstanceView(instance))) ?? []
    }

    private func storeFailure(_ error: StoreError) -> Problem {
        logger.error("store failure", ["error": error.message])
        let detail = error.isDiskFull ? "the disk is full; nothing was changed" : "storage failed; nothing was changed"
        return .unavailable(detail)
    }
}
