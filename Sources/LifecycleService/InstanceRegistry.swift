import Foundation
import LifecycleKit
import LifecycleStore
import MicroHTTP

/// Every live instance, its machine, and the rules for changing them.
///
/// Each instance has its own lock, held from reading its version to storing its next
/// record, so one instance's requests apply in order while different instances
/// proceed in parallel. A change reaches memory only after the store committed it.
final class InstanceRegistry: @unchecked Sendable {
    let models: [String: Model]
    let store: any InstanceStore
    let logger: Logger

    private final class Entry {
        let lock = NSLock()
        private(set) var instance: StoredInstance
        private(set) var machine: Machine
        /// The instance's JSON, rendered once per change rather than once per read.
        private(set) var rendered: [UInt8]
        var isDeleted = false

        init(instance: StoredInstance, machine: Machine) {
            self.instance = instance
            self.machine = machine
            rendered = InstanceRegistry.render(instance)
        }

        func update(_ instance: StoredInstance, _ machine: Machine) {
            self.instance = instance
            self.machine = machine
            rendered = InstanceRegistry.render(instance)
        }
    }

    private let entriesLock = NSLock()
    private var entries: [String: Entry] = [:]
    /// Serialises creation and deletion, so an id is never created twice.
    private let membershipLock = NSLock()

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
    }

    var count: Int { entriesLock.withLock { entries.count } }

    private func now() -> Date { Date().roundedToMilliseconds }

    private func entry(_ id: String) -> Entry? { entriesLock.withLock { entries[id] } }

    // MARK: membership

    /// Creates an instance. With `replacingNothing` false (PUT), an existing instance
    /// of the same model is returned as it is.
    func create(id: String, model name: String, isPut: Bool, key: IdempotencyKey?) throws(Problem) -> StoredResponse {
        guard let model = models[name] else {
            throw .unprocessable("unknown model \"\(name)\"; known: \(models.keys.sorted().joined(separator: ", "))")
        }
        membershipLock.lock()
        defer { membershipLock.unlock() }
        if let key, let replayed = try replay(key) { return replayed }
        if let existing = entry(id) {
            let instance = existing.lock.withLock { existing.instance }
            guard isPut, instance.model == name else {
                throw .conflict(isPut
                    ? "instance \"\(id)\" exists with model \"\(instance.model)\""
                    : "instance \"\(id)\" exists; PUT it to fetch it idempotently")
            }
            return StoredResponse(status: 200, contentType: "application/json", body: Self.render(instance))
        }
        let time = now()
        let machine = Machine(model: model)
        let instance = StoredInstance(id: id, model: name, createdAt: time, updatedAt: time, state: machine.snapshot)
        let response = StoredResponse(status: 201, contentType: "application/json", body: Self.render(instance))
        do {
            try store.insert(instance, idempotency: key.map { ($0, response) })
        } catch {
            throw storeFailure(error)
        }
        entriesLock.withLock { entries[id] = Entry(instance: instance, machine: machine) }
        logger.info("instance created", ["id": id, "model": name])
        return response
    }

    func delete(id: String) throws(Problem) {
        membershipLock.lock()
        defer { membershipLock.unlock() }
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        entry.lock.lock()
        defer { entry.lock.unlock() }
        do {
            try store.delete(instanceID: id)
        } catch {
            throw storeFailure(error)
        }
        entry.isDeleted = true
        _ = entriesLock.withLock { entries.removeValue(forKey: id) }
        logger.info("instance deleted", ["id": id])
    }

    // MARK: reading

    func instance(_ id: String) throws(Problem) -> StoredInstance {
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        return try entry.lock.locked { () throws(Problem) in
            guard !entry.isDeleted else { throw .unknownInstance(id) }
            return entry.instance
        }
    }

    /// The instance's JSON and version, as last rendered.
    func renderedInstance(_ id: String) throws(Problem) -> (json: [UInt8], version: Int64) {
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        return try entry.lock.locked { () throws(Problem) in
            guard !entry.isDeleted else { throw .unknownInstance(id) }
            return (entry.rendered, entry.instance.state.version)
        }
    }

    /// Instances in id order after `cursor`, filtered by state and model.
    func list(state: String?, model: String?, after cursor: String?, limit: Int) -> (items: [StoredInstance], hasMore: Bool) {
        let all = entriesLock.withLock { Array(entries.values) }
        var matching: [StoredInstance] = []
        matching.reserveCapacity(all.count)
        for entry in all {
            let instance = entry.lock.withLock { entry.instance }
            if let cursor, instance.id <= cursor { continue }
            if let state, instance.state.state != state { continue }
            if let model, instance.model != model { continue }
            matching.append(instance)
        }
        matching.sort { $0.id < $1.id }
        return (Array(matching.prefix(limit)), matching.count > limit)
    }

    func history(of id: String, after: Int64, limit: Int) throws(Problem) -> HistoryPage {
        _ = try instance(id)
        do {
            return try store.history(instanceID: id, after: after, limit: limit)
        } catch {
            throw storeFailure(error)
        }
    }

    // MARK: changing

    /// Applies an event, action or relaunch: the heart of the service.
    func apply(_ input: Input, to id: String, expectedVersion: Int64?, key: IdempotencyKey?) throws(Problem) -> StoredResponse {
        guard let entry = entry(id) else { throw .unknownInstance(id) }
        entry.lock.lock()
        defer { entry.lock.unlock() }
        guard !entry.isDeleted else { throw .unknownInstance(id) }
        if let key, let replayed = try replay(key) { return replayed }
        if let expectedVersion, expectedVersion != entry.instance.state.version {
            throw .preconditionFailed("instance \"\(id)\" is at version \(entry.instance.state.version), not \(expectedVersion)")
        }

        var machine = entry.machine
        let time = now()
        let record: Record
        do {
            record = try machine.apply(input, at: time)
        } catch {
            throw .unprocessable(error.description)
        }
        var instance = entry.instance
        instance.state = machine.snapshot
        instance.updatedAt = time

        let encoded: EncodedRecord
        do {
            encoded = try store.append(record, updating: instance, idempotencyKey: key, encode: Self.encode)
        } catch {
            throw storeFailure(error)
        }
        entry.update(instance, machine)

        if record.outcome == .unexpected {
            logger.info("unexpected event", ["id": id, "event": record.name, "state": record.from, "seq": String(encoded.sequence)])
        }
        if let incomplete = record.incompleteLaunch {
            logger.info("incomplete launch", ["id": id, "step": incomplete.step, "sceneConnected": String(incomplete.isSceneConnected)])
        }
        return encoded.response
    }

    /// A numbered record as stored (its JSON) and as answered: 200 with the record,
    /// or 409 with a problem that carries it when the event was unexpected.
    private static func encode(_ record: Record) -> EncodedRecord {
        let json = (try? JSON.encoder.encode(record)).map(Array.init) ?? []
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
        (try? JSON.encoder.encode(InstanceView(instance))).map(Array.init) ?? []
    }

    private func replay(_ key: IdempotencyKey) throws(Problem) -> StoredResponse? {
        let lookup: IdempotencyLookup
        do {
            lookup = try store.lookUp(key, now: Date())
        } catch {
            throw storeFailure(error)
        }
        switch lookup {
        case .unused: return nil
        case .replay(let response): return response
        case .conflict: throw .unprocessable("Idempotency-Key \"\(key.key)\" was used for a different request")
        }
    }

    private func storeFailure(_ error: StoreError) -> Problem {
        logger.error("store failure", ["error": error.message])
        let detail = error.isDiskFull ? "the disk is full; nothing was changed" : "storage failed; nothing was changed"
        return .unavailable(detail)
    }
}
