import CLifecycleSQLite
import Foundation
import Testing
import LifecycleKit
import LifecycleLocks
@testable import LifecycleStore

final class Folder {
    let path = NSTemporaryDirectory() + "lifecycled-store-\(UUID().uuidString.prefix(8))"
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

let t0 = Date(timeIntervalSince1970: 1_800_000_000.123)

func encodeRecord(_ record: Record) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .millisecondsSince1970
    return Array(try! encoder.encode(record))
}

/// A creation or deletion record's JSON, as the service writes it (enough of it for the store).
func change(_ kind: String, _ instance: StoredInstance) -> (Int64) -> [UInt8] {
    { sequence in Array(#"{"sequence":\#(sequence),"instance":"\#(instance.id)","version":\#(instance.state.version),"kind":"\#(kind)"}"#.utf8) }
}

extension StoreTransaction {
    /// Stores a new instance with its creation record.
    @discardableResult
    func insert(_ instance: StoredInstance) throws(StoreError) -> Int64 {
        try insert(instance, encode: change("created", instance))
    }
}

func decodeRecord(_ bytes: [UInt8]) throws -> Record {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .millisecondsSince1970
    return try decoder.decode(Record.self, from: Data(bytes))
}

@Suite("SQLite store")
struct SQLiteStoreTests {
    @Test("a new folder gets the newest schema; an empty file is migrated once its loss is accepted")
    func migrations() throws {
        let folder = Folder()
        let store = try SQLiteStore(directory: folder.path)
        #expect(try store.schemaVersion() == SQLiteStore.migrations.count)
        #expect(try store.loadInstances().isEmpty)
        #expect(store.lastSequence == 0)

        // Nothing says an empty file was new: it may be a database someone emptied.
        let empty = Folder()
        try FileManager.default.createDirectory(atPath: empty.path, withIntermediateDirectories: true)
        try Data().write(to: URL(fileURLWithPath: empty.path + "/" + SQLiteStore.fileName))
        #expect(throws: StoreError.self) { try SQLiteStore(directory: empty.path) }
        #expect(try SQLiteStore(directory: empty.path, options: .init(acceptDataLoss: true)).schemaVersion() == SQLiteStore.migrations.count)
    }

    @Test("a database from a newer lifecycled is refused")
    func newerSchema() throws {
        let folder = Folder()
        _ = try SQLiteStore(directory: folder.path)
        let database = try Database(path: folder.path + "/" + SQLiteStore.fileName)
        try database.execute("PRAGMA user_version = 99")
        #expect {
            _ = try SQLiteStore(directory: folder.path)
        } throws: { error in
            "\(error)".contains("schema version 99 is newer")
        }
    }

    @Test("instances and records round-trip through a reopen, every field", arguments: Backend.allCases)
    func roundTrip(backend: Backend) throws {
        let place = try StorePlace(backend)
        var machine = Machine(model: .iosApp)
        var instance = StoredInstance(id: "app", model: "ios-app", createdAt: t0.roundedToMilliseconds, updatedAt: t0.roundedToMilliseconds, state: machine.snapshot)
        var written: [Record] = []
        do {
            let store = try place.open()
            defer { store.close() }
            _ = try store.write { (t) throws(StoreError) in try t.insert(instance) }
            let inputs: [Input] = [
                .event("didFinishLaunching"), .event("willConnectToWindow", ["window": .string("main")]),
                .action("openURL", ["url": .string("https://duckduckgo.com")]), .event("willEnterForeground"),
                .relaunch, .event("didFinishLaunching"),
            ]
            for (i, input) in inputs.enumerated() {
                let record = try machine.apply(input, at: t0.addingTimeInterval(Double(i)).roundedToMilliseconds)
                instance.state = machine.snapshot
                instance.updatedAt = record.time
                let encoded = try store.write { (t) throws(StoreError) in
                    let encoded = try t.append(record, instanceID: "app", encode: encodeRecord)
                    try t.update(instance)
                    return encoded
                }
                #expect(encoded.sequence == Int64(i + 2), "the creation record is number 1")
                written.append(try decodeRecord(encoded.recordJSON))
            }
        }
        let reopened = try place.open()
        defer { reopened.close() }
        let loaded = try reopened.loadInstances()
        #expect(loaded == [instance])
        #expect(loaded.first?.state.bufferedAction == nil && loaded.first?.state.launchCount == 2)
        #expect(loaded.first?.state.counters.incompleteLaunches == 1)
        #expect(reopened.lastSequence == 7)
        let history = try reopened.history(instanceID: "app", after: 0, divergentOnly: false, limit: PageLimit(records: 100))
        #expect(try history.records.map(decodeRecord) == written, "history holds the applied inputs, not the creation")
        #expect(written.allSatisfy { $0.instance == "app" })
        #expect(Machine(model: .iosApp, restoring: loaded[0].state)?.snapshot == machine.snapshot)
    }

    @Test("instances load with their own labels: shared, none, and with escapes", arguments: Backend.allCases)
    func labelsLoad(backend: Backend) throws {
        let place = try StorePlace(backend)
        let labelSets: [[String: String]] = [
            ["run": "r1"], ["run": "r1"], [:], ["run": "r2", "app": "1.0"], ["run": "r1"], ["quote\"d": "line\nbreak \u{e9}"], [:], ["run": "r2", "app": "1.0"],
        ]
        let instances = labelSets.enumerated().map { i, labels in
            StoredInstance(id: "i\(i)", model: "ios-app", createdAt: t0.roundedToMilliseconds, updatedAt: t0.roundedToMilliseconds,
                           state: InstanceState(state: "initializing"), labels: labels)
        }
        do {
            let store = try place.open()
            defer { store.close() }
            for instance in instances { _ = try store.write { (t) throws(StoreError) in try t.insert(instance) } }
        }
        let reopened = try place.open()
        defer { reopened.close() }
        #expect(try reopened.loadInstances().sorted { $0.id < $1.id }.map(\.labels) == labelSets, "each instance its own labels, none mixed up")
    }

    @Test("a load split over two threads gives every instance once, in id order, as the load on one does", arguments: [2, 3, 8, 101])
    func loadInHalves(count: Int) throws {
        let folder = Folder()
        let store = try SQLiteStore(directory: folder.path)
        defer { store.close() }
        // Ids whose order as text is not their order as numbers, written out of order, and (for
        // odd counts) one that sorts before them all.
        let ids = (0..<count).map { "i\($0)" }.shuffled() + (count.isMultiple(of: 2) ? [] : ["a"])
        _ = try store.write { (t) throws(StoreError) in
            for id in ids {
                try t.insert(StoredInstance(id: id, model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"), labels: ["n": id]))
            }
        }
        let whole = try store.loadInstances(inHalvesFrom: .max)
        let halves = try store.loadInstances(inHalvesFrom: 2)
        #expect(whole.map(\.id) == ids.sorted())
        #expect(halves.map(\.id) == whole.map(\.id))
        #expect(halves.map(\.labels) == whole.map(\.labels))
    }

    @Test("a WAL index that cannot be grown, as on a full disk, is said to be one: disk I/O error alone reads as failing hardware")
    func walIndexNotGrownIsAFullDisk() {
        let error = SQLiteError(code: 4874, message: "disk I/O error")
        #expect(error.kind == .diskFull)
        let said = StoreError(error, doing: "cannot open the database d/lifecycled.sqlite")
        #expect(said.message == "cannot open the database d/lifecycled.sqlite: disk I/O error: the WAL index (-shm) could not be grown; is the disk full? (SQLite code 4874)")
        #expect(SQLiteError(code: SQLITE_IOERR, message: "disk I/O error").kind == .other)
    }

    /// Counts its instances alive, so a test sees that a failed fill freed what it placed.
    final class Counted: Sendable {
        static let alive = LockedCount()
        let value: Int
        init(_ value: Int) { self.value = value; Self.alive.add(1) }
        deinit { Self.alive.add(-1) }
    }

    final class LockedCount: Sendable {
        private let count = LockedValue(0)
        func add(_ delta: Int) { count.withLock { $0 += delta } }
        var value: Int { count.withLock { $0 } }
    }

    @Test("an array made by two threads holds the first share in order and the second from its end; a share short or failed fails it and frees what was placed")
    func arrayInTwoParts() throws {
        let made = try SQLiteStore.array(count: 7, split: 3) { (part, place) throws(StoreError) in
            for value in part == 0 ? Array(0..<3) : (3..<7).reversed() { place(Counted(value)) }
        }
        #expect(made.map(\.value) == Array(0..<7))
        #expect(Counted.alive.value == 7)
        for short in 0...1 {
            #expect(throws: StoreError.self) {
                _ = try SQLiteStore.array(count: 7, split: 3) { (part, place) throws(StoreError) in
                    for value in part == 0 ? 0..<3 : 3..<7 where !(part == short && value == 2 + 2 * part) { place(Counted(value)) }
                }
            }
            #expect(throws: StoreError.self) {
                _ = try SQLiteStore.array(count: 7, split: 3) { (part, place) throws(StoreError) in
                    place(Counted(part))
                    if part == short { throw StoreError("cannot load instances") }
                    for value in part == 0 ? 1..<3 : 4..<7 { place(Counted(value)) }
                }
            }
        }
        #expect(Counted.alive.value == 7)
    }

    @Test("idempotency keys replay, conflict on a different request, last while their instance does, and expire after its deletion", arguments: Backend.allCases)
    func idempotencyKeys(backend: Backend) throws {
        let store = try StorePlace(backend).open(tombstoneLifetime: 60)
        defer { store.close() }
        let instance = StoredInstance(id: "a", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        let key = IdempotencyKey(key: "k1", fingerprint: Array("POST /v1/instances\n{}".utf8))
        let response = RememberedWrite.created(id: "a", model: "ios-app", createdAt: t0, json: Array("{}".utf8))
        func lookUp(_ key: IdempotencyKey, _ now: Date) throws -> IdempotencyLookup {
            try store.write { (t) throws(StoreError) in try t.lookUp(key, now: now) }
        }
        #expect(try lookUp(key, Date()) == .unused)
        try store.write { (t) throws(StoreError) in
            try t.insert(instance)
            try t.remember(key, response)
            #expect(try t.lookUp(key, now: Date()) == .replay(response), "a transaction sees its own keys")
        }
        #expect(try lookUp(key, Date()) == .replay(response))
        #expect(try lookUp(IdempotencyKey(key: "k1", fingerprint: [1]), Date()) == .conflict)
        #expect(try lookUp(key, Date().addingTimeInterval(400 * 24 * 3600)) == .replay(response), "kept while the instance lives, however old")

        let deletedAt = Date()
        _ = try store.write { (t) throws(StoreError) in try t.delete(instance, at: deletedAt) { _ in Array("{}".utf8) } }
        #expect(try lookUp(key, deletedAt.addingTimeInterval(59)) == .replay(response), "kept as long as the deletion record")
        #expect(try lookUp(key, deletedAt.addingTimeInterval(61)) == .unused)
    }

    @Test("a version-2 database is migrated: each key keeps what its write did, taken from the response kept for it")
    func migrateVersion2Keys() throws {
        // The responses version 2 kept: 201 with the created instance, 200 with the record,
        // 409 with a problem carrying the record (escapes and non-ASCII kept as written).
        let created = #"{"id":"a","model":"ios-app","state":"initializing","version":0,"createdAt":"2027-01-15T08:00:00.123Z"}"#
        let applied = #"{"sequence":2,"instance":"a","version":1,"kind":"event","event":"didFinishLaunching","from":"initializing","to":"launching","outcome":"transitioned","hooks":["Launching.init"],"time":"2027-01-15T08:00:00.124Z"}"#
        let unexpected = #"{"sequence":3,"instance":"a","version":2,"kind":"event","event":"didBecomeActive","parameters":{"note":"é \"x\" \\ \u0001","ratio":0.25},"from":"launching","to":"launching","outcome":"unexpected","hooks":[],"time":"2027-01-15T08:00:00.125Z"}"#
        let problem = #"{"type":"https://lifecycled.dev/problems/unexpected-event","title":"Unexpected Event","status":409,"detail":"\"didBecomeActive\" is not expected in state \"launching\"; it was recorded and counted","record":"#
            + unexpected + "}"
        func version2(_ rows: [(key: String, status: Int64, contentType: String, body: String)]) throws -> Folder {
            let folder = Folder()
            try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
            let database = try Database(path: folder.path + "/" + SQLiteStore.fileName)
            try database.execute("PRAGMA journal_mode = WAL")
            try database.transaction { () throws(SQLiteError) in
                for statement in SQLiteStore.migrations.prefix(2).flatMap(\.statements) { try database.execute(statement) }
                try database.execute("PRAGMA user_version = 2")
                let insert = try database.prepare("INSERT INTO idempotency (key, fingerprint, status, content_type, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                for row in rows {
                    try insert.run([
                        .text(row.key), .bytes(Array(row.key.utf8)), .integer(row.status), .text(row.contentType), .bytes(Array(row.body.utf8)),
                        .integer(Codec.milliseconds(Date())),
                    ])
                }
            }
            return folder
        }
        let folder = try version2([
            ("create", 201, "application/json", created), ("event", 200, "application/json", applied),
            ("odd", 409, "application/problem+json", problem),
        ])
        let store = try SQLiteStore(directory: folder.path)
        #expect(try store.schemaVersion() == SQLiteStore.migrations.count)
        func lookUp(_ key: String) throws -> IdempotencyLookup {
            try store.write { (t) throws(StoreError) in try t.lookUp(IdempotencyKey(key: key, fingerprint: Array(key.utf8)), now: Date()) }
        }
        #expect(try lookUp("create") == .replay(.created(id: "a", model: "ios-app", createdAt: t0, json: Array(created.utf8))))
        #expect(try lookUp("event") == .replay(.applied(recordJSON: Array(applied.utf8), isUnexpected: false)))
        #expect(try lookUp("odd") == .replay(.applied(recordJSON: Array(unexpected.utf8), isUnexpected: true)))
        #expect(try store.write { (t) throws(StoreError) in try t.lookUp(IdempotencyKey(key: "odd", fingerprint: [1]), now: Date()) } == .conflict)
        #expect(try store.integrityCheck() == "ok")

        // A response version 2 never kept says nothing of what its write did: the upgrade stops on it.
        let unknown = try version2([("other", 500, "application/problem+json", "{}")])
        #expect {
            _ = try SQLiteStore(directory: unknown.path)
        } throws: { error in
            "\(error)".contains("NOT NULL constraint failed: idempotency.result")
        }
    }

    @Test("retention drops the oldest records of an instance as new ones arrive", arguments: Backend.allCases)
    func retention(backend: Backend) throws {
        let store = try StorePlace(backend).open(historyLimit: 3)
        defer { store.close() }
        var machine = Machine(model: .androidActivity)
        var instance = StoredInstance(id: "d", model: "android-activity", createdAt: t0, updatedAt: t0, state: machine.snapshot)
        _ = try store.write { (t) throws(StoreError) in try t.insert(instance) }
        // All six in one transaction, as the committer batches them.
        try store.write { (t) throws(StoreError) in
            for event in ["onCreate", "onStart", "onResume", "onPause", "onStop", "onDestroy"] {
                let record = try! machine.apply(event: event, at: t0)
                instance.state = machine.snapshot
                _ = try t.append(record, instanceID: "d", encode: encodeRecord)
            }
            try t.update(instance)
        }
        let page = try store.history(instanceID: "d", after: 0, divergentOnly: false, limit: PageLimit(records: 10))
        #expect(try page.records.map { try decodeRecord($0).version } == [4, 5, 6])
        #expect(page.oldestRetainedVersion == 4 && !page.hasMore)
        // The creation took sequence number 1, the six records 2 to 7: version 4 is number 5.
        #expect(page.oldestRetainedSequence == 5)
        let first = try store.history(instanceID: "d", after: 0, divergentOnly: false, limit: PageLimit(records: 2))
        #expect(first.hasMore && first.lastSequence == 6)
        try store.write { (t) throws(StoreError) in _ = try t.delete(instance, at: t0, encode: change("deleted", instance)) }
        #expect(try store.history(instanceID: "d", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.isEmpty)
        #expect(try store.loadInstances().isEmpty)
    }

    @Test("retention deletes in groups across transactions, never the records of an instance made again", arguments: Backend.allCases)
    func retentionBacklog(backend: Backend) throws {
        // A limit of 80 lets 10 records past it wait (an eighth).
        let store = try StorePlace(backend).open(historyLimit: 80)
        defer { store.close() }
        func versions(_ id: String) throws -> [Int64] {
            let page = try store.history(instanceID: id, after: 0, divergentOnly: false, limit: PageLimit(records: 200))
            return try page.records.map { try decodeRecord($0).version }
        }
        func replaceWithNew(_ writer: InstanceWriter) throws -> InstanceWriter {
            _ = try store.write { [instance = writer.instance] (t) throws(StoreError) in try t.delete(instance, at: t0, encode: change("deleted", instance)) }
            let again = InstanceWriter(id: writer.instance.id)
            try again.create(in: store)
            return again
        }

        var a = InstanceWriter(id: "a")
        try a.create(in: store)
        try a.relaunch(in: store, times: 85)
        for _ in 0..<4 { try a.relaunch(in: store) }
        #expect(try versions("a") == Array(1...89), "9 records past the limit wait, over five transactions")
        // Made again, "a" passes the limit by one: 10 wait, and the transaction deletes them. The newer drop is the one
        // that counts (its version 1); the older one's version 9 would take the new "a"'s 2 to 9 along.
        a = try replaceWithNew(a)
        try a.relaunch(in: store, times: 81)
        #expect(try versions("a") == Array(2...81))

        // A drop waits for "c" when it is deleted; made again, it has too few records for one of its own.
        var c = InstanceWriter(id: "c")
        try c.create(in: store)
        try c.relaunch(in: store, times: 85)
        c = try replaceWithNew(c)
        try c.relaunch(in: store, times: 3)
        // "b" fills the backlog: the drop of the first "c" deletes only records numbered below it.
        var b = InstanceWriter(id: "b")
        try b.create(in: store)
        try b.relaunch(in: store, times: 85)
        #expect(try versions("b") == Array(6...85))
        #expect(try versions("c") == [1, 2, 3], "the later c keeps its records")
        // The backlog starts again: one past the limit waits.
        try b.relaunch(in: store)
        #expect(try versions("b") == Array(6...86))
        let page = try store.history(instanceID: "b", after: 0, divergentOnly: false, limit: PageLimit(records: 1))
        #expect(page.oldestRetainedVersion == 6 && page.hasMore)
    }

    @Test("records waiting to be dropped when the store closes stay until their instance's next drop takes them along", arguments: Backend.allCases)
    func retentionBacklogAcrossARestart(backend: Backend) throws {
        let place = try StorePlace(backend)
        var a = InstanceWriter(id: "a")
        do {
            let store = try place.open(historyLimit: 80)
            defer { store.close() }
            try a.create(in: store)
            try a.relaunch(in: store, times: 85)
        }
        let store = try place.open(historyLimit: 80)
        defer { store.close() }
        func versions() throws -> [Int64] {
            try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 200)).records.map { try decodeRecord($0).version }
        }
        #expect(try versions() == Array(1...85), "the backlog was in memory: nothing was dropped")
        try a.relaunch(in: store, times: 9)
        #expect(try versions() == Array(1...94))
        // The tenth record past the limit since the restart fills the new backlog; its drop covers versions 1 to 15.
        try a.relaunch(in: store)
        #expect(try versions() == Array(16...95))
    }
}

@Suite("SQLite store transactions")
struct TransactionTests {
    @Test("one transaction creates, changes, deletes and creates again an instance, and reads its own writes throughout", arguments: Backend.allCases)
    func ownWrites(backend: Backend) throws {
        let store = try StorePlace(backend).open(historyLimit: 2)
        defer { store.close() }
        var first = InstanceWriter(id: "a")
        var second = InstanceWriter(id: "a")
        second.instance.createdAt = t0.addingTimeInterval(1)
        let key = IdempotencyKey(key: "k", fingerprint: [1, 2])
        let remembered = RememberedWrite.created(id: "a", model: "ios-app", createdAt: t0, json: Array("{}".utf8))
        let records = (0..<3).map { _ in try! first.machine.apply(.relaunch, at: t0) }
        first.instance.state = first.machine.snapshot
        let again = try second.machine.apply(.relaunch, at: t0)
        second.instance.state = second.machine.snapshot
        try store.write { [first, second] (t) throws(StoreError) in
            #expect(try t.insert(first.instance, encode: change("created", first.instance)) == 1)
            #expect(try t.instance("a") == first.instance)
            for record in records { _ = try t.append(record, instanceID: "a", encode: encodeRecord) }
            try t.update(first.instance)
            #expect(try t.instance("a") == first.instance)
            #expect(try t.instanceCount() == 1)
            try t.remember(key, remembered)
            #expect(try t.lookUp(key, now: Date()) == .replay(remembered))
            #expect(try t.delete(first.instance, at: Date(), encode: change("deleted", first.instance)) == 5)
            #expect(try t.instance("a") == nil)
            #expect(try t.instanceCount() == 0)
            #expect(try t.insert(second.instance, encode: change("created", second.instance)) == 6)
            #expect(try t.append(again, instanceID: "a", encode: encodeRecord).sequence == 7)
            try t.update(second.instance)
            #expect(try t.instance("a") == second.instance)
            #expect(try t.instanceCount() == 1)
        }
        #expect(store.lastSequence == 7)
        #expect(try store.loadInstances() == [second.instance])
        #expect(try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.map { try decodeRecord($0).sequence } == [7])
        let page = try store.replay(after: 0, through: 7, filter: RecordFilter(), limit: PageLimit(records: 10))
        #expect(page.records.map(\.sequence) == [5, 6, 7])
        #expect(page.records.map(\.kind) == [.deleted, .created, .relaunch])
        // The delete took every record of the first "a". The history limit's drop of its version 1 (written at the
        // commit) found none left, and the later "a"'s version 1 (number 7) is not below the record that decided it.
        #expect(page.droppedThrough == 0 && page.oldestKept == 5)
        #expect(try store.write { (t) throws(StoreError) in try t.lookUp(key, now: Date()) } == .replay(remembered))
    }

    @Test("rows beyond one multi-row INSERT, and keys read ahead in runs, round-trip", arguments: Backend.allCases)
    func manyRows(backend: Backend) throws {
        let store = try StorePlace(backend).open()
        defer { store.close() }
        // 300 of each: no power of two, more than any one statement writes (32 instances, 64 keys, 128 records).
        let instances = (0..<300).map { StoredInstance(id: "i\($0)", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "launching", version: 1)) }
        let record = Record(version: 1, kind: .event, name: "didFinishLaunching", from: "initializing", to: "launching", outcome: .transitioned, time: t0)
        let keys = instances.map { IdempotencyKey(key: "k-\($0.id)", fingerprint: Array($0.id.utf8)) }
        func remembered(_ index: Int) -> RememberedWrite { .applied(recordJSON: Array("{\"i\":\(index)}".utf8), isUnexpected: false, instance: KeyedInstance(id: "i\(index)", createdAt: t0)) }
        try store.write { (t) throws(StoreError) in
            for (index, instance) in instances.enumerated() {
                try t.insert(instance)
                _ = try t.append(record, instanceID: instance.id, encode: encodeRecord)
                try t.remember(keys[index], remembered(index))
            }
        }
        #expect(store.lastSequence == 600)
        #expect(try store.loadInstances().sorted { $0.id < $1.id } == instances.sorted { $0.id < $1.id })
        let page = try store.replay(after: 0, through: 600, filter: RecordFilter(), limit: PageLimit(records: 1000))
        #expect(page.records.map(\.sequence) == Array(1...600))
        let unknown = (0..<5).map { IdempotencyKey(key: "unknown-\($0)", fingerprint: [1]) }
        let found = try store.write { (t) throws(StoreError) in
            try t.readAhead(keys + unknown)
            return try (keys + unknown).map { (key) throws(StoreError) in try t.lookUp(key, now: Date()) }
        }
        #expect(found == instances.indices.map { .replay(remembered($0)) } + unknown.map { _ in .unused })
    }

    @Test("a key presumed new that the store holds fails its transaction, which leaves nothing; one the transaction wrote is found", arguments: Backend.allCases)
    func presumedKeys(backend: Backend) throws {
        let store = try StorePlace(backend).open()
        defer { store.close() }
        let a = StoredInstance(id: "a", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        let b = StoredInstance(id: "b", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        let c = StoredInstance(id: "c", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        func made(_ instance: StoredInstance) -> RememberedWrite { .created(id: instance.id, model: "ios-app", createdAt: t0, json: Array(instance.id.utf8)) }
        let key = { (name: String) in IdempotencyKey(key: name, fingerprint: Array(name.utf8)) }
        try store.write { (t) throws(StoreError) in
            try t.insert(a)
            try t.remember(key("ka"), made(a))
        }
        let error = #expect(throws: StoreError.self) {
            try store.write { (t) throws(StoreError) in
                t.presumeKeysNew()
                #expect(try t.lookUp(key("ka"), now: Date()) == .unused, "presumed new: not read")
                try t.insert(b)
                try t.remember(key("kb"), made(b))
                #expect(try t.lookUp(key("kb"), now: Date()) == .replay(made(b)), "a key the transaction wrote is found")
                try t.remember(key("ka"), made(b))
            }
        }
        #expect(error?.kind == .rejectedWrite)
        // A write refused under a key presumed new remembers nothing; the key is read before the commit all the same.
        let refused = #expect(throws: StoreError.self) {
            try store.write { (t) throws(StoreError) in
                t.presumeKeysNew()
                #expect(try t.lookUp(key("ka"), now: Date()) == .unused)
                try t.insert(b)
            }
        }
        #expect(refused?.kind == .rejectedWrite)
        #expect(store.lastSequence == 1)
        #expect(try store.loadInstances() == [a])
        #expect(try store.write { (t) throws(StoreError) in try [t.lookUp(key("ka"), now: Date()), t.lookUp(key("kb"), now: Date())] } == [.replay(made(a)), .unused])

        // A delete in the middle writes what waits, keys presumed new among it; the rest go at the commit.
        try store.write { (t) throws(StoreError) in
            t.presumeKeysNew()
            try t.insert(b)
            try t.remember(key("kb"), made(b))
            _ = try t.delete(a, at: Date(), encode: change("deleted", a))
            try t.insert(c)
            try t.remember(key("kc"), made(c))
        }
        #expect(try store.loadInstances().map(\.id).sorted() == ["b", "c"])
        let found = try store.write { (t) throws(StoreError) in try ["ka", "kb", "kc"].map { (name) throws(StoreError) in try t.lookUp(key(name), now: Date()) } }
        #expect(found == [.replay(made(a)), .replay(made(b)), .replay(made(c))], "a's key released with it, kept a while")
    }

    @Test("a transaction that fails leaves nothing behind, not even sequence numbers", arguments: Backend.allCases)
    func rollback(backend: Backend) throws {
        let store = try StorePlace(backend).open()
        defer { store.close() }
        let instance = StoredInstance(id: "a", model: "ios-app", createdAt: t0, updatedAt: t0, state: InstanceState(state: "initializing"))
        let record = Record(version: 1, kind: .event, name: "didFinishLaunching", from: "initializing", to: "launching", outcome: .transitioned, time: t0)
        #expect(throws: StoreError.self) {
            try store.write { (t) throws(StoreError) in
                try t.insert(instance)
                _ = try t.append(record, instanceID: "a", encode: encodeRecord)
                try t.insert(instance)  // the same id again: a constraint failure
            }
        }
        #expect(try store.loadInstances().isEmpty)
        #expect(store.lastSequence == 0)
        #expect(try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.isEmpty)
        let numbered = try store.write { (t) throws(StoreError) in
            try t.insert(instance)
            return try t.append(record, instanceID: "a", encode: encodeRecord).sequence
        }
        #expect(numbered == 2)
    }
}
