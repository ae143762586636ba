import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// Divergences and device times through both stores: the per-instance count, the `divergent` flag of records and the
/// filters on it, and the schema change that brings them to a database of the previous version.
@Suite("divergences in the store")
struct DivergenceStoreTests {
    /// What an instance of ios-app is sent, with what its app reports: every third input diverges.
    static let inputs: [ReportedInput] = [
        ReportedInput(.event("didFinishLaunching"), report: AppReport(believedState: "foreground"), occurredAt: DeviceTime(rfc3339: "2026-12-02T05:00:00.001+01:00")),
        ReportedInput(.event("willConnectToWindow", ["window": .string("main")])),
        ReportedInput(.event("didBecomeActive"), report: AppReport(believedState: "background"), occurredAt: DeviceTime(rfc3339: "2026-12-02T05:00:00.002-03:30")),
        ReportedInput(.event("didEnterBackground"), report: AppReport(ranHooks: ["Background.never"])),
        ReportedInput(.event("didBecomeActive"), occurredAt: DeviceTime(rfc3339: "2026-12-02T05:00:00.003Z")),
        ReportedInput(.event("didFinishLaunching"), report: AppReport(ranHooks: ["Launching.init"])),  // unexpected, and divergent
    ]

    /// Applies `inputs` to instance `id` (made if `create`), one transaction each; returns the records as stored.
    @discardableResult
    static func play(_ inputs: [ReportedInput], id: String, in store: any InstanceStore, create: Bool = true) throws -> [Record] {
        var machine = Machine(model: .iosApp)
        var instance = StoredInstance(id: id, model: "ios-app", createdAt: t0, updatedAt: t0, state: machine.snapshot)
        if create {
            _ = try store.write { (t) throws(StoreError) in try t.insert(instance) }
        } else {
            instance = try #require(try store.instances([id]).first)
            machine = try #require(Machine(model: .iosApp, restoring: instance.state))
        }
        var records: [Record] = []
        for input in inputs {
            let record = try machine.apply(reported: input, at: t0)
            instance.state = machine.snapshot
            let encoded = try store.write { [instance] (t) throws(StoreError) in
                let encoded = try t.append(record, instanceID: id, encode: encodeRecord)
                try t.update(instance)
                return encoded
            }
            records.append(try decodeRecord(encoded.recordJSON))
        }
        return records
    }

    /// Every page of `id`'s history read `limit` records at a time.
    static func pages(_ store: any InstanceStore, _ id: String, divergentOnly: Bool, limit: PageLimit) throws -> [[Int64]] {
        var pages: [[Int64]] = []
        var after: Int64 = 0
        while true {
            let page = try store.history(instanceID: id, after: after, divergentOnly: divergentOnly, limit: limit)
            pages.append(try page.records.map { try decodeRecord($0).sequence })
            guard page.hasMore, let last = page.lastSequence else { return pages }
            #expect(pages.count < 20, "each page moves on")
            after = last
        }
    }

    @Test("counts, flags and device times are kept through a reopen; history and replays filter on the flag", arguments: Backend.allCases)
    func keptAndFiltered(backend: Backend) throws {
        let place = try StorePlace(backend)
        var divergent: [Int64] = []
        do {
            let store = try place.open()
            let a = try Self.play(Self.inputs, id: "a", in: store)
            let b = try Self.play(Self.inputs, id: "b", in: store)
            let stored = try #require(try store.instances(["b"]).first)
            _ = try store.write { (t) throws(StoreError) in
                try t.delete(stored, at: t0, encode: { sequence in Array(#"{"sequence":\#(sequence),"kind":"deleted"}"#.utf8) })
            }
            divergent = a.filter { $0.divergence != nil }.map(\.sequence)
            #expect(divergent.count == 4 && b.filter { $0.divergence != nil }.count == 4)
            store.close()
        }
        let store = try place.open()
        defer { store.close() }
        let a = try #require(try store.loadInstances().first { $0.id == "a" })
        #expect(a.state.counters.divergences == 4, "the count survives the reopen")
        #expect(a.state.counters.unexpected == 1)

        let all = try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 100)).records.map(decodeRecord)
        #expect(all.count == 6)
        #expect(all.map { $0.occurredAt?.description } == [
            "2026-12-02T05:00:00.001+01:00", nil, "2026-12-02T05:00:00.002-03:30", nil, "2026-12-02T05:00:00.003Z", nil,
        ])
        #expect(all.filter { $0.divergence != nil }.map(\.sequence) == divergent)
        // One record a page, by count or by bytes: the same cursor rules as without the filter.
        #expect(try Self.pages(store, "a", divergentOnly: true, limit: PageLimit(records: 100)) == [divergent])
        #expect(try Self.pages(store, "a", divergentOnly: true, limit: PageLimit(records: 1)) == divergent.map { [$0] })
        #expect(try Self.pages(store, "a", divergentOnly: true, limit: PageLimit(records: 100, bytes: 1)) == divergent.map { [$0] })
        #expect(try Self.pages(store, "a", divergentOnly: true, limit: PageLimit(records: 3)) == [Array(divergent.prefix(3)), [divergent[3]]])
        let after = try store.history(instanceID: "a", after: divergent[1], divergentOnly: true, limit: PageLimit(records: 100))
        #expect(try after.records.map { try decodeRecord($0).sequence } == Array(divergent.dropFirst(2)))
        #expect(after.oldestRetainedVersion == 1 && !after.hasMore)

        // Replays: the flag as stored, no creation or deletion record, and combined with the other conditions.
        let last = store.lastSequence
        let everything = try store.replay(after: 0, through: last, filter: RecordFilter(), limit: PageLimit(records: 100)).records
        #expect(everything.contains { $0.kind == .created } && everything.contains { $0.kind == .deleted })
        #expect(everything.filter(\.isDivergent).map(\.sequence) == divergent, "b's records went with it")
        for record in everything where record.kind == .event {
            #expect(record.isDivergent == (try decodeRecord(record.json).divergence != nil), "\(record.sequence)")
        }
        for filter in [
            RecordFilter(divergentOnly: true), RecordFilter(instances: ["a", "b"], divergentOnly: true), RecordFilter(model: "ios-app", divergentOnly: true),
            RecordFilter(outcomes: [.unexpected], divergentOnly: true), RecordFilter(instances: ["b"], divergentOnly: true),
        ] {
            let page = try store.replay(after: 0, through: last, filter: filter, limit: PageLimit(records: 100))
            let expected = everything.filter {
                $0.isDivergent && filter.matches(instance: $0.instance, model: $0.model, outcome: $0.outcome, isDivergent: $0.isDivergent)
            }
            #expect(page.records == expected, "\(filter)")
            #expect(page.records.allSatisfy(\.isDivergent) && page.coveredThrough == last, "\(filter)")
        }
        #expect(try store.replay(after: 0, through: last, filter: RecordFilter(outcomes: [.unexpected], divergentOnly: true), limit: PageLimit(records: 100))
            .records.map(\.sequence) == [divergent[3]])
    }

    @Test("a database of the previous schema is migrated: every row kept, no count and no record divergent, new ones counted", arguments: Backend.allCases)
    func migratePreviousSchema(backend: Backend) throws {
        var machine = Machine(model: .iosApp)
        var instance = StoredInstance(id: "old", model: "ios-app", createdAt: t0, updatedAt: t0, state: machine.snapshot)
        var rows = [Codec.record(1, instance: "old", version: 0, kind: .created, outcome: nil, json: Array(#"{"sequence":1,"kind":"created"}"#.utf8))]
        for (index, input) in [Input.event("didFinishLaunching"), .event("didBecomeActive"), .event("didFinishLaunching")].enumerated() {
            let record = try machine.apply(input, at: t0)
            rows.append(Codec.numbered(record, Int64(index + 2), instance: "old", encode: encodeRecord).row)
        }
        instance.state = machine.snapshot
        #expect(instance.state.counters.unexpected == 2)
        // The rows as version 4 holds them: without the last column of each (the last three of an instance).
        let statements = [
            "INSERT INTO instances VALUES (\(Self.literals(try Codec.columns(of: instance).dropLast(3), backend)))",
        ] + rows.map { "INSERT INTO records (seq, instance, version, kind, outcome, body) VALUES (\(Self.literals($0.dropLast(), backend)))" }

        let open = try Self.opener(
            backend, sqliteVersion: 4, postgresVersion: 1, statements: statements, postgresCounters: ["UPDATE commit_counter SET last_sequence = 4, instance_count = 1"]
        )

        do {
            let store = try open()
            defer { store.close() }
            #expect(try Self.schemaVersion(store) == (backend == .sqlite ? SQLiteStore.migrations.count : PostgresStore.migrations.count))
            #expect(try store.loadInstances().map(\.state) == [instance.state], "the instance as it was, with no divergences")
            #expect(store.lastSequence == 4)
            let replayed = try store.replay(after: 0, through: 4, filter: RecordFilter(), limit: PageLimit(records: 10)).records
            #expect(replayed.map(\.json) == rows.map { if case .bytes(let json) = $0[5] { json } else { [] } })
            #expect(replayed.allSatisfy { !$0.isDivergent })
            #expect(try store.history(instanceID: "old", after: 0, divergentOnly: true, limit: PageLimit(records: 10)).records.isEmpty)
            #expect(try store.history(instanceID: "old", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.count == 3)
            try Self.play([ReportedInput(.event("didBecomeActive"), report: AppReport(believedState: "foreground"))], id: "old", in: store, create: false)
        }
        let reopened = try open()
        defer { reopened.close() }
        let migrated = try #require(try reopened.loadInstances().first)
        #expect(migrated.state.counters.divergences == 1 && migrated.state.counters.unexpected == 3)
        #expect(try reopened.history(instanceID: "old", after: 0, divergentOnly: true, limit: PageLimit(records: 10)).records.map { try decodeRecord($0).sequence } == [5])
    }

    /// `values` as SQL literals, comma-separated, for `backend`.
    /// How to open a store whose database an earlier version wrote: its first `sqliteVersion`
    /// (or `postgresVersion`) migrations, then `statements` (its rows), and on PostgreSQL
    /// `postgresCounters` (what that schema's counters must say of the rows). Opening it upgrades it.
    static func opener(
        _ backend: Backend, sqliteVersion: Int, postgresVersion: Int, statements: [String], postgresCounters: [String] = []
    ) throws -> () throws -> any ClosableStore {
        let place = try earlierPlace(backend, sqliteVersion: sqliteVersion, postgresVersion: postgresVersion, statements: statements, postgresCounters: postgresCounters)
        return { try place.open() }
    }

    /// The place of such a database, made as lifecycled made it before it recorded migrations' names: an integer version
    /// (SQLite's `PRAGMA user_version`, PostgreSQL's `meta.schema_version`) and no `schema_migrations`.
    static func earlierPlace(
        _ backend: Backend, sqliteVersion: Int, postgresVersion: Int, statements: [String] = [], postgresCounters: [String] = []
    ) throws -> StorePlace {
        let place = try StorePlace(backend)
        switch backend {
        case .sqlite:
            try FileManager.default.createDirectory(atPath: place.folder.path, withIntermediateDirectories: true)
            let database = try Database(path: place.folder.path + "/" + SQLiteStore.fileName)
            try database.execute("PRAGMA journal_mode = WAL")
            for (version, migration) in SQLiteStore.migrations.prefix(sqliteVersion).enumerated() {
                try database.transaction { () throws(SQLiteError) in
                    for statement in migration.statements { try database.execute(statement) }
                    try database.execute("PRAGMA user_version = \(version + 1)")
                }
            }
            try database.transaction { () throws(SQLiteError) in
                for statement in statements { try database.execute(statement) }
            }
        case .postgres:
            let schema = ["CREATE TABLE meta (key text PRIMARY KEY, value bigint NOT NULL)"] + PostgresStore.migrations.prefix(postgresVersion).flatMap(\.statements)
                + ["INSERT INTO meta (key, value) VALUES ('schema_version', \(postgresVersion))"] + postgresCounters
            try place.execute("BEGIN; " + (schema + statements).joined(separator: "; ") + "; COMMIT")
        }
        return place
    }

    static func literals(_ values: some Sequence<ColumnValue>, _ backend: Backend) -> String {
        values.map { value -> String in
            switch value {
            case .integer(let integer): integer.map(String.init) ?? "NULL"
            case .text(let text): text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
            case .boolean(let flag): flag ? "TRUE" : "FALSE"
            case .bytes(let bytes):
                backend == .sqlite ? "X'\(bytes.map { String(format: "%02x", $0) }.joined())'" : "'\\x\(bytes.map { String(format: "%02x", $0) }.joined())'::bytea"
            default: "NULL"
            }
        }.joined(separator: ", ")
    }

    static func schemaVersion(_ store: any ClosableStore) throws -> Int {
        if let store = store as? SQLiteStore { return try store.schemaVersion() }
        return try (store as! PostgresStore).schemaVersion()
    }
}
