import Foundation
import LifecycleKit
import Testing
import LifecycleTestSupport
@testable import LifecycleStore

/// How long a store keeps idempotency keys: while their instance lives, then as long as its deletion record; keys of
/// an older schema as they always were.
@Suite("idempotency keys' lifetime")
struct KeyLifetimeStoreTests {
    @Test("a key outlasts any age while its instance lives, a purge included, and goes with its deletion record", arguments: Backend.allCases)
    func keptWithInstance(backend: Backend) throws {
        let place = try StorePlace(backend)
        let instance = StoredInstance(id: "a", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        let key = IdempotencyKey(key: "k", fingerprint: [1])
        let applied = RememberedWrite.applied(recordJSON: [2], isUnexpected: false, instance: KeyedInstance(id: "a", createdAt: t0))
        do {
            let store = try place.open()
            defer { store.close() }
            try store.write { (t) throws(StoreError) in
                _ = try t.insert(instance) { _ in [0] }
                try t.remember(key, applied)
            }
        }
        try place.execute("UPDATE idempotency SET created_at = created_at - \(400 * 24 * 3_600_000)")
        // Opening purges what has expired.
        let store = try place.open(tombstoneLifetime: 60)
        defer { store.close() }
        func lookUp(_ now: Date) throws -> IdempotencyLookup { try store.write { (t) throws(StoreError) in try t.lookUp(key, now: now) } }
        #expect(try lookUp(Date()) == .replay(applied), "kept, with the instance it went to, 400 days on")

        let deletedAt = Date()
        _ = try store.write { (t) throws(StoreError) in try t.delete(instance, at: deletedAt) { _ in [3] } }
        #expect(try lookUp(deletedAt.addingTimeInterval(59)) == .replay(applied), "kept as long as the deletion record")
        #expect(try lookUp(deletedAt.addingTimeInterval(61)) == .unused)
    }

    @Test("keys the previous schema kept replay after the upgrade and expire a day after they were made, as they did", arguments: Backend.allCases)
    func upgraded(backend: Backend) throws {
        let now = Date()
        let rows = [("fresh", now.addingTimeInterval(-3600)), ("stale", now.addingTimeInterval(-25 * 3600))].map { key, made in
            "INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at) VALUES ("
                + DivergenceStoreTests.literals([.text(key), .bytes([1]), .integer(1), .text(nil), .text(nil), .integer(nil), .bytes([2]), .integer(Codec.milliseconds(made))], backend)
                + ")"
        }
        let open = try DivergenceStoreTests.opener(backend, sqliteVersion: 6, postgresVersion: 3, statements: rows)
        let store = try open()
        defer { store.close() }
        #expect(try DivergenceStoreTests.schemaVersion(store) == (backend == .sqlite ? SQLiteStore.migrations.count : PostgresStore.migrations.count))
        func lookUp(_ key: String, _ now: Date) throws -> IdempotencyLookup {
            try store.write { (t) throws(StoreError) in try t.lookUp(IdempotencyKey(key: key, fingerprint: [1]), now: now) }
        }
        #expect(try lookUp("fresh", now) == .replay(.applied(recordJSON: [2], isUnexpected: false)))
        #expect(try lookUp("fresh", now.addingTimeInterval(23.5 * 3600)) == .unused, "a day after it was made")
        #expect(try lookUp("stale", now) == .unused)
    }
}
