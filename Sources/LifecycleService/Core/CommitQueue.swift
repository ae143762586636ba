/// A write waiting for the committer, with the request it came in and whom to answer.
struct CommitJob: Sendable {
    /// What to change.
    var write: InstanceRegistry.Write
    /// Goes into the log lines the write makes; empty for none.
    var requestID: String
    /// Answers the write, on the committer thread.
    var completion: InstanceRegistry.Completion
}

/// The committer's queue as a state machine: the writes waiting, whether a catch-up with
/// other replicas is due, whether the committer is stopping and whether its thread sleeps.
/// Each input returns what the caller must do; nothing here waits or runs a write.
///
/// Writes wait in groups: a request's one write, or a batch's items, which go to one
/// transaction together (never split, whatever its size, while the store works) with
/// nothing of another request between them.
struct CommitQueue {
    private var pending: [[CommitJob]] = []
    private var isStopping = false
    private var isCatchUpDue = false
    /// The thread is asleep, or about to be: the next input that gives it work must wake it.
    private var isAsleep = false

    /// What a submitter must do.
    enum SubmitAction: Equatable {
        /// Nothing more: the thread is awake and will take the write.
        case none
        /// Wake the thread.
        case wake
        /// Answer the write `stopping`: it was not queued.
        case refuse
    }

    /// What the committer thread does next.
    enum NextAction {
        /// Catch up with the store first if `catchUpFirst`, then commit `batch` (perhaps empty);
        /// `isMoreWaiting` when writes wait behind it, to be decided while it commits.
        case run(batch: [CommitJob], catchUpFirst: Bool, isMoreWaiting: Bool)
        /// Sleep until woken or the poll interval has passed (then ``pollDue()``).
        case sleep
        /// Every write is answered and the committer is stopping: end the thread.
        case end
    }

    /// A group of writes arrives (one request's, in order); `.refuse` refuses them all.
    mutating func submit(_ group: [CommitJob]) -> SubmitAction {
        guard !isStopping else { return .refuse }
        guard !group.isEmpty else { return .none }
        pending.append(group)
        return wakeIfAsleep()
    }

    /// The store hints that another process committed: catch up when next awake.
    mutating func catchUpHinted() -> SubmitAction {
        isCatchUpDue = true
        return wakeIfAsleep()
    }

    /// The thread slept a whole poll interval: catch up, in case a hint was lost.
    mutating func pollDue() {
        isAsleep = false
        isCatchUpDue = true
    }

    /// The committer is to stop once what is queued is answered. `wasStopping` when it was
    /// already told, so only the first caller waits for the thread's end.
    mutating func stop() -> (action: SubmitAction, wasStopping: Bool) {
        let wasStopping = isStopping
        isStopping = true
        return (wakeIfAsleep(), wasStopping)
    }

    /// The thread is ready for work: whole groups in arrival order, up to `maxBatch` writes
    /// in all, or the first group alone when it is larger.
    mutating func next(maxBatch: Int) -> NextAction {
        if pending.isEmpty {
            if isStopping { return .end }
            if !isCatchUpDue {
                isAsleep = true
                return .sleep
            }
        }
        isAsleep = false
        var batch: [CommitJob] = []
        var groups = 0
        for group in pending {
            guard batch.isEmpty || batch.count + group.count <= maxBatch else { break }
            // The first group is taken as it is: a batch request's thousand writes are not copied.
            if batch.isEmpty { batch = group } else { batch += group }
            groups += 1
        }
        pending.removeFirst(groups)
        defer { isCatchUpDue = false }
        return .run(batch: batch, catchUpFirst: isCatchUpDue, isMoreWaiting: !pending.isEmpty)
    }

    private mutating func wakeIfAsleep() -> SubmitAction {
        guard isAsleep else { return .none }
        isAsleep = false
        return .wake
    }
}
