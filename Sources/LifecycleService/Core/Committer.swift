import Dispatch
import Foundation
import LifecycleLocks

/// The one thread that decides and commits writes, and the queue in front of it.
///
/// Every write waits here in arrival order; the thread takes up to ``maxBatch`` at a time (a
/// batch request's items, which may be more, together) and hands them to its ``BatchCommitter``,
/// which commits them in one transaction (on SQLite, while more writes wait, on its writer
/// thread while this one decides the next batch; it answers a batch before sleeping). When idle it
/// catches up with other replicas (``ReplicaCatchUp``): on the store's hint that another
/// process committed, and after each poll interval in case a hint was lost.
final class Committer: Sendable {
    /// The most writes one transaction commits, but for a batch request's larger group, which goes alone.
    static let maxBatch = 512

    private let queue = LockedValue(CommitQueue())
    // A LockedValue cannot be waited on: the thread sleeps on this semaphore until an input wakes
    // it (``CommitQueue/SubmitAction/wake``) or its poll interval passes.
    private let doorbell = DispatchSemaphore(value: 0)
    // Signalled once, as the thread ends: `stop()` returns only once every queued write is answered.
    private let ended = DispatchSemaphore(value: 0)

    /// Starts the thread, which commits with `batches` and polls the store every `pollInterval`
    /// seconds while idle.
    init(batches: BatchCommitter, pollInterval: TimeInterval) {
        // The thread holds the committer until `stop()` ends it.
        let thread = Thread { [self] in run(batches, pollInterval: pollInterval) }
        thread.name = "lifecycled-committer"
        thread.start()
    }

    /// Queues a write; its completion runs on the committer thread once it is committed or
    /// refused (at once, with ``InstanceRegistry/Refusal/stopping``, after ``stop()``).
    func submit(_ job: CommitJob) {
        submit(group: [job])
    }

    /// Queues one request's writes together: committed in order, in one transaction while
    /// the store works, with nothing of another request between them. Each is answered on
    /// its own completion.
    func submit(group: [CommitJob]) {
        let action = queue.withLock { $0.submit(group) }
        switch action {
        case .none: break
        case .wake: doorbell.signal()
        case .refuse: for job in group { job.completion(.failure(.stopping)) }
        }
    }

    /// The store's hint that another process committed: the committer catches up when idle.
    func catchUpSoon() {
        if queue.withLock({ $0.catchUpHinted() }) == .wake { doorbell.signal() }
    }

    /// Answers what is queued, then ends the thread.
    func stop() {
        let (action, wasStopping) = queue.withLock { $0.stop() }
        if action == .wake { doorbell.signal() }
        if !wasStopping { ended.wait() }
    }

    private func run(_ batches: BatchCommitter, pollInterval: TimeInterval) {
        var batches = batches
        var deadline = DispatchTime.now() + pollInterval
        while true {
            switch queue.withLock({ $0.next(maxBatch: Self.maxBatch) }) {
            case .run(let batch, let catchUpFirst, let isMoreWaiting):
                if catchUpFirst {
                    batches.settle()
                    batches.catchUp.catchUpWithStore()
                }
                if !batch.isEmpty { batches.commit(batch, isMoreWaiting: isMoreWaiting) }
                deadline = .now() + pollInterval
            case .sleep where batches.isCommitting:
                // The batch committing is answered before the thread sleeps; then it looks again.
                batches.settle()
            case .sleep:
                if doorbell.wait(timeout: deadline) == .timedOut { queue.withLock { $0.pollDue() } }
            case .end:
                batches.settle()
                ended.signal()
                return
            }
        }
    }
}
