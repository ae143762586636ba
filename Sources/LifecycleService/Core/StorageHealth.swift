import Foundation
import LifecycleStore
import LifecycleLog
import LifecycleLocks

/// Why the store could not commit, while it cannot.
struct StorageFailure: Sendable, Equatable {
    /// The store's message for the first failure.
    var reason: String
    /// When the store began to fail.
    var since: Date
    /// What the failure means: ``StoreError/Kind/damaged`` is reported until a restart (which
    /// refuses to start on it); after ``StoreError/Kind/unavailable`` a transaction that commits,
    /// even an empty one, shows the server is back (see ``StorageHealth/needsProbe``).
    var kind = StoreError.Kind.other
    /// Only reading others' commits failed (no write has failed since): a read that works
    /// again clears it. A write's failure is cleared only by a commit.
    var isReadOnly = false
}

/// Whether the store works, as the committer last found it: a state machine over what the
/// committer's writes and reads met, each input returning what to log.
struct StorageHealth: Equatable {
    /// What went wrong, while it is not over.
    private(set) var failure: StorageFailure?

    /// A change worth a log line.
    enum Change: Equatable {
        /// The store began to fail: writes (or, `isReadOnly`, only reads of others' commits).
        case failing(reason: String, isReadOnly: Bool)
        /// It works again, after failing since `since`; `isReadOnly` when only reads had failed.
        case recovered(since: Date, isReadOnly: Bool)
    }

    /// The store failed at `now` for a reason that is its own, not a write's data.
    mutating func failed(_ error: StoreError, isReadOnly: Bool, at now: Date) -> Change? {
        let before = failure
        // The first report of damage is kept: a later failure is more likely its effect.
        if before?.kind != .damaged {
            failure = StorageFailure(
                reason: error.message, since: before?.since ?? now, kind: error.kind, isReadOnly: isReadOnly && before?.isReadOnly != false
            )
        }
        return before == nil ? .failing(reason: error.message, isReadOnly: isReadOnly) : nil
    }

    /// A read of the store worked: a problem that only reads had is over.
    mutating func readable() -> Change? {
        guard let current = failure, current.isReadOnly else { return nil }
        failure = nil
        return .recovered(since: current.since, isReadOnly: true)
    }

    /// A transaction committed. Damage does not heal when writes that miss it commit: it stays reported.
    mutating func committed() -> Change? {
        guard let current = failure, current.kind != .damaged else { return nil }
        failure = nil
        return .recovered(since: current.since, isReadOnly: false)
    }

    /// Whether an empty transaction should show whether the store commits again.
    ///
    /// While a write's failure is reported and no write has come since to clear it, nothing
    /// else would: a replica that no write reaches would report the failure for ever, and
    /// one that a load balancer takes out of rotation by `/healthz` would never get the write
    /// that clears it (after an outage of PostgreSQL, every replica that failed a write would
    /// stay out). Only for a server that could not be reached: after a full disk or an I/O
    /// error a transaction that writes nothing may commit while writes still fail, and damage
    /// is reported until a restart.
    var needsProbe: Bool {
        guard let failure else { return false }
        return failure.kind == .unavailable && !failure.isReadOnly
    }
}

/// The storage health the committer keeps and `/healthz` reads, and the log lines its changes make.
final class StorageStatus: Sendable {
    private let health = LockedValue(StorageHealth())
    private let report: @Sendable (ServiceEvent) -> Void

    /// A status that logs its changes to `report`.
    init(report: @escaping @Sendable (ServiceEvent) -> Void) {
        self.report = report
    }

    /// Why the store cannot commit, while it cannot: `nil` once a write has committed since.
    var problem: StorageFailure? { health.withLock { $0.failure } }

    /// Whether the committer should try an empty transaction (``StorageHealth/needsProbe``).
    var needsProbe: Bool { health.withLock { $0.needsProbe } }

    /// Writes (or, `isReadOnly`, reads) failed for a reason that is the store's.
    func failed(_ error: StoreError, isReadOnly: Bool = false) {
        let now = Date()
        log(health.withLock { $0.failed(error, isReadOnly: isReadOnly, at: now) })
    }

    /// A read of the store worked.
    func readable() { log(health.withLock { $0.readable() }) }

    /// A transaction committed.
    func committed() { log(health.withLock { $0.committed() }) }

    private func log(_ change: StorageHealth.Change?) {
        switch change {
        case .failing(let reason, let isReadOnly)?:
            report(ServiceEvent(.error, isReadOnly ? "storage cannot be read" : "storage cannot commit", ["error": reason]))
        case .recovered(let since, let isReadOnly)?:
            report(ServiceEvent(.info, isReadOnly ? "storage can be read again" : "storage commits again", ["failingSince": since.formatted(.iso8601)]))
        case nil:
            break
        }
    }
}
