import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// Gap records (inputs an app's reporter dropped before delivery) through both stores: the record and its kind,
/// the per-instance count through a reopen, and the schema change that brings the count to a database of the previous version.
@Suite("gaps in the store")
struct GapStoreTests {
    static let inputs: [ReportedInput] = [
        .event("didFinishLaunching"),
        ReportedInput(.gap(dropped: 41), occurredAt: DeviceTime(rfc3339: "2026-12-02T05:00:00.004+01:00")),
        .event("didBecomeActive"),
        ReportedInput(.gap(dropped: 1_000_000_000)),
    ]

    @Test("a gap's record and the instance's dropped count are kept through a reopen; replays know its kind", arguments: Backend.allCases)
    func kept(backend: Backend) throws {
        let place = try StorePlace(backend)
        do {
            let store = try place.open()
            defer { store.close() }
            try DivergenceStoreTests.play(Self.inputs, id: "a", in: store)
        }
        let store = try place.open()
        defer { store.close() }
        let a = try #require(try store.loadInstances().first { $0.id == "a" })
        #expect(a.state.counters.dropped == 1_000_000_041, "the count survives the reopen")
        #expect(a.state.state == "launching" && a.state.version == 4, "a gap moves no state")
        let history = try store.history(instanceID: "a", after: 0, divergentOnly: false, limit: PageLimit(records: 100)).records.map(decodeRecord)
        #expect(history.map(\.kind) == [.event, .gap, .event, .gap])
        #expect(history.map(\.dropped) == [nil, 41, nil, 1_000_000_000])
        #expect(history[1].from == history[0].to && history[1].to == history[0].to && history[1].outcome == .stayed && history[1].hooks.isEmpty)
        #expect(history[1].occurredAt?.description == "2026-12-02T05:00:00.004+01:00")
        let replayed = try store.replay(after: 0, through: store.lastSequence, filter: RecordFilter(instances: ["a"]), limit: PageLimit(records: 100)).records
        #expect(replayed.map(\.kind) == [.created, .event, .gap, .event, .gap])
        #expect(replayed.filter { $0.kind == .gap }.map(\.outcome) == [.stayed, .stayed])
    }

    @Test("a database of the previous schema is migrated: every row kept, nothing dropped, new gaps counted", arguments: Backend.allCases)
    func migratePreviousSchema(backend: Backend) throws {
        var machine = Machine(model: .iosApp)
        var instance = StoredInstance(id: "old", model: "ios-app", createdAt: t0, updatedAt: t0, state: machine.snapshot)
        var rows = [Codec.record(1, instance: "old", version: 0, kind: .created, outcome: nil, json: Array(#"{"sequence":1,"kind":"created"}"#.utf8))]
        for (index, input) in [ReportedInput.event("didFinishLaunching"), ReportedInput(.event("didBecomeActive"), report: AppReport(believedState: "background"))].enumerated() {
            let record = try machine.apply(reported: input, at: t0)
            rows.append(Codec.numbered(record, Int64(index + 2), instance: "old", encode: encodeRecord).row)
        }
        instance.state = machine.snapshot
        #expect(instance.state.counters.divergences == 1)
        // The rows as version 5 holds them: an instance without its last two columns.
        let statements = [
            "INSERT INTO instances VALUES (\(DivergenceStoreTests.literals(try Codec.columns(of: instance).dropLast(2), backend)))",
        ] + rows.map { "INSERT INTO records (seq, instance, version, kind, outcome, body, divergent) VALUES (\(DivergenceStoreTests.literals($0, backend)))" }

        let open = try DivergenceStoreTests.opener(
            backend, sqliteVersion: 5, postgresVersion: 2, statements: statements, postgresCounters: ["UPDATE commit_counter SET last_sequence = 3, instance_count = 1"]
        )

        do {
            let store = try open()
            defer { store.close() }
            #expect(try DivergenceStoreTests.schemaVersion(store) == (backend == .sqlite ? SQLiteStore.migrations.count : PostgresStore.migrations.count))
            #expect(try store.loadInstances().map(\.state) == [instance.state], "the instance as it was, nothing dropped")
            let replayed = try store.replay(after: 0, through: 3, filter: RecordFilter(), limit: PageLimit(records: 10)).records
            #expect(replayed.map(\.json) == rows.map { if case .bytes(let json) = $0[5] { json } else { [] } })
            #expect(replayed.map(\.isDivergent) == [false, false, true])
            try DivergenceStoreTests.play([ReportedInput(.gap(dropped: 7))], id: "old", in: store, create: false)
        }
        let reopened = try open()
        defer { reopened.close() }
        let migrated = try #require(try reopened.loadInstances().first)
        #expect(migrated.state.counters.dropped == 7 && migrated.state.counters.divergences == 1)
        let history = try reopened.history(instanceID: "old", after: 0, divergentOnly: false, limit: PageLimit(records: 10)).records.map(decodeRecord)
        #expect(history.map(\.kind) == [.event, .event, .gap] && history.last?.dropped == 7)
    }
}
