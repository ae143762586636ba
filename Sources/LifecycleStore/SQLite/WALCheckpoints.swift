import Foundation
import LifecycleLog
import LifecycleLocks

/// When the committer checkpoints the WAL, which keeps it bounded: SQLite starts the WAL over
/// only after a checkpoint that copied every frame, which under steady commits only the one
/// writer, between its transactions, reaches (the background one alone let it grow to 1.1 GB in 20 s).
struct WALBound {
    /// How urgently the committer should checkpoint before its next transaction.
    enum Due: Equatable {
        case no
        /// Unless the background checkpointer is in a round: then at a later transaction.
        case ifIdle
        /// Now, waiting for the background round if one runs.
        case now
    }

    /// WAL bytes at which the committer checkpoints: half the bound, leaving room for what a background round delays.
    let threshold: Int
    /// Past this, the committer no longer lets a background round delay it.
    let limit: Int
    private var next: Int

    init(maxSize: Int) {
        threshold = max(1, maxSize / 2)
        limit = max(1, maxSize / 4 * 3)
        next = threshold
    }

    func due(walBytes: Int) -> Due {
        walBytes < next ? .no : walBytes < max(limit, next) ? .ifIdle : .now
    }

    /// After one readers kept from finishing, the next waits another threshold: one busy timeout a threshold.
    mutating func checkpointed(finished: Bool, walBytes: Int) {
        next = finished ? threshold : walBytes + threshold
    }
}

/// Copies the WAL into the database every 200 ms (PASSIVE, on its own connection and thread), so the
/// committer's checkpoint has little left (10-30 ms under full load, not 50). The committer's
/// checkpoints exclude its rounds (``excludingRounds(waiting:_:)``): SQLite would refuse one of two.
final class BackgroundCheckpointer: Sendable {
    private struct State {
        let connection: Database
        var isStopped = false
        /// The last round's failure, reported once rather than every round.
        var failure: String?
    }

    private let state: LockedValue<State>
    private let wake = DispatchSemaphore(value: 0)
    private let path: String
    private let report: @Sendable (ServiceEvent) -> Void

    init(path: String, synchronous: String, report: @escaping @Sendable (ServiceEvent) -> Void) throws(SQLiteError) {
        let connection = try Database(path: path)
        try connection.execute("PRAGMA synchronous = \(synchronous)")
        state = LockedValue(State(connection: connection))
        self.path = path
        self.report = report
    }

    func start() {
        let thread = Thread { [self] in
            while round() {}
        }
        thread.name = "lifecycled-checkpoint"
        thread.start()
    }

    func stop() {
        state.withLock { $0.isStopped = true }
        wake.signal()
    }

    /// Runs `body` (the committer's checkpoint) with no round running; `nil` if one runs and not `waiting`.
    func excludingRounds(waiting: Bool, _ body: () throws(SQLiteError) -> Bool) throws(SQLiteError) -> Bool? {
        if waiting { return try state.withLock { (_) throws(SQLiteError) in try body() } }
        return try state.withLockIfAvailable { (_) throws(SQLiteError) in try body() }
    }

    /// One checkpoint, then a pause; `false` once stopped.
    private func round() -> Bool {
        let event = state.withLock { (state) -> ServiceEvent? in
            guard !state.isStopped else { return nil }
            do throws(SQLiteError) {
                _ = try state.connection.checkpoint(.passive)
                guard state.failure != nil else { return nil }
                state.failure = nil
                return ServiceEvent(.info, "background WAL checkpoints work again", ["database": path])
            } catch {
                guard state.failure != error.message else { return nil }
                state.failure = error.message
                return ServiceEvent(.error, "background WAL checkpoint failed", ["database": path, "error": error.message])
            }
        }
        if let event { report(event) }
        _ = wake.wait(timeout: .now() + .milliseconds(200))
        return !state.withLock { $0.isStopped }
    }
}
