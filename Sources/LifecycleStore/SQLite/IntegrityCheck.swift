import CLifecycleSQLite
import Foundation
import LifecycleLog
import LifecycleLocks

/// `PRAGMA quick_check` of the database, on a read-only connection of its own.
///
/// It runs once the service serves (``SQLiteStore/checkIntegrity(onDamage:)``), not before:
/// it reads every page, which at 1,000,000 instances takes seconds that a restart should not
/// wait for. What the check finds is reported as damage, which `/healthz` says until a
/// restart. A start that fails runs it first (``SQLiteStore/reason(for:)``): damage is the
/// better reason to give.
///
/// It reads through SQLite's own small page cache, not a memory map: a mapped 2 GiB file would
/// count in the service's resident memory while the check runs.
final class IntegrityCheck: Sendable {
    private struct State {
        /// The running check's connection (its `sqlite3*` as a number: it is only handed to
        /// `sqlite3_interrupt`, which any thread may call while the connection is open).
        var running: UInt?
        var isCancelled = false
    }

    private let state = LockedValue(State())
    private let done = DispatchSemaphore(value: 0)

    /// Starts the check on its own thread; `onDamage` gets what it finds wrong. A check
    /// stopped by ``cancel()`` reports nothing.
    init(path: String, report: @escaping @Sendable (ServiceEvent) -> Void, onDamage: @escaping @Sendable (StoreError) -> Void) {
        Thread.detachNewThread { [self] in
            defer { done.signal() }
            do throws(StoreError) {
                try Self.check(path, report: report) { (database) in
                    state.withLock { (state) -> Bool in
                        state.running = database.map { UInt(bitPattern: Int(bitPattern: $0)) }
                        return !state.isCancelled
                    }
                }
            } catch {
                // Health first: whoever reads the line and then asks /healthz finds it failing.
                onDamage(error)
                report(ServiceEvent(.error, "database damaged", ["database": path, "error": error.message]))
            }
        }
    }

    /// Stops the check if it is still running and waits for its thread: before the data
    /// folder's lock is let go, no connection of the check's may read the file.
    func cancel() {
        state.withLock { (state) in
            state.isCancelled = true
            // Under the lock: the check clears `running` under it before closing the connection.
            if let running = state.running { sqlite3_interrupt(OpaquePointer(bitPattern: Int(bitPattern: running))) }
        }
        done.wait()
        done.signal()
    }

    /// Checks the database at `path` now, on this thread: throws ``StoreError/Kind/damaged``
    /// with what `PRAGMA quick_check` found.
    static func check(_ path: String, report: (ServiceEvent) -> Void) throws(StoreError) {
        try check(path, report: report) { _ in true }
    }

    /// `running` is told the connection before the check (`false`: do not start it) and `nil` after it.
    private static func check(
        _ path: String, report: (ServiceEvent) -> Void, running: (OpaquePointer?) -> Bool
    ) throws(StoreError) {
        let started = ContinuousClock.now
        let database = try checked("cannot open the database \(path) to check it") { () throws(SQLiteError) in
            try Database(path: path, isReadOnly: true)
        }
        guard database.withHandle(running) else { return }
        var problems: [String]
        do {
            problems = try database.rows("PRAGMA quick_check(5)") { $0.text(0) ?? "NULL" }
        } catch where error.code == SQLITE_INTERRUPT {
            _ = running(nil)
            return
        } catch {
            problems = [error.message]
        }
        _ = running(nil)
        guard problems == ["ok"] else {
            throw StoreError(
                "the database \(path) is damaged (PRAGMA quick_check: \(problems.joined(separator: "; "))); "
                    + "restore it from a backup; moved aside instead, its data counts as lost",
                kind: .damaged
            )
        }
        let millis = Int((ContinuousClock.now - started) / .milliseconds(1))
        report(ServiceEvent(.info, "database checked", ["database": path, "quickCheckMillis": String(millis)]))
    }
}
