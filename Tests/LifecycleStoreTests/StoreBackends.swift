import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

/// The stores the store-level tests run against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// A store that can be closed: both kinds are.
protocol ClosableStore: InstanceStore {
    func close()
}

extension SQLiteStore: ClosableStore {}
extension PostgresStore: ClosableStore {}

/// Where a test's store lives (a data folder, or a fresh PostgreSQL database), so that the
/// test can open it, close it and open it again.
final class StorePlace {
    let backend: Backend
    let folder = Folder()
    private let url: String?

    init(_ backend: Backend) throws {
        self.backend = backend
        url = backend == .postgres ? try PostgresCluster.shared.makeDatabase() : nil
    }

    /// Runs `sql` on the place's database, with no store open on it.
    func execute(_ sql: String) throws {
        switch backend {
        case .sqlite: try Database(path: folder.path + "/" + SQLiteStore.fileName).execute(sql)
        case .postgres: try PostgresCluster.execute(sql, on: url!)
        }
    }

    /// The first column of the first row `sql` gives, as an integer (0 for no row), with no store open on it.
    func integer(_ sql: String) throws -> Int64 {
        switch backend {
        case .sqlite: try Database(path: folder.path + "/" + SQLiteStore.fileName).first(sql) { $0.integer(0) } ?? 0
        case .postgres: try Connection(url: url!, deadline: Deadline(.seconds(10))).first(sql) { $0.integer(0) } ?? 0
        }
    }

    /// The migrations of the place's kind of store.
    var migrations: [Migration] { backend == .sqlite ? SQLiteStore.migrations : PostgresStore.migrations }

    /// The integer schema version lifecycled kept before it recorded migrations' names, and keeps in step.
    func integerVersion() throws -> Int {
        Int(try integer(backend == .sqlite ? "PRAGMA user_version" : "SELECT value FROM meta WHERE key = 'schema_version'"))
    }

    /// Opens the store with the options both kinds have.
    func open(
        historyLimit: Int = 10_000, tombstoneLifetime: TimeInterval = RecordKind.deletionRecordLifetime
    ) throws -> any ClosableStore {
        switch backend {
        case .sqlite:
            try SQLiteStore(directory: folder.path, options: .init(
                historyLimit: historyLimit, tombstoneLifetime: tombstoneLifetime))
        case .postgres:
            try PostgresStore(url: url!, options: .init(
                historyLimit: historyLimit, tombstoneLifetime: tombstoneLifetime))
        }
    }
}
