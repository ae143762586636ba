import Foundation
import LifecycleKit
import LifecycleLog
import LifecycleLocks
import Testing
@testable import LifecycleStore

/// One instance written to a store the way the committer writes it: a record, then its state.
struct InstanceWriter {
    var machine = Machine(model: .iosApp)
    var instance: StoredInstance

    init(id: String) {
        instance = StoredInstance(id: id, model: "ios-app", createdAt: t0, updatedAt: t0, state: machine.snapshot)
    }

    func create(in store: any InstanceStore) throws {
        _ = try store.write { (t) throws(StoreError) in try t.insert(instance) }
    }

    /// Relaunches the instance `times` times, one record each, all in one transaction.
    mutating func relaunch(in store: any InstanceStore, times: Int = 1) throws {
        var records: [Record] = []
        for _ in 0..<times { records.append(try machine.apply(.relaunch, at: t0)) }
        instance.state = machine.snapshot
        try store.write { [instance] (t) throws(StoreError) in
            for record in records { _ = try t.append(record, instanceID: instance.id, encode: encodeRecord) }
            try t.update(instance)
        }
    }
}

/// Collects what a store reports.
final class Reports: Sendable {
    private let events = LockedValue<[ServiceEvent]>([])

    var handler: @Sendable (ServiceEvent) -> Void { { [self] event in events.withLock { $0.append(event) } } }

    func first(_ message: String) -> [String: String]? {
        events.withLock { events in
            events.first { $0.message == message }.map { Dictionary($0.fields.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a }) }
        }
    }
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

@Suite("SQLite store safety")
struct StoreSafetyTests {
    @Test("the WAL stays under its bound while writes come back to back")
    func walBound() throws {
        let folder = Folder()
        let bound = 1 << 20
        let store = try SQLiteStore(directory: folder.path, options: .init(maxWALSize: bound))
        let wal = store.path + "-wal"
        var writer = InstanceWriter(id: "busy")
        try writer.create(in: store)
        // Each commit adds a few 1 KiB pages to the WAL: about 10 MiB in all, ten times the bound.
        var largest = 0
        for _ in 0..<3000 {
            try writer.relaunch(in: store)
            largest = max(largest, fileSize(wal))
        }
        #expect(store.lastSequence == 3001, "the creation record, then 3000 relaunches")
        #expect(largest > 0, "the writes went through the WAL")
        #expect(largest <= bound, "the WAL reached \(largest) bytes; its bound is \(bound)")
        #expect(try store.history(instanceID: "busy", after: 2991, divergentOnly: false, limit: PageLimit(records: 100)).records.count == 10)
        store.close()
        #expect(fileSize(wal) == 0, "a clean stop empties the WAL")
    }

    @Test("a second store on the same folder is refused, naming the process that holds it")
    func folderLock() throws {
        let folder = Folder()
        let first = try SQLiteStore(directory: folder.path)
        #expect {
            _ = try SQLiteStore(directory: folder.path)
        } throws: { error in
            "\(error)".contains("the data folder \(folder.path) is in use by another lifecycled (pid \(getpid())")
        }
        first.close()
        #expect(throws: StoreError.self, "a closed store refuses writes") { try InstanceWriter(id: "late").create(in: first) }
        _ = try SQLiteStore(directory: folder.path)
    }

    @Test("the lock file's lines are printf's fixed widths, and a store's commit leaves its last sequence number there")
    func lockFileLines() throws {
        for value: Int64 in [0, 7, 42, 1_234_567_890, Int64.max, -5, Int64.min] {
            #expect(DataFolderLock.line("sequence=", value, width: 20) == Array(String(format: "sequence=%020lld\n", value).utf8), "\(value)")
            #expect(DataFolderLock.line("pid=", value, width: 10) == Array(String(format: "pid=%010lld\n", value).utf8), "\(value)")
        }
        let folder = Folder()
        let store = try SQLiteStore(directory: folder.path)
        var writer = InstanceWriter(id: "a")
        try writer.create(in: store)
        try writer.relaunch(in: store, times: 2)
        let contents = try String(contentsOfFile: folder.path + "/" + DataFolderLock.fileName, encoding: .utf8)
        #expect(contents == String(format: "pid=%010d\nsequence=%020lld\n", getpid(), try store.latestSequence()))
        store.close()
    }

    @Test("a released lock is free at once, though a copy of its descriptor (a child forked at that moment, until it execs) is open")
    func lockReleasedDespiteCopy() throws {
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let lock = try DataFolderLock(directory: folder.path)
        let copy = dup(lock.descriptor)
        #expect(copy >= 0)
        defer { close(copy) }
        lock.release()
        let again = try DataFolderLock(directory: folder.path)
        again.release()
    }

    @Test("a database that vanished, was emptied or lost commits is refused; accepted, numbering continues")
    func dataLoss() throws {
        let folder = Folder()
        let database = folder.path + "/" + SQLiteStore.fileName
        let copy = folder.path + "/copy.sqlite"
        var writer = InstanceWriter(id: "a")
        do {
            let store = try SQLiteStore(directory: folder.path)
            try writer.create(in: store)
            try writer.relaunch(in: store, times: 3)
            store.close()
        }
        try FileManager.default.copyItem(atPath: database, toPath: copy)
        do {
            let store = try SQLiteStore(directory: folder.path)
            try writer.relaunch(in: store, times: 2)
            store.close()
        }

        func refusal(_ reason: String) {
            #expect {
                _ = try SQLiteStore(directory: folder.path)
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.kind == .dataLoss && error.message.contains(database) && error.message.contains(reason)
            }
        }
        func accepted() throws -> [String: String]? {
            let reports = Reports()
            let store = try SQLiteStore(directory: folder.path, options: .init(acceptDataLoss: true), report: reports.handler)
            #expect(store.lastSequence == 6, "numbers handed out are never handed out again")
            #expect(try store.replay(after: 0, through: 6, filter: RecordFilter(), limit: PageLimit(records: 10)).droppedThrough == 6, "replays are told records up to 6 may be gone")
            store.close()
            // Accepted once: the marker agrees with the database now.
            #expect(try SQLiteStore(directory: folder.path).lastSequence == 6)
            return reports.first("accepted data loss")
        }

        // Behind the marker: an older copy put back.
        try FileManager.default.removeItem(atPath: database)
        try FileManager.default.copyItem(atPath: copy, toPath: database)
        // (Creation is number 1, the relaunches 2 to 6.)
        refusal("the database holds sequence numbers up to 4, but numbers up to 6 were committed")
        let behind = try accepted()
        #expect(behind?["marker"] == "6" && behind?["lastSequence"] == "4", "\(String(describing: behind))")

        // Emptied.
        try Data().write(to: URL(fileURLWithPath: database))
        refusal("the database is empty (0 bytes), but it had committed sequence numbers up to 6")
        #expect(fileSize(database) == 0, "a refused database is left as it was found")
        let emptied = try accepted()
        #expect(emptied?["marker"] == "6" && emptied?["lastSequence"] == "0", "\(String(describing: emptied))")

        // Gone.
        try FileManager.default.removeItem(atPath: database)
        refusal("the database is missing, but a database committed sequence numbers up to 6 here")
        #expect(!FileManager.default.fileExists(atPath: database), "a refused database is not recreated")
        #expect(try accepted()?["marker"] == "6")
    }

    @Test("damaged pages are found by the check once the store is open (or refuse the opening that meets them), even when data loss is accepted")
    func damage() throws {
        let folder = Folder()
        let database = folder.path + "/" + SQLiteStore.fileName
        let reports = Reports()
        do {
            let store = try SQLiteStore(directory: folder.path, report: reports.handler)
            for i in 0..<20 {
                var writer = InstanceWriter(id: "instance-\(i)")
                try writer.create(in: store)
                try writer.relaunch(in: store, times: 100)
            }
            store.close()
        }
        try IntegrityCheck.check(database, report: reports.handler)
        #expect(reports.first("database checked")?["quickCheckMillis"].flatMap { Int($0) } != nil, "the check's time is reported")
        try overwriteMiddle(of: database)
        for accept in [false, true] {
            let found = LockedValue<StoreError?>(nil)
            let reported = DispatchSemaphore(value: 0)
            do {
                let store = try SQLiteStore(directory: folder.path, options: .init(acceptDataLoss: accept))
                store.checkIntegrity { damage in
                    found.withLock { $0 = damage }
                    reported.signal()
                }
                #expect(reported.wait(timeout: .now() + 60) == .success, "the check reports the damage")
                store.close()
            } catch {
                // Opening met the damage: the check ran to give the reason.
                found.withLock { $0 = error }
            }
            let error = found.withLock { $0 }
            #expect(error?.kind == .damaged && error?.message.contains("the database \(database) is damaged (PRAGMA quick_check:") == true, "\(String(describing: error))")
        }
    }

    @Test("closing the store stops a check still running, which then reports no damage")
    func checkStoppedByClose() throws {
        let folder = Folder()
        do {
            let store = try SQLiteStore(directory: folder.path)
            for i in 0..<50 {
                var writer = InstanceWriter(id: "instance-\(i)")
                try writer.create(in: store)
                try writer.relaunch(in: store, times: 200)
            }
            store.close()
        }
        let reports = Reports()
        let damage = LockedValue<[StoreError]>([])
        for _ in 0..<20 {
            let store = try SQLiteStore(directory: folder.path, report: reports.handler)
            store.checkIntegrity { error in damage.withLock { $0.append(error) } }
            store.close()
        }
        #expect(damage.withLock { $0 }.isEmpty, "\(damage.withLock { $0 })")
        #expect(reports.first("database damaged") == nil)
    }

    @Test("a buffered action that does not decode, or NULL where the schema forbids it, fails loudly")
    func unreadableRows() throws {
        let folder = Folder()
        let database = folder.path + "/" + SQLiteStore.fileName
        do {
            let store = try SQLiteStore(directory: folder.path)
            for id in ["a", "b"] { try InstanceWriter(id: id).create(in: store) }
            try store.write { (t) throws(StoreError) in
                try t.remember(IdempotencyKey(key: "k", fingerprint: [1]), .created(id: "a", model: "ios-app", createdAt: t0, json: [1]))
            }
            store.close()
        }
        // Damage SQLite's checks cannot see: a schema without the NOT NULL constraints.
        do {
            let raw = try Database(path: database)
            try raw.execute("PRAGMA writable_schema = ON")
            try raw.execute("UPDATE sqlite_schema SET sql = replace(sql, 'NOT NULL', '') WHERE name IN ('instances', 'idempotency')")
        }
        do {
            let raw = try Database(path: database)
            try raw.execute("UPDATE instances SET buffered_action = '{\"name\": 7}' WHERE id = 'a'")
        }
        let store = try SQLiteStore(directory: folder.path)
        #expect {
            _ = try store.loadInstances()
        } throws: { error in
            "\(error)".contains("the buffered action of instance a does not decode")
        }
        store.close()
        do {
            let raw = try Database(path: database)
            try raw.execute("UPDATE instances SET buffered_action = NULL WHERE id = 'a'")
            try raw.execute("UPDATE instances SET state = NULL WHERE id = 'b'")
            try raw.execute("UPDATE idempotency SET model = NULL")
        }
        let reopened = try SQLiteStore(directory: folder.path)
        #expect {
            _ = try reopened.loadInstances()
        } throws: { error in
            "\(error)".contains("instances.state of b is NULL")
        }
        #expect {
            try reopened.write { (t) throws(StoreError) in _ = try t.lookUp(IdempotencyKey(key: "k", fingerprint: [1]), now: Date()) }
        } throws: { error in
            "\(error)".contains("idempotency.model of key k is NULL")
        }
    }
}

/// Writes 4 KiB of garbage (a fixed pattern) over the pages in the middle of a file.
func overwriteMiddle(of path: String) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    let size = try handle.seekToEnd()
    try handle.seek(toOffset: size / 2 / 4096 * 4096)
    try handle.write(contentsOf: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }))
}
