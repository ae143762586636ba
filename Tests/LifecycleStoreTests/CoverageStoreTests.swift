import Foundation
import LifecycleKit
import Testing
@testable import LifecycleStore

@Suite("coverage counters in the store")
struct CoverageStoreTests {
    /// Applies `inputs` to a new instance `id` of `model`, one transaction each, counting as
    /// the committer does; returns what was counted.
    @discardableResult
    static func play(_ inputs: [Input], id: String, model: Model, in store: any InstanceStore) throws -> CoverageCounts {
        try play(inputs.map { ($0, AppReport()) }, id: id, model: model, in: store)
    }

    /// The same, each input with what the app reported of it.
    @discardableResult
    static func play(_ inputs: [(Input, AppReport)], id: String, model: Model, in store: any InstanceStore) throws -> CoverageCounts {
        var machine = Machine(model: model)
        var instance = StoredInstance(id: id, model: model.name, createdAt: t0, updatedAt: t0, state: machine.snapshot)
        _ = try store.write { (t) throws(StoreError) in try t.insert(instance) }
        var counted = CoverageCounts()
        for (input, report) in inputs {
            let record = try machine.apply(input, reported: report, at: t0)
            instance.state = machine.snapshot
            var counts = CoverageCounts()
            counts.count(record, model: model.name)
            try store.write { (t) throws(StoreError) in
                _ = try t.append(record, instanceID: id, encode: encodeRecord)
                try t.update(instance)
                try t.addCoverage(counts)
            }
            counted.add(counts)
        }
        return counted
    }

    static let background: [Input] = [
        .event("didFinishLaunching"), .event("willConnectToWindow", ["window": .string("main")]), .event("didBecomeActive"),
        .action("openURL", ["url": .string("https://duckduckgo.com")]), .event("willResignActive"), .event("didEnterBackground"),
        .event("didFinishLaunching"), .relaunch, .event("didFinishLaunching"), .event("didBecomeActive"),
    ]

    @Test("counters are committed with their transaction, add up, survive a reopen; a rolled-back one adds nothing", arguments: Backend.allCases)
    func committedWithTransaction(backend: Backend) throws {
        let place = try StorePlace(backend)
        var expected = CoverageCounts()
        do {
            let store = try place.open()
            #expect(try store.loadCoverage().isEmpty)
            expected.add(try Self.play(Self.background, id: "a", model: .iosApp, in: store))
            expected.add(try Self.play(Self.background, id: "b", model: .iosApp, in: store))
            expected.add(try Self.play([.event("onCreate"), .event("onResume")], id: "c", model: .androidActivity, in: store))
            #expect(try store.loadCoverage() == expected)
            #expect(expected[.init(model: "ios-app", kind: .rowTaken, name: "r2")] == 4)
            #expect(expected[.init(model: "ios-app", kind: .unexpectedEvent, name: "background")] == 2)
            #expect(expected[.init(model: "ios-app", kind: .unexpectedEvent, name: "launching")] == 2)
            #expect(expected[.init(model: "android-activity", kind: .rowTaken, name: "r1")] == 1)

            var more = CoverageCounts()
            more.add(5, to: .init(model: "ios-app", kind: .rowTaken, name: "r2"))
            #expect(throws: StoreError.self) {
                try store.write { (t) throws(StoreError) in
                    try t.addCoverage(more)
                    throw StoreError("the write fails after counting")
                }
            }
            #expect(try store.loadCoverage() == expected, "a rolled-back transaction counted nothing")
            store.close()
        }
        let reopened = try place.open()
        defer { reopened.close() }
        #expect(try reopened.loadCoverage() == expected)
    }

    @Test("divergent records count their row and their to (an unexpected event's from), beside rows taken; committed and reopened", arguments: Backend.allCases)
    func divergentCounters(backend: Backend) throws {
        let place = try StorePlace(backend)
        let wrongHooks = AppReport(ranHooks: ["Connected.init", "Connected.init"])
        let inputs: [(Input, AppReport)] = [
            (.event("didFinishLaunching"), AppReport(believedState: "launching")),
            (.event("willConnectToWindow", ["window": .string("main")]), wrongHooks),
            (.event("didBecomeActive"), AppReport(believedState: "background")),
            (.event("willEnterForeground"), AppReport(believedState: "foreground", ranHooks: ["Foreground.didReturn"])),
            (.action("openURL", ["url": .string("https://duckduckgo.com")]), AppReport(believedState: "connected")),
        ]
        var expected = CoverageCounts()
        do {
            let store = try place.open()
            expected = try Self.play(inputs, id: "a", model: .iosApp, in: store)
            #expect(try store.loadCoverage() == expected)
            store.close()
        }
        func count(_ kind: CoverageCounts.Kind, _ name: String) -> Int64 { expected[.init(model: "ios-app", kind: kind, name: name)] }
        #expect(count(.rowTaken, "r2") == 1 && count(.divergentRow, "r2") == 0, "a report that agrees is no divergence")
        #expect(count(.rowTaken, "r4") == 1 && count(.divergentRow, "r4") == 1)
        #expect(count(.divergentRow, "r5") == 1)
        #expect(count(.unexpectedEvent, "foreground") == 1)
        #expect(count(.divergentState, "connected") == 1)
        #expect(count(.divergentState, "foreground") == 3, "r5, the unexpected event (whose to is its from) and the action")
        #expect(count(.divergentState, "launching") == 0)
        let reopened = try place.open()
        defer { reopened.close() }
        #expect(try reopened.loadCoverage() == expected)
    }

    @Test("a version-3 database is migrated: the counters start from the records it kept")
    func migrateVersion3() throws {
        let folder = Folder()
        var expected = CoverageCounts()
        do {
            let store = try SQLiteStore(directory: folder.path)
            expected.add(try Self.play(Self.background, id: "a", model: .iosApp, in: store))
            expected.add(try Self.play(Array(Self.background.prefix(3)), id: "b", model: .iosApp, in: store))
            expected.add(try Self.play([.event("onCreate"), .event("onStart"), .event("onCreate")], id: "c", model: .androidActivity, in: store))
            store.close()
        }
        do {
            let database = try Database(path: folder.path + "/" + SQLiteStore.fileName)
            // Versions 4 to 9 undone, and the names of migrations, which version 3's lifecycled did not record.
            try database.execute("""
                DROP TABLE schema_migrations;
                DROP TABLE findings; DROP TABLE finding_instances; DROP TABLE coverage; DROP INDEX records_divergent; ALTER TABLE records DROP COLUMN divergent; ALTER TABLE instances DROP COLUMN labels;
                ALTER TABLE instances DROP COLUMN divergences; ALTER TABLE instances DROP COLUMN dropped;
                DROP INDEX idempotency_held; DROP INDEX idempotency_released; ALTER TABLE idempotency DROP COLUMN released_at;
                CREATE INDEX idempotency_by_age ON idempotency(created_at); PRAGMA user_version = 3
                """)
        }
        let store = try SQLiteStore(directory: folder.path)
        #expect(try store.schemaVersion() == SQLiteStore.migrations.count)
        #expect(try store.loadCoverage() == expected)
        #expect(!expected.isEmpty)
    }
}
