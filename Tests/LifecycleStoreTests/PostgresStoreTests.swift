import Foundation
import LifecycleKit
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleStore

/// Counts the calls of a commit observer.
final class Wakes: Sendable {
    private let count = LockedValue<Int>(0)
    var handler: @Sendable () -> Void { { [self] in count.withLock { $0 += 1 } } }
    var value: Int { count.withLock { $0 } }
}

/// Runs `body(i)` for each `i` in `0..<count`, each on a thread of its own, all at once;
/// returns once every one has returned.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread.detachNewThread {
            body(index)
            done.leave()
        }
    }
    done.wait()
}

@Suite("PostgreSQL store")
struct PostgresStoreTests {
    @Test("replicas starting together on an empty database make the schema once; a newer schema is refused")
    func schemaOnce() throws {
        let url = try PostgresCluster.shared.makeDatabase()
        let opened = LockedValue<[Result<Int, StoreError>]>([])
        onThreads(4) { _ in
            let result = Result { () throws(StoreError) -> Int in
                let store = try PostgresStore(url: url)
                defer { store.close() }
                return try store.schemaVersion()
            }
            opened.withLock { $0.append(result) }
        }
        for result in opened.withLock({ $0 }) {
            #expect(try result.get() == PostgresStore.migrations.count)
        }

        let store = try PostgresStore(url: url)
        try InstanceWriter(id: "a").create(in: store)
        try PostgresCluster.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'", on: url)
        #expect {
            _ = try PostgresStore(url: url)
        } throws: { error in
            "\(error)".contains("schema version 99 is newer")
        }
        store.close()
    }

    @Test("two replicas writing at once: one dense sequence in commit order, no number twice, every record kept")
    func concurrentReplicas() throws {
        let url = try PostgresCluster.shared.makeDatabase()
        let replicas = [try PostgresStore(url: url), try PostgresStore(url: url)]
        defer { replicas.forEach { $0.close() } }
        try Self.writeConcurrently(to: replicas)
    }

    @Test("through PgBouncer in transaction mode (clients sharing two server connections): writes, reads, and LISTEN on its own direct connection")
    func throughPgBouncer() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        try cluster.startPgBouncer()
        let direct = try cluster.makeDatabase()
        let pooled = try cluster.throughPgBouncer(direct)
        let options = PostgresStore.Options(listenURL: direct)
        let replicas = [try PostgresStore(url: pooled, options: options), try PostgresStore(url: pooled, options: options)]
        defer { replicas.forEach { $0.close() } }
        let wakes = Wakes()
        replicas[1].observeCommitsElsewhere(wakes.handler)
        #expect(eventually { wakes.value == 1 })
        try Self.writeConcurrently(to: replicas)
        #expect(eventually { wakes.value > 1 }, "notifications of commits made through PgBouncer reach the direct LISTEN")

        // Deletes, idempotency keys and coverage through the pool as well.
        let instance = InstanceWriter(id: "w0").instance
        let key = IdempotencyKey(key: "k", fingerprint: [1])
        var counts = CoverageCounts()
        counts.add(2, to: .init(model: "ios-app", kind: .rowTaken, name: "r1"))
        let deleted = try replicas[0].write { (t) throws(StoreError) in
            try t.remember(key, .applied(recordJSON: [1], isUnexpected: false))
            try t.addCoverage(counts)
            return try t.delete(instance, at: Date(), encode: change("deleted", instance))
        }
        #expect(try replicas[1].write { (t) throws(StoreError) in try t.lookUp(key, now: Date()) } == .replay(.applied(recordJSON: [1], isUnexpected: false)))
        #expect(try replicas[1].loadCoverage() == counts)
        #expect(try replicas[1].replay(after: deleted - 1, through: deleted, filter: RecordFilter(), limit: PageLimit(records: 10)).records.map(\.kind) == [.deleted])
    }

    /// Four writers, two on each replica, each creating an instance and appending to it in
    /// batches; checks the numbering and what every replica reads back.
    static func writeConcurrently(to replicas: [PostgresStore]) throws {
        // Each transaction: the number it started from and the numbers it assigned.
        let transactions = LockedValue<[(start: Int64, numbers: [Int64])]>([])
        let failures = LockedValue<[String]>([])
        let batches = 40
        onThreads(4) { writer in
            let store = replicas[writer % 2]
            var machine = Machine(model: .iosApp)
            var instance = StoredInstance(id: "w\(writer)", model: "ios-app", createdAt: t0, updatedAt: t0, state: machine.snapshot)
            do {
                let created = try store.write { [instance] (t) throws(StoreError) in (t.startSequence, [try t.insert(instance)]) }
                transactions.withLock { $0.append(created) }
                for batch in 0..<batches {
                    var records: [Record] = []
                    for _ in 0...(batch % 3) { records.append(try machine.apply(.relaunch, at: t0)) }
                    instance.state = machine.snapshot
                    let written = try store.write { [instance, records] (t) throws(StoreError) in
                        let numbers = try records.map { (record) throws(StoreError) in
                            try t.append(record, instanceID: instance.id, encode: encodeRecord).sequence
                        }
                        try t.update(instance)
                        return (t.startSequence, numbers)
                    }
                    transactions.withLock { $0.append(written) }
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let committed = transactions.withLock { $0 }.sorted { $0.start < $1.start }
        // Each transaction starts where the one committed before it ended: dense, in commit order.
        var last: Int64 = 0
        for transaction in committed {
            #expect(transaction.start == last)
            #expect(transaction.numbers == Array((transaction.start + 1)...(transaction.start + Int64(transaction.numbers.count))))
            last = transaction.numbers.last ?? last
        }
        // Per writer: its creation, then batch b's b % 3 + 1 records.
        let recordsPerWriter: Int = (0..<batches).reduce(1) { sum, batch in sum + batch % 3 + 1 }
        let total = Int64(4 * recordsPerWriter)
        #expect(last == total)
        for store in replicas {
            #expect(try store.latestSequence() == total)
            #expect(store.lastSequence == total)
            #expect(try replayAll(store, through: total).map(\.sequence) == Array(1...total))
            for writer in 0..<4 {
                let versions = try store.history(instanceID: "w\(writer)", after: 0, divergentOnly: false, limit: PageLimit(records: 1000)).records.map { try decodeRecord($0).version }
                #expect(versions == Array(1...Int64(versions.count)), "each instance's history has contiguous versions")
            }
        }
        #expect(try replicas[0].loadInstances().map(\.id).sorted() == ["w0", "w1", "w2", "w3"])
    }

    @Test("a transaction starts from the other replica's last commit and reads what it committed")
    func seesOtherReplica() throws {
        let url = try PostgresCluster.shared.makeDatabase()
        let a = try PostgresStore(url: url)
        let b = try PostgresStore(url: url)
        defer { [a, b].forEach { $0.close() } }
        var writer = InstanceWriter(id: "x")
        try writer.create(in: a)
        try writer.relaunch(in: a, times: 2)
        #expect(a.lastSequence == 3)
        #expect(b.lastSequence == 0, "b has not read anything yet")
        try b.write { (t) throws(StoreError) in
            #expect(t.startSequence == 3)
            #expect(try t.instance("x") == writer.instance)
            #expect(try t.instanceCount() == 1)
            try t.insert(InstanceWriter(id: "y").instance)
            #expect(try t.instanceCount() == 2)
        }
        #expect(b.lastSequence == 4)
        #expect(try a.latestSequence() == 4)
        #expect(a.lastSequence == 4, "what a process reads as committed counts as known")
        #expect(try a.instances(["y", "x", "nobody"]).map(\.id).sorted() == ["x", "y"])
        #expect(try a.instances([]).isEmpty)
        let deleted = try a.write { (t) throws(StoreError) in
            let number = try t.delete(writer.instance, at: Date(), encode: change("deleted", writer.instance))
            #expect(try t.instanceCount() == 1)
            return number
        }
        #expect(deleted == 5)
        try b.write { (t) throws(StoreError) in
            #expect(t.startSequence == 5)
            #expect(try t.instanceCount() == 1)
            #expect(try t.instance("x") == nil)
        }
    }

    @Test("the commit observer of one replica wakes when the other commits")
    func observerWakes() throws {
        let url = try PostgresCluster.shared.makeDatabase()
        let a = try PostgresStore(url: url)
        let b = try PostgresStore(url: url)
        defer { [a, b].forEach { $0.close() } }
        let wakes = Wakes()
        b.observeCommitsElsewhere(wakes.handler)
        // Once listening it wakes once (for what it may have missed before).
        #expect(eventually { wakes.value == 1 })
        let writer = InstanceWriter(id: "x")
        try writer.create(in: a)
        #expect(eventually { wakes.value == 2 })
        try a.write { (t) throws(StoreError) in _ = try t.lookUp(IdempotencyKey(key: "k", fingerprint: []), now: Date()) }
        try InstanceWriter(id: "y").create(in: b)  // b's own commits wake it too: harmless
        #expect(eventually { wakes.value == 3 })
        #expect(try b.latestSequence() == 2)
    }

    @Test("two replicas appending the same version of an instance: the second fails for that write alone, and leaves nothing")
    func sameVersionTwice() throws {
        let url = try PostgresCluster.shared.makeDatabase()
        let a = try PostgresStore(url: url)
        let b = try PostgresStore(url: url)
        defer { [a, b].forEach { $0.close() } }
        var first = InstanceWriter(id: "x")
        try first.create(in: a)
        var second = first  // b's copy of the same state
        try first.relaunch(in: a)
        #expect {
            try second.relaunch(in: b)
        } throws: { error in
            let error = try #require(error as? StoreError)
            return error.kind == .rejectedWrite && error.code == .sqlState("23505") && "\(error)".contains("23505")
        }
        #expect(try b.latestSequence() == 2)
        #expect(try b.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 1)

        // A body that goes on after a failed statement commits nothing, and is told why:
        // PostgreSQL aborted the transaction at the failure (and a COMMIT then would roll
        // back without an error). Here the failure comes from writing what waited when a
        // delete needs the database up to date.
        try InstanceWriter(id: "w").create(in: a)
        var renamed = first.instance
        renamed.updatedAt = t0.addingTimeInterval(60)
        #expect {
            try b.write { (t) throws(StoreError) in
                try t.update(renamed)
                try t.insert(InstanceWriter(id: "w").instance)
                do {
                    _ = try t.delete(first.instance, at: Date(), encode: change("deleted", first.instance))
                } catch {
                    // Ignored on purpose: the body returns as if all went well.
                }
            }
        } throws: { error in
            "\(error)".contains("cannot commit after a failed statement") && "\(error)".contains("duplicate key value")
        }
        #expect(try b.instances(["x"]) == [first.instance])
        #expect(try b.latestSequence() == 3)
        try InstanceWriter(id: "y").create(in: b)
        #expect(try b.latestSequence() == 4)
    }

    @Test("PostgreSQL stopped: operations fail saying it is unreachable; started again, the same store works on")
    func outage() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        let url = try cluster.makeDatabase()
        let store = try PostgresStore(url: url)
        defer { store.close() }
        let wakes = Wakes()
        store.observeCommitsElsewhere(wakes.handler)
        #expect(eventually { wakes.value == 1 })
        var writer = InstanceWriter(id: "x")
        try writer.create(in: store)
        #expect(eventually { wakes.value == 2 }, "its own commit")

        try cluster.stop()
        for _ in 0..<3 {
            #expect {
                try writer.relaunch(in: store)
            } throws: { error in
                let error = try #require(error as? StoreError)
                return error.kind == .unavailable && !error.isOutcomeUnknown && error.message.contains("PostgreSQL is unreachable")
            }
        }
        #expect {
            _ = try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10))
        } throws: { error in
            "\(error)".contains("PostgreSQL is unreachable")
        }
        #expect(throws: StoreError.self) { _ = try PostgresStore(url: url) }

        try cluster.restart()
        // Before anything commits again: only the wake after reconnecting counts.
        #expect(eventually { wakes.value == 3 }, "the observer listens again, and wakes for what it may have missed")
        // The backoff lets an attempt through within 2 s.
        #expect(eventually {
            do {
                try writer.relaunch(in: store)
                return true
            } catch {
                return false
            }
        })
        #expect(try store.latestSequence() == 2)
        #expect(try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 1)

        // A restart between two operations: the first after it finds its connection gone,
        // which lost nothing yet, and connects again at once.
        try cluster.stop()
        try cluster.restart()
        try writer.relaunch(in: store)
        #expect(try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 2)
    }
    @Test("PostgreSQL hung (every process SIGSTOPped, its sockets held): a write and a read each fail within their bound; a COMMIT given up is reported as of unknown outcome, and commits once the server goes on; the store works on")
    func hang() throws {
        let cluster = try PostgresCluster.start()
        defer { cluster.remove() }
        let store = try PostgresStore(url: try cluster.makeDatabase(), options: .init(timeout: .seconds(1), readTimeout: .milliseconds(300)))
        defer { store.close() }
        var writer = InstanceWriter(id: "x")
        try writer.create(in: store)
        #expect(try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.isEmpty, "the read connection is up")

        // The server stops after the transaction's reads and before its statements and COMMIT go.
        let record = try writer.machine.apply(.relaunch, at: t0)
        writer.instance.state = writer.machine.snapshot
        let writing = ContinuousClock.now
        let given = #expect(throws: StoreError.self) {
            try store.write { [instance = writer.instance] (t) throws(StoreError) in
                _ = try t.instance("x")
                _ = try t.append(record, instanceID: "x", encode: encodeRecord)
                try t.update(instance)
                do {
                    try cluster.freeze()
                } catch {
                    Issue.record("cannot stop the test PostgreSQL: \(error)")
                }
            }
        }
        #expect(
            given.map { $0.kind == .unavailable && $0.isOutcomeUnknown && $0.message.contains("no answer within 1000 ms") } == true, "\(given?.message ?? "")"
        )
        #expect(ContinuousClock.now - writing < .milliseconds(1500), "the write failed after \(ContinuousClock.now - writing)")
        #expect(cluster.isFrozen)
        // Reads: on the connection that is up (the statement), then on a new one (connecting).
        for attempt in ["statement", "connecting"] {
            let reading = ContinuousClock.now
            let failure = #expect(throws: StoreError.self, "\(attempt)") { _ = try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)) }
            #expect(failure?.message.contains("no answer within 300 ms") == true, "\(attempt): \(failure?.message ?? "")")
            #expect(ContinuousClock.now - reading < .milliseconds(800), "\(attempt): the read failed after \(ContinuousClock.now - reading)")
        }
        // A write that finds no connection: it connects within its bound, and fails there.
        let second = ContinuousClock.now
        #expect(throws: StoreError.self) { try store.write { _ in } }
        #expect(ContinuousClock.now - second < .milliseconds(1500))

        try cluster.thaw()
        // What the server had received before it stopped, COMMIT included, takes effect.
        #expect(eventually {
            do {
                return try store.latestSequence() == 2
            } catch {
                return false
            }
        }, "the COMMIT given up committed once the server went on")
        #expect(try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 1)
        #expect(eventually {
            do {
                try writer.relaunch(in: store)
                return true
            } catch {
                return false
            }
        }, "the store writes again")
        #expect(try store.history(instanceID: "x", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 2)
    }
}
