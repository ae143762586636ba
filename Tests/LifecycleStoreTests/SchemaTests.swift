import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// The database records the names of the migrations it has had, and has each column the codec uses.
@Suite("schema: named migrations, and the columns the codec uses")
struct SchemaTests {
    static func names(_ store: any ClosableStore) throws -> Set<String> {
        if let store = store as? SQLiteStore { return Set(try store.migrationNames()) }
        return Set(try (store as! PostgresStore).migrationNames())
    }

    /// What opening the store at `place` throws, as text (empty if it opens).
    static func refusal(_ place: StorePlace) -> String {
        do {
            try place.open().close()
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test("a new database records each migration's name, and keeps the integer version in step", arguments: Backend.allCases)
    func newDatabase(backend: Backend) throws {
        let place = try StorePlace(backend)
        let store = try place.open()
        #expect(try Self.names(store) == Set(place.migrations.map(\.name)))
        #expect(try DivergenceStoreTests.schemaVersion(store) == place.migrations.count)
        store.close()
        #expect(try place.integerVersion() == place.migrations.count)
    }

    @Test("a database an earlier lifecycled wrote (an integer version, no names) records the names of what it had, then runs the rest", arguments: Backend.allCases)
    func earlierDatabase(backend: Backend) throws {
        let place = try DivergenceStoreTests.earlierPlace(backend, sqliteVersion: 2, postgresVersion: 1)
        #expect(try place.integerVersion() == (backend == .sqlite ? 2 : 1))
        let all = Set(place.migrations.map(\.name))
        do {
            let store = try place.open()
            defer { store.close() }
            #expect(try Self.names(store) == all)
            #expect(try DivergenceStoreTests.schemaVersion(store) == place.migrations.count)
            try InstanceWriter(id: "a").create(in: store)
        }
        #expect(try place.integerVersion() == place.migrations.count)

        // An earlier lifecycled ran the last two on it (it counts, but names none): they are not run again, but named.
        let lastTwo = place.migrations.suffix(2).map { "'\($0.name)'" }.joined(separator: ", ")
        try place.execute("DELETE FROM schema_migrations WHERE name IN (\(lastTwo))")
        let store = try place.open()
        defer { store.close() }
        #expect(try Self.names(store) == all)
        #expect(try store.loadInstances().map(\.id) == ["a"])
    }

    @Test("a database that has had a migration this lifecycled does not know is refused, as a newer one", arguments: Backend.allCases)
    func unknownMigration(backend: Backend) throws {
        let place = try StorePlace(backend)
        try place.open().close()
        try place.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('v99-from-a-newer-lifecycled', 0)")
        let refusal = Self.refusal(place)
        #expect(refusal.contains("migrations this lifecycled does not know (v99-from-a-newer-lifecycled): a newer lifecycled wrote it"), "\(refusal)")
    }

    @Test("a database whose migrations are not the first this lifecycled runs is refused, naming what it lacks", arguments: Backend.allCases)
    func notAPrefix(backend: Backend) throws {
        let place = try StorePlace(backend)
        try place.open().close()
        let second = place.migrations[1].name
        try place.execute("DELETE FROM schema_migrations WHERE name = '\(second)'")
        let refusal = Self.refusal(place)
        #expect(refusal.contains("not the first \(place.migrations.count - 1) this lifecycled runs: it lacks \(second)"), "\(refusal)")
    }

    @Test("a database without a column the codec reads and writes is refused at start, naming it", arguments: Backend.allCases)
    func missingColumn(backend: Backend) throws {
        let place = try StorePlace(backend)
        try place.open().close()
        try place.execute("ALTER TABLE instances RENAME COLUMN labels TO tags")
        try place.execute("ALTER TABLE coverage DROP COLUMN count")
        let refusal = Self.refusal(place)
        #expect(refusal.contains("the database lacks columns this lifecycled reads and writes: instances.labels, coverage.count"), "\(refusal)")
    }
}
