import Foundation
import LifecycleKit
import LifecycleStore

/// What is committed, as the write rules see it: the instances, their number and the
/// idempotency keys, as the store has them plus what earlier writes of the same transaction did.
///
/// Reads are asked for one at a time, only when a rule needs them, because each may be a round
/// trip to the database server (while another replica has written since the cache was current).
protocol CommittedState {
    /// The instance `id` and its machine, or `nil` when there is none.
    func instance(_ id: String) throws(StoreError) -> (instance: StoredInstance, machine: Machine)?
    /// How many instances there are.
    func instanceCount() throws(StoreError) -> Int
    /// What the store remembers of `key`.
    func lookUp(_ key: IdempotencyKey) throws(StoreError) -> IdempotencyLookup
    /// When the last instance of `id` deleted lately was created, if that may be this very
    /// millisecond (``RecentDeletions``).
    func deletedCreation(of id: String) -> Date?
}

/// What the rules decided a write does, for the committer to carry out in the transaction.
enum WriteDecision {
    /// Nothing to write: the answer is known (a refusal, or a replay for an idempotency key).
    case answer(Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>)
    /// A PUT found the instance already there with its model.
    case found(StoredInstance)
    /// Store the new instance.
    case create(StoredInstance, Machine)
    /// Delete the instance, as it stands.
    case delete(StoredInstance)
    /// Append `record`; the instance and its machine as the record leaves them.
    case apply(Record, StoredInstance, Machine)
}

/// The rules a write must pass, decided over what is committed and nothing else: which model,
/// whether the instance exists, `If-Match`, the limit on instances, and the replay of an
/// idempotency key. No thread, store or clock of their own, so a test states what is committed
/// and reads the decision.
enum WriteRules {
    /// What `write`, made at `time`, does to `committed`. Only a read of `committed` throws.
    ///
    /// The order is part of the contract: a reused idempotency key answers what its first
    /// request did before anything else is checked (a retry of a create is not "exists", a
    /// retry of an input is not a version mismatch), except that an unknown model, or for an
    /// input an unknown instance, is refused first.
    static func decide(
        _ write: InstanceRegistry.Write, at time: Date, models: [String: Model], maxInstances: Int, in committed: some CommittedState
    ) throws(StoreError) -> WriteDecision {
        switch write {
        case .create(let id, let name, let isPut, let key, let labels):
            guard let model = models[name] else {
                return .answer(.failure(.unknownModel(name, suggestion: suggestion(for: name, among: models.keys.sorted(), kind: "model"))))
            }
            if let key, let replayed = replay(try committed.lookUp(key), key: key) {
                switch replayed {
                case .success(let remembered): return .answer(try replayedCreation(remembered, key: key, in: committed))
                case .failure(let refusal): return .answer(.failure(refusal))
                }
            }
            if let existing = try committed.instance(id)?.instance {
                guard isPut, existing.model == name else { return .answer(.failure(.exists(id: id, model: existing.model, isPut: isPut))) }
                return .found(existing)
            }
            guard try committed.instanceCount() < maxInstances else { return .answer(.failure(.instanceLimit(maxInstances))) }
            let machine = Machine(model: model)
            // The creation time, to the millisecond, tells an instance from an earlier one of its
            // id (in its ETag, and in what its idempotency keys are bound to): after one created
            // and deleted in this same millisecond, a millisecond later.
            var createdAt = time
            if let earlier = committed.deletedCreation(of: id), earlier >= time { createdAt = earlier.addingTimeInterval(0.001).roundedToMilliseconds }
            return .create(StoredInstance(id: id, model: name, createdAt: createdAt, updatedAt: createdAt, state: machine.snapshot, labels: labels), machine)

        case .delete(let id, let expected):
            guard let instance = try committed.instance(id)?.instance else { return .answer(.failure(.unknownInstance(id))) }
            if let refusal = versionRefusal(instance, expected) { return .answer(.failure(refusal)) }
            return .delete(instance)

        case .apply(let input, let id, let expected, let key):
            guard var (instance, machine) = try committed.instance(id) else { return .answer(.failure(.unknownInstance(id))) }
            if let key, let replayed = replay(try committed.lookUp(key), key: key) {
                return .answer(replayed.flatMap { remembered in replayedInput(remembered, key: key, on: instance) })
            }
            if let refusal = versionRefusal(instance, expected) { return .answer(.failure(refusal)) }
            let record: Record
            do {
                record = try machine.apply(reported: input, at: time)
            } catch {
                return .answer(.failure(.invalidInput(error)))
            }
            instance.state = machine.snapshot
            instance.updatedAt = time
            return .apply(record, instance, machine)
        }
    }

    /// `If-Match`: a refusal unless the instance matches one of the tags the write expects
    /// (`nil`: any).
    static func versionRefusal(_ instance: StoredInstance, _ expected: [InstanceRegistry.InstanceTag]?) -> InstanceRegistry.Refusal? {
        guard let expected, !expected.contains(where: { $0.matches(instance) }) else { return nil }
        return .versionMismatch(id: instance.id, current: InstanceRegistry.InstanceTag(instance))
    }

    /// What a reused key's write did, a refusal for a key reused on another request, or `nil`
    /// for a new key.
    static func replay(_ lookup: IdempotencyLookup, key: IdempotencyKey) -> Result<RememberedWrite, InstanceRegistry.Refusal>? {
        switch lookup {
        case .unused: nil
        case .replay(let write): .success(write)
        case .conflict: .failure(.keyReused(String(key.clientKey)))
        }
    }

    /// An input's outcome, replayed while the instance it went to still exists (`current` has its id).
    ///
    /// Once that instance is deleted and another made under its id, the record is no longer in any history, and
    /// applying the input anew would put a stale input on the new instance: the replay is refused naming it. (A key
    /// kept from before lifecycled noted the instance has no creation time to compare, and is answered as kept.)
    ///
    /// An unexpected input's 409 names its input and state, which only the stored record holds: a record that
    /// cannot be read for them is refused as storage unreadable, as an instance's row that cannot be read is.
    static func replayedInput(
        _ remembered: RememberedWrite, key: IdempotencyKey, on current: StoredInstance
    ) -> Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal> {
        // The fingerprint holds method and path, so a create's key does not come back here.
        guard case .applied(let json, let isUnexpected, let made) = remembered else { return .failure(.keyReused(String(key.clientKey))) }
        if let made, made.createdAt.millisecondsSince1970 != current.createdAt.millisecondsSince1970 {
            return .failure(.replayedInstanceDeleted(id: current.id, key: String(key.clientKey)))
        }
        guard isUnexpected else { return .success(.applied(recordJSON: json, unexpected: nil)) }
        // Its 409 names the input and the state, which only the stored record still holds.
        let record = "the record first answered to Idempotency-Key \"\(key.clientKey)\""
        do {
            guard let input = try InstanceRegistry.UnexpectedInput(recordJSON: json) else {
                return .failure(.storageUnreadable(what: record + " (it names no input or state)"))
            }
            return .success(.applied(recordJSON: json, unexpected: input))
        } catch {
            return .failure(.storageUnreadable(what: record + " (\(error))"))
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
    static func replayedCreation(
        _ remembered: RememberedWrite, key: IdempotencyKey, in committed: some CommittedState
    ) throws(StoreError) -> Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal> {
        // The fingerprint holds method and path, so an input's key does not come back here.
        guard case .created(let id, let model, let createdAt, let json) = remembered else { return .failure(.keyReused(String(key.clientKey))) }
        guard let existing = try committed.instance(id)?.instance, existing.model == model, existing.createdAt == createdAt else {
            return .failure(.createdInstanceDeleted(id: id, key: String(key.clientKey)))
        }
        return .success(.created(id: id, json: json))
    }
}
