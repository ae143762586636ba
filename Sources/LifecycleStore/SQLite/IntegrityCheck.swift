import Foundation
import LifecycleLog
import LifecycleLocks

/// `PRAGMA quick_check` on its own thread, beside the rest of start-up (0.4 to 0.7 s for 1,000,000 records).
final class IntegrityCheck: Sendable {
    private let outcome = LockedValue<Result<Void, StoreError>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(path: String, report: @escaping @Sendable (ServiceEvent) -> Void) {
        Thread.detachNewThread { [self] in
            let result = Result { () throws(StoreError) in
                let database = try checked("cannot open the database \(path) to check it") { () throws(SQLiteError) in
                    try Database(path: path, isReadOnly: true)
                }
                try Self.quickCheck(database, path: path, report: report)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
    }

    /// `failure`, unless the check finds the database damaged, which is the better reason.
    func explaining(_ failure: StoreError) -> StoreError {
        do {
            try wait()
            return failure
        } catch {
            return error
        }
    }

    func waitUntilDone() {
        done.wait()
        done.signal()
    }

    /// The check's verdict, once it is in (every caller gets it).
    func wait() throws(StoreError) {
        waitUntilDone()
        try outcome.withLock { $0! }.get()
    }

    /// Refuses a damaged database (not indexes that differ from their tables: that takes a full check).
    /// Through a memory map: with 1 KiB pages, read calls cost more than the check (0.8 s against 0.4).
    private static func quickCheck(_ database: Database, path: String, report: (ServiceEvent) -> Void) throws(StoreError) {
        let started = ContinuousClock.now
        var problems: [String] = []
        var bytes: Int64 = 0
        do {
            bytes = try database.first("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size") { $0.integer(0) } ?? 0
            try database.execute("PRAGMA mmap_size = \(bytes)")
            problems = try database.rows("PRAGMA quick_check(5)") { $0.text(0) ?? "NULL" }
            try database.execute("PRAGMA mmap_size = 0")
        } catch {
            problems = [error.message]
        }
        guard problems == ["ok"] else {
            throw StoreError(
                "the database \(path) is damaged (PRAGMA quick_check: \(problems.joined(separator: "; "))); "
                    + "restore it from a backup; moved aside instead, its data counts as lost"
            )
        }
        let millis = Int((ContinuousClock.now - started) / .milliseconds(1))
        report(ServiceEvent(.info, "database checked", ["database": path, "bytes": String(bytes), "quickCheckMillis": String(millis)]))
    }
}
