import Foundation
import LifecycleKit
import LifecycleLocks
import Testing
@testable import LifecycleService
@testable import LifecycleStore

/// What is committed, stated by a test: instances by id, their number, and what the store
/// remembers of each idempotency key. It counts the reads the rules ask for.
private final class Committed: CommittedState {
    var instances: [String: StoredInstance] = [:]
    var keys: [String: IdempotencyLookup] = [:]
    /// When instances deleted lately were created, by id.
    var deleted: [String: Date] = [:]
    /// Overrides the number of instances (as another replica's would).
    var count: Int?
    var reads: [String] = []

    func instance(_ id: String) throws(StoreError) -> (instance: StoredInstance, machine: Machine)? {
        reads.append("instance \(id)")
        guard let instance = instances[id] else { return nil }
        return (instance, try instance.restoredMachine(among: Model.builtins))
    }

    func instanceCount() throws(StoreError) -> Int {
        reads.append("count")
        return count ?? instances.count
    }

    func lookUp(_ key: IdempotencyKey) throws(StoreError) -> IdempotencyLookup {
        reads.append("key \(key.key)")
        return keys[key.key] ?? .unused
    }

    func deletedCreation(of id: String) -> Date? {
        deleted[id]
    }
}

@Suite("Write rules: decided over what is committed, without a thread, a store or a server", .sqliteOnly("pure rules; opens no store"))
struct WriteRulesTests {
    let time = Date(timeIntervalSince1970: 1_800_000_000)

    private func decide(_ write: InstanceRegistry.Write, _ committed: Committed, maxInstances: Int = .max) throws -> WriteDecision {
        try WriteRules.decide(write, at: time, models: Model.builtins, maxInstances: maxInstances, in: committed)
    }

    private func stored(_ id: String, model: String = "ios-app", createdAt: Date? = nil) -> StoredInstance {
        let machine = Machine(model: Model.builtins[model]!)
        return StoredInstance(id: id, model: model, createdAt: createdAt ?? time, updatedAt: createdAt ?? time, state: machine.snapshot)
    }

    private func key(_ name: String) -> IdempotencyKey { IdempotencyKey(key: "scope \(name)", fingerprint: Array(name.utf8)) }

    private func refusal(_ decision: WriteDecision) -> InstanceRegistry.Refusal? {
        guard case .answer(.failure(let refusal)) = decision else { return nil }
        return refusal
    }

    @Test("a create after one of the same id created and deleted in this millisecond is a millisecond later; otherwise at the write's time")
    func createAfterADeletionInTheSameMillisecond() throws {
        let committed = Committed()
        /// Milliseconds after the write's time, as ETags and keys have it.
        func createdAt() throws -> Int64? {
            guard case .create(let instance, _) = try decide(.create(id: "a", model: "ios-app", isPut: true, key: nil), committed) else { return nil }
            return Int64(((instance.createdAt.timeIntervalSince1970 - time.timeIntervalSince1970) * 1000).rounded())
        }
        committed.deleted["a"] = time
        #expect(try createdAt() == 1, "its ETag and its keys' binding tell it from the one deleted")
        committed.deleted["a"] = time.addingTimeInterval(0.001)  // a clock set back
        #expect(try createdAt() == 2)
        committed.deleted["a"] = time.addingTimeInterval(-0.001)
        #expect(try createdAt() == 0)
        committed.deleted = ["b": time]
        #expect(try createdAt() == 0)
    }

    @Test("a create makes the instance in its model's initial state, at the write's time")
    func create() throws {
        let committed = Committed()
        guard case .create(let instance, let machine) = try decide(.create(id: "a", model: "ios-app", isPut: false, key: nil), committed) else {
            Issue.record("not a create")
            return
        }
        #expect(instance == stored("a"))
        #expect(machine.snapshot == instance.state)
        #expect(committed.reads == ["instance a", "count"])
    }

    @Test("an unknown model is refused with a suggestion, before anything is read")
    func unknownModel() throws {
        let committed = Committed()
        guard case .unknownModel("ios-ap", let suggestion)? = refusal(try decide(.create(id: "a", model: "ios-ap", isPut: false, key: key("k")), committed)) else {
            Issue.record("not refused as an unknown model")
            return
        }
        #expect(suggestion.contains("ios-app"))
        #expect(committed.reads.isEmpty)
    }

    @Test("POST of an existing id is refused; PUT finds it with its model, and is refused with another")
    func existing() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        guard case .exists(id: "a", model: "ios-app", isPut: false)? = refusal(try decide(.create(id: "a", model: "ios-app", isPut: false, key: nil), committed)) else {
            Issue.record("POST not refused")
            return
        }
        guard case .found(let found) = try decide(.create(id: "a", model: "ios-app", isPut: true, key: nil), committed) else {
            Issue.record("PUT did not find it")
            return
        }
        #expect(found == stored("a"))
        guard case .exists(id: "a", model: "ios-app", isPut: true)? = refusal(try decide(.create(id: "a", model: "android-activity", isPut: true, key: nil), committed)) else {
            Issue.record("PUT with another model not refused")
            return
        }
    }

    @Test("maxInstances: a create at the limit is refused; below it, made; an existing PUT is found at the limit")
    func instanceLimit() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        committed.count = 2
        guard case .instanceLimit(2)? = refusal(try decide(.create(id: "b", model: "ios-app", isPut: false, key: nil), committed, maxInstances: 2)) else {
            Issue.record("not refused at the limit")
            return
        }
        guard case .create = try decide(.create(id: "b", model: "ios-app", isPut: false, key: nil), committed, maxInstances: 3) else {
            Issue.record("refused below the limit")
            return
        }
        guard case .found = try decide(.create(id: "a", model: "ios-app", isPut: true, key: nil), committed, maxInstances: 2) else {
            Issue.record("an existing PUT counted against the limit")
            return
        }
    }

    @Test("If-Match: a delete or an input at another version, or of an instance since made again, is refused with the current tag; at a listed one it goes ahead")
    func ifMatch() throws {
        typealias Tag = InstanceRegistry.InstanceTag
        let committed = Committed()
        committed.instances["a"] = stored("a")
        let current = Tag(stored("a"))
        let version = current.version
        guard case .versionMismatch(id: "a", current: current)? = refusal(try decide(.delete(id: "a", expected: [Tag(version: version + 1)]), committed)) else {
            Issue.record("delete at another version not refused")
            return
        }
        guard case .delete(let deleted) = try decide(.delete(id: "a", expected: [Tag(version: version + 1), Tag(version: version)]), committed), deleted.id == "a" else {
            Issue.record("delete at a listed version refused")
            return
        }
        // The ETag of the instance deleted before this one was made: the same version, another creation.
        let earlier = Tag(version: version, createdAt: current.createdAt! - 1)
        guard case .versionMismatch(id: "a", current: current)? = refusal(try decide(.delete(id: "a", expected: [earlier]), committed)) else {
            Issue.record("delete at the ETag of an earlier instance of the id not refused")
            return
        }
        guard case .delete = try decide(.delete(id: "a", expected: [earlier, current]), committed) else {
            Issue.record("delete at the current ETag refused")
            return
        }
        let input = InstanceRegistry.Write.apply(.event("didFinishLaunching"), id: "a", expected: [Tag(version: version + 1)], key: nil)
        guard case .versionMismatch(id: "a", current: current)? = refusal(try decide(input, committed)) else {
            Issue.record("input at another version not refused")
            return
        }
        guard case .unknownInstance("b")? = refusal(try decide(.delete(id: "b", expected: nil), committed)) else {
            Issue.record("delete of no instance not refused")
            return
        }
    }

    @Test("an input is applied to the machine: the record, and the instance one version on at the write's time")
    func apply() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a", createdAt: time.addingTimeInterval(-60))
        guard case .apply(let record, let instance, let machine) = try decide(.apply(.event("didFinishLaunching"), id: "a", expected: nil, key: nil), committed) else {
            Issue.record("not applied")
            return
        }
        #expect(record.name == "didFinishLaunching")
        #expect(instance.state.version == stored("a").state.version + 1)
        #expect(instance.updatedAt == time && instance.createdAt == time.addingTimeInterval(-60))
        #expect(machine.snapshot == instance.state)
        guard case .invalidInput(.unknownEvent("noSuchEvent", _, _))? = refusal(try decide(.apply(.event("noSuchEvent"), id: "a", expected: nil, key: nil), committed)) else {
            Issue.record("an unknown event not refused")
            return
        }
    }

    @Test("a key reused with another request is refused, for a create and for an input")
    func keyConflict() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        committed.keys["scope k"] = .conflict
        guard case .keyReused("k")? = refusal(try decide(.create(id: "b", model: "ios-app", isPut: false, key: key("k")), committed)) else {
            Issue.record("create not refused")
            return
        }
        guard case .keyReused("k")? = refusal(try decide(.apply(.relaunch, id: "a", expected: nil, key: key("k")), committed)) else {
            Issue.record("input not refused")
            return
        }
    }

    @Test("a replayed create answers what was created while it exists, before 'exists' or the limit is checked")
    func replayedCreate() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        committed.keys["scope k"] = .replay(.created(id: "a", model: "ios-app", createdAt: time, json: Array("first".utf8)))
        // Sent again without an id (a fresh one drawn): the stored id answers.
        let decision = try decide(.create(id: "fresh", model: "ios-app", isPut: false, key: key("k")), committed, maxInstances: 1)
        guard case .answer(.success(.created(id: "a", json: let json))) = decision else {
            Issue.record("not replayed: \(decision)")
            return
        }
        #expect(json == Array("first".utf8))
        #expect(committed.reads == ["key scope k", "instance a"])
    }

    @Test("a replayed create whose instance was deleted, or made again since, is refused naming it")
    func replayedCreateGone() throws {
        let committed = Committed()
        committed.keys["scope k"] = .replay(.created(id: "a", model: "ios-app", createdAt: time, json: []))
        guard case .createdInstanceDeleted(id: "a", key: "k")? = refusal(try decide(.create(id: "a", model: "ios-app", isPut: false, key: key("k")), committed)) else {
            Issue.record("a deleted instance's replay not refused")
            return
        }
        committed.instances["a"] = stored("a", createdAt: time.addingTimeInterval(1))
        guard case .createdInstanceDeleted(id: "a", key: "k")? = refusal(try decide(.create(id: "a", model: "ios-app", isPut: false, key: key("k")), committed)) else {
            Issue.record("a re-made instance's replay not refused")
            return
        }
        committed.instances["a"] = stored("a", model: "android-activity")
        guard case .createdInstanceDeleted(id: "a", key: "k")? = refusal(try decide(.create(id: "a", model: "ios-app", isPut: false, key: key("k")), committed)) else {
            Issue.record("a replay over another model's instance not refused")
            return
        }
    }

    @Test("a replayed input answers its first record, before If-Match is checked")
    func replayedInput() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        let record = Array(#"{"sequence":3,"version":2,"kind":"event","event":"didBecomeActive","from":"launching","to":"launching"}"#.utf8)
        committed.keys["scope k"] = .replay(.applied(recordJSON: record, isUnexpected: true))
        let decision = try decide(.apply(.relaunch, id: "a", expected: [InstanceRegistry.InstanceTag(version: 99)], key: key("k")), committed)
        guard case .answer(.success(.applied(recordJSON: let json, unexpected: let input?))) = decision else {
            Issue.record("not replayed: \(decision)")
            return
        }
        // Its 409 names what the stored record does.
        #expect(json == record && input == InstanceRegistry.UnexpectedInput(input: "didBecomeActive", state: "launching"))
        // An input's key is answered only for an instance that exists.
        guard case .unknownInstance("b")? = refusal(try decide(.apply(.relaunch, id: "b", expected: nil, key: key("k")), committed)) else {
            Issue.record("an input to no instance replayed")
            return
        }
    }

    @Test("a replayed input whose instance was made again since is refused naming it; one kept without its instance replays")
    func replayedInputGone() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a", createdAt: time.addingTimeInterval(0.001))
        committed.keys["scope k"] = .replay(.applied(recordJSON: [], isUnexpected: false, instance: KeyedInstance(id: "a", createdAt: time)))
        guard case .replayedInstanceDeleted(id: "a", key: "k")? = refusal(try decide(.apply(.relaunch, id: "a", expected: nil, key: key("k")), committed)) else {
            Issue.record("a replay on an instance made again not refused")
            return
        }
        committed.instances["a"] = stored("a", createdAt: time)
        guard case .answer(.success(.applied)) = try decide(.apply(.relaunch, id: "a", expected: nil, key: key("k")), committed) else {
            Issue.record("a replay on the instance it went to not answered")
            return
        }
        // A key stored before keys named their instance cannot tell: answered as kept.
        committed.instances["a"] = stored("a", createdAt: time.addingTimeInterval(1))
        committed.keys["scope old"] = .replay(.applied(recordJSON: [], isUnexpected: false))
        guard case .answer(.success(.applied)) = try decide(.apply(.relaunch, id: "a", expected: nil, key: key("old")), committed) else {
            Issue.record("a key kept without its instance not answered")
            return
        }
    }

    @Test("an unexpected input's replay whose stored record names no input, or is no JSON, is refused as unreadable")
    func replayedUnexpectedUnreadable() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        committed.keys["scope none"] = .replay(.applied(recordJSON: Array(#"{"sequence":3,"kind":"event"}"#.utf8), isUnexpected: true))
        committed.keys["scope broken"] = .replay(.applied(recordJSON: Array(#"{"from":"#.utf8), isUnexpected: true))
        for name in ["none", "broken"] {
            guard case .storageUnreadable(let what)? = refusal(try decide(.apply(.relaunch, id: "a", expected: nil, key: key(name)), committed)) else {
                Issue.record("a damaged record replayed for \(name)")
                continue
            }
            #expect(what.hasPrefix("the record first answered to Idempotency-Key \"\(name)\" ("))
        }
        // The same record, kept for an expected input, is answered as it is: nothing reads it.
        committed.keys["scope expected"] = .replay(.applied(recordJSON: Array(#"{"from":"#.utf8), isUnexpected: false))
        guard case .answer(.success(.applied(recordJSON: _, unexpected: nil))) = try decide(.apply(.relaunch, id: "a", expected: nil, key: key("expected")), committed) else {
            Issue.record("an expected input's replay not answered")
            return
        }
    }

    @Test("an unexpected input is named from its record: an event or action by name, a relaunch or gap by kind")
    func unexpectedInputNames() {
        func named(_ kind: InputKind, _ name: String) -> InstanceRegistry.UnexpectedInput {
            InstanceRegistry.UnexpectedInput(Record(version: 1, kind: kind, name: name, from: "background", to: "background", outcome: .unexpected, time: time))
        }
        #expect(named(.event, "didBecomeActive") == InstanceRegistry.UnexpectedInput(input: "didBecomeActive", state: "background"))
        #expect(named(.action, "open") == InstanceRegistry.UnexpectedInput(input: "open", state: "background"))
        #expect(named(.relaunch, "ignored") == InstanceRegistry.UnexpectedInput(input: "relaunch", state: "background"))
        #expect(named(.gap, "ignored") == InstanceRegistry.UnexpectedInput(input: "gap", state: "background"))
    }

    @Test("a key remembered with the other kind of write is refused as reused")
    func replayOfOtherKind() throws {
        let committed = Committed()
        committed.instances["a"] = stored("a")
        committed.keys["scope created"] = .replay(.created(id: "a", model: "ios-app", createdAt: time, json: []))
        committed.keys["scope applied"] = .replay(.applied(recordJSON: [], isUnexpected: false))
        guard case .keyReused("created")? = refusal(try decide(.apply(.relaunch, id: "a", expected: nil, key: key("created")), committed)) else {
            Issue.record("a create's key on an input not refused")
            return
        }
        guard case .keyReused("applied")? = refusal(try decide(.create(id: "a", model: "ios-app", isPut: true, key: key("applied")), committed)) else {
            Issue.record("an input's key on a create not refused")
            return
        }
    }
}
