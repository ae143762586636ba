import Foundation
import Testing
import LifecycleKit
@testable import LifecycleStore

/// Every page of a replay, followed to `through`.
func replayAll(_ store: any InstanceStore, after: Int64 = 0, through: Int64, filter: RecordFilter = RecordFilter(), limit: Int = 100) throws -> [ReplayedRecord] {
    var records: [ReplayedRecord] = []
    var position = after
    while position < through {
        let page = try store.replay(after: position, through: through, filter: filter, limit: PageLimit(records: limit))
        #expect(page.coveredThrough > position, "each page moves on")
        records += page.records
        position = page.coveredThrough
    }
    return records
}

@Suite("SQLite store replay")
struct ReplayTests {
    @Test("replay pages every instance's records and deletion records in order, filtered; retention and expiry raise the floor", arguments: Backend.allCases)
    func replay(backend: Backend) throws {
        let place = try StorePlace(backend)
        var a = InstanceWriter(id: "a")
        var b = Machine(model: .androidActivity)
        let bInstance = StoredInstance(id: "b", model: "android-activity", createdAt: t0, updatedAt: t0, state: b.snapshot)
        do {
            let store = try place.open(historyLimit: 3)
            try a.create(in: store)                                                    // 1
            #expect(try store.write { (t) throws(StoreError) in try t.insert(bInstance) } == 2)
            // Four relaunches of a (3-6): beyond 3 records, its creation (version 0) and version 1 go.
            try a.relaunch(in: store, times: 4)
            try store.write { (t) throws(StoreError) in                                 // 7, 8
                for event in ["onCreate", "onStart"] { _ = try t.append(try! b.apply(event: event, at: t0), instanceID: "b", encode: encodeRecord) }
            }
            // Deleted a second ago: expired at once for a lifetime of 0.
            let deleted = try store.write { (t) throws(StoreError) in
                try t.delete(bInstance, at: Date().addingTimeInterval(-1), encode: change("deleted", bInstance))
            }
            #expect(deleted == 9)

            let all = try store.replay(after: 0, through: 9, filter: RecordFilter(), limit: PageLimit(records: 100))
            #expect(all.records.map(\.sequence) == [4, 5, 6, 9], "b's records went with it; its deletion stays")
            #expect(all.records.map(\.kind) == [.relaunch, .relaunch, .relaunch, .deleted])
            #expect(all.droppedThrough == 3 && all.oldestKept == 4 && all.coveredThrough == 9)
            #expect(try decodeRecord(all.records[0].json).instance == "a", "the store names the instance")
            #expect(String(decoding: all.records[3].json, as: UTF8.self) == #"{"sequence":9,"instance":"b","version":0,"kind":"deleted"}"#)

            #expect(try replayAll(store, through: 9, limit: 2).map(\.sequence) == [4, 5, 6, 9])
            let first = try store.replay(after: 0, through: 9, filter: RecordFilter(), limit: PageLimit(records: 2))
            #expect(first.records.map(\.sequence) == [4, 5] && first.coveredThrough == 5)
            #expect(try store.replay(after: 0, through: 5, filter: RecordFilter(), limit: PageLimit(records: 100)).records.map(\.sequence) == [4, 5])
            #expect(try replayAll(store, through: 9, filter: RecordFilter(model: "android-activity")).map(\.sequence) == [9])
            #expect(try replayAll(store, through: 9, filter: RecordFilter(model: "ios-app")).map(\.sequence) == [4, 5, 6])
            #expect(try replayAll(store, through: 9, filter: RecordFilter(instances: ["b", "nobody"])).map(\.sequence) == [9])
            #expect(try replayAll(store, through: 9, filter: RecordFilter(instances: [])).isEmpty)
            #expect(try replayAll(store, through: 9, filter: RecordFilter(outcomes: [.stayed])).map(\.sequence) == [4, 5, 6], "a relaunch from initializing stays")
            #expect(try replayAll(store, through: 9, filter: RecordFilter(outcomes: [.transitioned, .unexpected])).isEmpty, "deletions have no outcome")
            store.close()
        }
        // Expired, the deletion record goes, and the floor follows; its number is still never reused.
        let store = try place.open(historyLimit: 3, tombstoneLifetime: 0)
        defer { store.close() }
        let page = try store.replay(after: 0, through: 9, filter: RecordFilter(), limit: PageLimit(records: 100))
        #expect(page.records.map(\.sequence) == [4, 5, 6])
        #expect(page.droppedThrough == 9 && page.oldestKept == 4)
        #expect(store.lastSequence == 9)
    }

    @Test("a version-1 database is migrated: records name their instance and get their kind and outcome")
    func migrateVersion1() throws {
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let bodies: [(seq: Int, instance: String, version: Int, body: String)] = [
            (1, "a", 1, #"{"sequence":1,"version":1,"kind":"event","event":"didFinishLaunching","from":"initializing","to":"launching","outcome":"transitioned","hooks":["Launching.init"],"row":"r2","time":"2027-01-15T08:00:00.123Z"}"#),
            (2, "b", 1, #"{"sequence":2,"version":1,"kind":"action","action":"openURL","parameters":{"url":"https://duckduckgo.com"},"from":"initializing","to":"initializing","outcome":"stayed","hooks":[],"disposition":"buffered","time":"2027-01-15T08:00:00.124Z"}"#),
            (3, "a", 2, #"{"sequence":3,"version":2,"kind":"relaunch","from":"launching","to":"initializing","outcome":"transitioned","hooks":[],"incompleteLaunch":{"step":"launched","sceneConnected":false},"time":"2027-01-15T08:00:00.125Z"}"#),
            (4, "a", 3, #"{"sequence":4,"version":3,"kind":"event","event":"didBecomeActive","from":"initializing","to":"initializing","outcome":"unexpected","hooks":[],"time":"2027-01-15T08:00:00.126Z"}"#),
        ]
        do {
            let database = try Database(path: folder.path + "/" + SQLiteStore.fileName)
            try database.execute("PRAGMA journal_mode = WAL")
            try database.transaction { () throws(SQLiteError) in
                for statement in SQLiteStore.migrations[0].statements { try database.execute(statement) }
                try database.execute("PRAGMA user_version = 1")
                for (id, model, version) in [("a", "ios-app", 3), ("b", "ios-app", 1)] {
                    try database.execute("""
                        INSERT INTO instances VALUES ('\(id)', '\(model)', 'initializing', \(version), 1, NULL, NULL, NULL, 0, 0, 0, 0, 1800000000000, 1800000000000)
                        """)
                }
                let insert = try database.prepare("INSERT INTO records (seq, instance, version, body) VALUES (?1, ?2, ?3, ?4)")
                for row in bodies {
                    try insert.run([.integer(Int64(row.seq)), .text(row.instance), .integer(Int64(row.version)), .bytes(Array(row.body.utf8))])
                }
            }
        }

        let store = try SQLiteStore(directory: folder.path)
        #expect(try store.schemaVersion() == SQLiteStore.migrations.count)
        #expect(store.lastSequence == 4)
        #expect(try store.loadInstances().map(\.id).sorted() == ["a", "b"])
        // Each body gains its instance after its sequence number, and nothing else changes.
        let expected = bodies.map { row in
            row.body.replacingOccurrences(of: #"{"sequence":\#(row.seq),"#, with: #"{"sequence":\#(row.seq),"instance":"\#(row.instance)","#)
        }
        let history = try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 10))
        #expect(history.records.map { String(decoding: $0, as: UTF8.self) } == [expected[0], expected[2], expected[3]])
        #expect(history.oldestRetainedVersion == 1)
        let replayed = try store.replay(after: 0, through: 4, filter: RecordFilter(), limit: PageLimit(records: 10))
        #expect(replayed.records.map { String(decoding: $0.json, as: UTF8.self) } == expected)
        #expect(replayed.records.map(\.kind) == [.event, .action, .relaunch, .event])
        #expect(replayed.droppedThrough == 0 && replayed.oldestKept == 1)
        #expect(try store.replay(after: 0, through: 4, filter: RecordFilter(outcomes: [.unexpected]), limit: PageLimit(records: 10)).records.map(\.sequence) == [4])
        #expect(try store.replay(after: 0, through: 4, filter: RecordFilter(outcomes: [.stayed]), limit: PageLimit(records: 10)).records.map(\.sequence) == [2])
        #expect(try store.integrityCheck() == "ok")

        // New records continue the numbering, in the new shape.
        let relaunch = Record(version: 2, kind: .relaunch, name: "relaunch", from: "initializing", to: "initializing", outcome: .stayed, time: t0)
        let written = try store.write { (t) throws(StoreError) in try t.append(relaunch, instanceID: "b", encode: encodeRecord) }
        #expect(written.sequence == 5)
        #expect(try store.replay(after: 4, through: 5, filter: RecordFilter(), limit: PageLimit(records: 10)).records.map(\.kind) == [.relaunch])
    }

    @Test("history and replay pages stop at their byte bound (a bigger record goes alone) and say where to continue: every record once, in order", arguments: Backend.allCases)
    func pagesBoundedInBytes(backend: Backend) throws {
        let bound = 10_000
        // Pages fill exactly (4000 + 6000), end before a record that does not fit, hold a record
        // bigger than the bound alone and still say more follow after it.
        let sizes = [4000, 6000, 1000, 12_000, 3000, 7000, 5000, 10_000, 10_000, 400, 400, 400]
        let store = try StorePlace(backend).open()
        defer { store.close() }
        var writer = InstanceWriter(id: "big")
        try writer.create(in: store)
        var sequences: [Int64] = []
        for size in sizes {
            let record = try writer.machine.apply(.relaunch, at: t0)
            writer.instance.state = writer.machine.snapshot
            let written = try store.write { [instance = writer.instance] (t) throws(StoreError) in
                let written = try t.append(record, instanceID: instance.id) { record in
                    // The record's JSON with a member that brings it to `size` bytes.
                    let json = encodeRecord(record).dropLast()
                    return Array(json) + Array(#","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: size - json.count - 10) + Array(#""}"#.utf8)
                }
                try t.update(instance)
                return written
            }
            #expect(written.recordJSON.count == sizes[sequences.count])
            sequences.append(written.sequence)
        }
        let limit = PageLimit(records: 1000, bytes: bound)
        /// Whether `page` holds what it must: within the bound (or one record), and not ending
        /// before a record that would have fit.
        func isFilled(_ page: [Int], next: Int?) -> Bool {
            let bytes = page.reduce(0, +)
            return !page.isEmpty && (bytes <= bound || page.count == 1) && next.map { bytes + $0 > bound } ?? true
        }

        var history: [[Int]] = []
        var after: Int64 = 0
        while true {
            let page = try store.history(instanceID: "big", after: after, divergentOnly: false, limit: limit)
            history.append(page.records.map(\.count))
            guard page.hasMore, let last = page.lastSequence else { break }
            #expect(history.count < sizes.count, "each page moves on")
            after = last
        }
        #expect(history.flatMap { $0 } == sizes, "every record once, in order")
        for (index, page) in history.enumerated() {
            #expect(isFilled(page, next: history.indices.contains(index + 1) ? history[index + 1].first : nil), "page \(index): \(page)")
        }
        #expect(history == [[4000, 6000], [1000], [12_000], [3000, 7000], [5000], [10_000], [10_000], [400, 400, 400]])

        var replayed: [[Int]] = []
        var replayedSequences: [Int64] = []
        var position: Int64 = 1  // after the creation record
        while position < store.lastSequence {
            let page = try store.replay(after: position, through: store.lastSequence, filter: RecordFilter(), limit: limit)
            #expect(page.coveredThrough > position, "each page moves on")
            replayed.append(page.records.map(\.json.count))
            replayedSequences += page.records.map(\.sequence)
            position = page.coveredThrough
        }
        #expect(replayedSequences == sequences, "every record once, in order")
        #expect(replayed == history, "a replay pages as history does")
    }
}
