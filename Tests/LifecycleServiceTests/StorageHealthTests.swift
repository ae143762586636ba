import Foundation
import Testing
@testable import LifecycleService
@testable import LifecycleStore

@Suite("Storage health: the state machine /healthz reads, driven without a store", .sqliteOnly("a state machine; opens no store"))
struct StorageHealthTests {
    @Test("a write's failure is cleared by a commit, a read's by a read; damage stays; the first failure is logged once")
    func storageHealth() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var health = StorageHealth()
        let unreachable = StoreError("server gone", kind: .unavailable)
        #expect(health.failed(unreachable, isReadOnly: true, at: now) == .failing(reason: "server gone", isReadOnly: true))
        #expect(!health.needsProbe, "only reads failed: a read that works clears it")
        #expect(health.failed(unreachable, isReadOnly: false, at: now.addingTimeInterval(5)) == nil, "logged once")
        #expect(health.failure?.since == now && health.failure?.isReadOnly == false)
        #expect(health.needsProbe, "a write failed on an unreachable server: an empty transaction shows when it is back")
        #expect(health.readable() == nil, "a read does not clear a write's failure")
        #expect(health.committed() == .recovered(since: now, isReadOnly: false))
        #expect(health.failure == nil)

        #expect(health.failed(StoreError("damaged", kind: .damaged), isReadOnly: false, at: now) != nil)
        #expect(health.failed(StoreError("later"), isReadOnly: false, at: now) == nil)
        #expect(health.failure?.reason == "damaged", "the first report of damage is kept")
        #expect(!health.needsProbe)
        #expect(health.committed() == nil && health.failure?.kind == .damaged, "damage is reported until a restart")

        var reads = StorageHealth()
        _ = reads.failed(StoreError("timeout"), isReadOnly: true, at: now)
        #expect(reads.readable() == .recovered(since: now, isReadOnly: true))
    }
}
