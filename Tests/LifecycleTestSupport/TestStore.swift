import Foundation
import LifecycleLocks
import Testing

/// Which store the service (and client) tests run on: SQLite in each server's data folder, or, with
/// `LIFECYCLED_TEST_STORE=postgres` (`make postgres-test`), a fresh PostgreSQL database per
/// data folder on the test cluster (see ``PostgresCluster``), kept across restarts.
///
/// `make postgres-test` runs every suite of this target in that second pass, but for those
/// (and the tests) marked ``Testing/Trait/sqliteOnly(_:)``.
public enum TestStore {
    public static let isPostgres = ProcessInfo.processInfo.environment["LIFECYCLED_TEST_STORE"] == "postgres"

    private static let databases = LockedValue<[String: String]>([:])

    /// The database URL for a server on `dataDirectory`: the same one each time, so a restart
    /// finds what was committed; `nil` on SQLite.
    public static func databaseURL(for dataDirectory: String) throws -> String? {
        guard isPostgres else { return nil }
        if let url = databases.withLock({ $0[dataDirectory] }) { return url }
        let url = try PostgresCluster.shared.makeDatabase()
        return databases.withLock { databases in
            if let existing = databases[dataDirectory] { return existing }
            databases[dataDirectory] = url
            return url
        }
    }
}

extension Trait where Self == ConditionTrait {
    /// A suite or test that runs in the SQLite pass of `make test` only, not again in the
    /// PostgreSQL pass (`make postgres-test`): one that works on the SQLite file itself (a
    /// trigger that fails writes, a page cap for a full disk, an old schema, the folder's
    /// lock), one that never opens a store (flag parsing, the HTTP server alone, the
    /// Makefile), or one whose servers run on a PostgreSQL of their own in either pass.
    /// `reason` says which; a suite without this runs in both passes.
    public static func sqliteOnly(_ reason: Comment) -> Self {
        .enabled(if: !TestStore.isPostgres, reason)
    }
}
