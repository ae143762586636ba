import Foundation
import LifecycleKit
import LifecycleLocks

/// The reporter's state behind one lock, and its sender loop.
final class ReporterCore: Sendable {
    private struct State {
        var queue: ReportQueue
        /// nil while the folder cannot be opened (`unavailable` says why): reports are `held`.
        var journal: Journal?
        /// Why the journal cannot be opened or written yet (the system's reason).
        var unavailable: String?
        /// Reports made while the journal could not be opened, in order, to write once it can;
        /// their sequence numbers are given then.
        var held: [(item: QueuedItem, size: Int)] = []
        var heldBytes = 0
        /// A group sync is queued and has not yet taken the file.
        var syncScheduled = false
        /// Why the last group sync failed: the next report syncs before it returns.
        var syncFailure: String?
        /// No batch goes out before this (a backoff, or a `Retry-After`), in seconds of `now`.
        var notBefore: TimeInterval?
        /// The part of `notBefore` the service asked for, which `retryNow` keeps.
        var retryAfterUntil: TimeInterval?
        var failures = 0
        /// The batch size in use: halved while a whole batch is refused (400, 413).
        var batchLimit: Int
        var waiter: CheckedContinuation<Void, Never>?
        var wakePending = false
        var damagedTailBytes = 0
        var damage: LifecycleReporter.Damage?
        var compactionError: String?
    }

    /// What the sender does next.
    private enum Step {
        case send(ReportQueue.Batch)
        case wait(until: TimeInterval?)
    }

    /// How one attempt went.
    private enum Attempt {
        /// Answered, every item (`retryAfter` nil) or a prefix (the rest asked to wait): the answers.
        case answered(ArraySlice<BatchResult>, retryLater: Bool, retryAfter: TimeInterval?)
        /// Not answered, or refused whole (`status`: the problem's, `problem` the refusal itself).
        case failed(String, status: Int?, retryAfter: TimeInterval?, problem: LifecycleProblem? = nil)
    }

    private let client: LifecycleClient
    private let configuration: LifecycleReporter.Configuration
    private let onEvent: @Sendable (LifecycleReporter.Event) -> Void
    private let state: LockedValue<State>
    /// Where group syncs run, one at a time, off the reporting thread (invariant 2).
    private let syncQueue = DispatchQueue(label: "LifecycleReporter.sync", qos: .utility)

    /// Opens the journal; one that cannot be opened yet is said (``LifecycleReporter/Event/journalUnavailable(reason:)``)
    /// and opened again on each report and `retryNow`.
    init(client: LifecycleClient, configuration: LifecycleReporter.Configuration, onEvent: @escaping @Sendable (LifecycleReporter.Event) -> Void) {
        self.client = client
        self.configuration = configuration
        self.onEvent = onEvent
        let queue = ReportQueue(bound: .init(items: configuration.maxItems, bytes: configuration.maxBytes), replaying: [], sizes: [])
        state = LockedValue(State(queue: queue, batchLimit: configuration.batchSize))
        let events = state.withLock { s in openIfDue(&s) }
        for event in events { onEvent(event) }
    }

    var status: LifecycleReporter.Status {
        state.withLock { s in
            var drops: [String: Int] = [:]
            for gap in s.queue.gaps { drops[gap.instance, default: 0] += gap.dropped }
            return .init(pendingItems: s.queue.items.count, pendingBytes: s.queue.liveBytes, unreportedDrops: drops, damagedTailBytes: s.damagedTailBytes,
                         damage: s.damage, compactionError: s.compactionError.map { $0.oneLine() }, heldItems: s.held.count,
                         journalUnavailable: s.unavailable.map { unwritable($0).description })
        }
    }

    /// Why the last group sync failed, until a report syncs again.
    var syncFailure: String? { state.withLock { $0.syncFailure } }

    func enqueue(
        instance: String, kind: QueuedItem.Kind, name: String? = nil, parameters: [String: Value] = [:], model: String? = nil,
        believedState: String? = nil, ranHooks: [String]? = nil, occurredAt: DeviceTime? = nil, labels: [String: String] = [:]
    ) throws {
        let time = occurredAt ?? (kind == .create ? nil : DeviceTime.now())
        let item = QueuedItem(sequence: 0, key: LifecycleClient.makeIdempotencyKey(), instance: instance, kind: kind, name: name, parameters: parameters,
                              model: model, believedState: believedState, ranHooks: ranHooks, occurredAt: time, labels: labels.isEmpty ? nil : labels)
        let (events, sync, failure) = state.withLock { s in
            var events = openIfDue(&s)
            var failure: (any Error)?
            do {
                if s.journal == nil {
                    try hold(item, &s)
                } else {
                    // With the journal open, a report is journaled or refused: one held in memory
                    // would be lost on a kill, and its caller would not know.
                    events += catchUp(&s)
                    if !s.held.isEmpty { throw unwritable(s.unavailable ?? "it cannot be written") }
                    events += try write(item, &s)
                }
            } catch {
                failure = error
            }
            return (events, scheduleSync(&s), failure)
        }
        if sync { syncQueue.async { self.groupSync() } }
        for event in events { onEvent(event) }
        wake()
        if let failure { throw failure }
    }

    /// Journals `item` (numbered next), the bound's drops before it; the events it makes.
    private func write(_ item: QueuedItem, _ s: inout State) throws -> [LifecycleReporter.Event] {
        let drops: [(String, Int)] = try journaled(&s) { s in
            var item = item
            item.sequence = s.queue.nextSequence
            let encodedItem = try Journal.Encoded(Journal.Entry(t: .item, item: item))
            let itemSize = encodedItem.frameSize
            guard itemSize <= configuration.maxBytes else { throw LifecycleReporter.ReportError.tooLarge(bytes: itemSize) }
            let entries = s.queue.entries(queueing: item, size: itemSize, makeKey: LifecycleClient.makeIdempotencyKey)
            var dropped: [String: Int] = [:]
            for drop in entries where drop.t == .drop {
                guard let from = drop.from, let through = drop.through else { continue }
                for queued in s.queue.items where (from...through).contains(queued.sequence) && queued.kind != .create {
                    dropped[queued.instance, default: 0] += 1
                }
            }
            // After a failed group sync this write syncs, so the caller hears if the disk still fails.
            let encoded = try entries.map { $0 == encodedItem.entry ? encodedItem : try Journal.Encoded($0) }
            let sizes = try s.journal!.append(encoded, sync: s.syncFailure != nil)
            s.syncFailure = nil
            for (entry, size) in zip(entries, sizes) { s.queue.apply(entry, size: size) }
            s.queue.noteMergeable(entries)
            return dropped.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        }
        return drops.map { .dropped(instance: $0.0, count: $0.1) }
    }

    /// Keeps `item` in memory until the journal can be opened, within the bound.
    private func hold(_ item: QueuedItem, _ s: inout State) throws {
        let size = try Journal.frameSize(Journal.Entry(t: .item, item: item))
        guard size <= configuration.maxBytes else { throw LifecycleReporter.ReportError.tooLarge(bytes: size) }
        guard s.held.count < configuration.maxItems, s.heldBytes + size <= configuration.maxBytes else {
            throw unwritable("\(s.unavailable ?? "it cannot be written"); the reports held in memory fill the bound")
        }
        s.held.append((item, size))
        s.heldBytes += size
    }

    /// Opens the journal when it is not open; the events that says.
    private func openIfDue(_ s: inout State) -> [LifecycleReporter.Event] {
        guard s.journal == nil else { return [] }
        do {
            let (journal, opened) = try Journal.open(in: configuration.directory, io: configuration.journalIO, fullSync: configuration.powerLossDurable)
            s.queue = ReportQueue(bound: s.queue.bound, replaying: opened.entries, sizes: opened.sizes)
            s.journal = journal
            s.unavailable = nil
            s.damagedTailBytes = opened.tornBytes
            s.damage = opened.damage
            var events: [LifecycleReporter.Event] = []
            if opened.tornBytes > 0 { events.append(.damagedTail(bytes: opened.tornBytes)) }
            if let damage = opened.damage { events.append(.damaged(damage)) }
            return events
        } catch {
            let reason = LifecycleReporter.ReportError.reason(of: error)
            // Said once an outage (and again if the reason changes), not on every report.
            guard reason != s.unavailable else { return [] }
            s.unavailable = reason
            return [.journalUnavailable(reason: unwritable(reason).description)]
        }
    }

    /// Writes the held reports into the journal, in order, when it is open; stops at the first
    /// that cannot be written (it and those after it stay held). The events that makes.
    private func catchUp(_ s: inout State) -> [LifecycleReporter.Event] {
        guard s.journal != nil, !s.held.isEmpty else { return [] }
        var events: [LifecycleReporter.Event] = []
        var written = 0
        for (item, size) in s.held {
            do {
                events += try write(item, &s)
                s.heldBytes -= size
            } catch {
                s.unavailable = LifecycleReporter.ReportError.reason(of: error)
                break
            }
            written += 1
        }
        s.held.removeFirst(written)
        if s.held.isEmpty { s.unavailable = nil }
        return written > 0 ? events + [.journalCaughtUp(items: written)] : events
    }

    /// Whether a group sync must be queued (one is not already): entries were written unsynced.
    private func scheduleSync(_ s: inout State) -> Bool {
        guard !s.syncScheduled, s.journal != nil else { return false }
        s.syncScheduled = true
        return true
    }

    /// Syncs every entry written since the last sync, outside the lock so reports go on meanwhile,
    /// then compacts if that write made it due: every report is followed by a group sync, so
    /// this is where its compaction runs, off the reporting thread.
    private func groupSync() {
        syncPending()
        compactIfDue()
    }

    /// Syncs what no sync covered yet; a failure makes the next report sync before it returns.
    private func syncPending() {
        do {
            try syncNow()
        } catch {
            state.withLock { s in s.syncFailure = LifecycleReporter.ReportError.reason(of: error) }
        }
    }

    /// Syncs what `report` wrote and no sync has covered yet, on the calling thread.
    private func syncNow() throws {
        let pending = state.withLock { s in
            s.syncScheduled = false
            return s.journal?.takeUnsynced()
        }
        try pending?.run()
    }

    /// The journal error of `reason` in this reporter's folder.
    private func unwritable(_ reason: String) -> LifecycleReporter.ReportError {
        .journalUnwritable(directory: configuration.directory.path, reason: reason)
    }

    func retryNow() {
        state.withLock { s in
            s.failures = 0
            s.notBefore = s.retryAfterUntil.flatMap { $0 > Self.now ? $0 : nil }
        }
        reopen()
        wake()
    }

    /// Opens the journal if it is not open, writes the reports held meanwhile; whether some stay held.
    @discardableResult
    private func reopen() -> Bool {
        let (events, sync, held) = state.withLock { s in
            let events = openIfDue(&s) + catchUp(&s)
            return (events, scheduleSync(&s), !s.held.isEmpty)
        }
        if sync { syncQueue.async { self.groupSync() } }
        for event in events { onEvent(event) }
        return held
    }

    /// Resumes the sender if it waits (or makes its next wait return at once).
    func wake() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            s.wakePending = true
            return nil
        }
        waiter?.resume()
    }

    /// The sender: sends while there is something to send and no wait is due; a wake (a report,
    /// `retryNow`) or the wait's end makes it look again.
    func run() async {
        while !Task.isCancelled {
            switch nextStep() {
            case .send(let batch): await settle(batch, attempt(batch))
            case .wait(let deadline): await wait(until: deadline)
            }
        }
    }

    func flush() async throws -> Int {
        if reopen() { throw state.withLock { s in unwritable(s.unavailable ?? "it cannot be written") } }
        // A command line's process ends after its flush: what it queued is made durable first,
        // what no sync took yet here, and what a group sync took by that sync, still running.
        do { try syncNow() } catch { throw LifecycleReporter.ReportError.journalUnwritable(configuration.directory, error) }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in syncQueue.async { c.resume() } }
        var delivered = 0
        while true {
            let batch = state.withLock { s in s.queue.takeBatch(limit: s.batchLimit) }
            guard let batch else {
                if status.pendingItems == 0 && status.unreportedDrops.isEmpty { return delivered }
                try await Task.sleep(nanoseconds: 10_000_000)  // the sender task has a batch in flight
                continue
            }
            let outcome = await attempt(batch)
            // Sending the batch again at once would find the disk as full: the caller hears of it.
            if let unwritable = settle(batch, outcome) { throw unwritable }
            switch outcome {
            case .answered(let results, let retryLater, _):
                delivered += results.count
                if retryLater { throw LifecycleClientError.badResponse("the service asked to retry later; \(batch.count - results.count) items kept") }
            case .failed(let error, let status, _, let problem):
                // A batch refused whole is split and tried again; anything else ends the flush,
                // with the refusal itself when there is one (a 401 is no outage to wait out).
                if !Self.splits(batch, status) { throw problem.map(LifecycleClientError.problem) ?? .unreachable(error) }
            }
        }
    }

    private func nextStep() -> Step {
        state.withLock { s in
            if let notBefore = s.notBefore, notBefore > Self.now { return .wait(until: notBefore) }
            s.notBefore = nil
            guard let batch = s.queue.takeBatch(limit: s.batchLimit) else { return .wait(until: nil) }
            return .send(batch)
        }
    }

    /// Monotonic seconds, as iOS 15 has them (ContinuousClock needs iOS 16).
    private static var now: TimeInterval { ProcessInfo.processInfo.systemUptime }

    private func wait(until deadline: TimeInterval?) async {
        let timer = deadline.map { deadline in
            Task { [weak self] in
                do { try await Task.sleep(nanoseconds: UInt64(max(0, deadline - Self.now) * 1_000_000_000)) } catch { return }
                self?.wake()
            }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.wakePending || Task.isCancelled {
                    s.wakePending = false
                    return true
                }
                s.waiter = c
                return false
            }
            if now { c.resume() }
        }
        timer?.cancel()
    }

    /// Sends `batch` once.
    private func attempt(_ batch: ReportQueue.Batch) async -> Attempt {
        let items = batch.members.map { member in
            switch member {
            case .gap(let gap): BatchItem.gap(gap.instance, dropped: gap.dropped, idempotencyKey: gap.key)
            case .item(let item): item.batchItem
            }
        }
        do {
            let results = try await client.batch(items)
            // The first item answered 5xx or 429 and everything after it wait for the next attempt.
            let answered = results.firstIndex { $0.status >= 500 || $0.status == 429 } ?? results.count
            let retryAfter: TimeInterval? = answered < results.count ? Self.retryAfter(results[answered]) : nil
            return .answered(results.prefix(answered), retryLater: answered < results.count, retryAfter: retryAfter)
        } catch LifecycleClientError.problem(let problem) where [400, 413].contains(problem.status) && batch.count == 1 {
            // The service refuses this one item whatever the batch around it: it is delivered as refused.
            return .answered([.problem(status: problem.status, problem)], retryLater: false, retryAfter: nil)
        } catch LifecycleClientError.problem(let problem) {
            return .failed(problem.description.oneLine(), status: problem.status, retryAfter: problem.retryAfter, problem: problem)
        } catch LifecycleClientError.unreachable(let reason) {
            return .failed(reason, status: nil, retryAfter: nil)
        } catch {
            return .failed(String(describing: error).oneLine(), status: nil, retryAfter: nil)
        }
    }

    /// Whether a batch refused whole with `status` is split: the service refuses the batch
    /// for one of its items (400) or for its size (413).
    private static func splits(_ batch: ReportQueue.Batch, _ status: Int?) -> Bool {
        batch.count > 1 && (status == 400 || status == 413)
    }

    private static func retryAfter(_ result: BatchResult) -> TimeInterval? {
        if case .problem(_, let problem) = result { return problem.retryAfter }
        return nil
    }

    /// Records what `attempt` found: the answered prefix made durable before anything else is
    /// sent (invariant 4), then the next wait. Returns why the answer could not be journaled.
    /// `onEvent` hears of each answer once its item has left the queue (the answer journaled):
    /// an item whose answer could not be journaled is sent again, and heard of once, then.
    @discardableResult
    private func settle(_ batch: ReportQueue.Batch, _ outcome: Attempt) -> LifecycleReporter.ReportError? {
        var unwritable: LifecycleReporter.ReportError?
        var ackSync: Journal.PendingSync?
        var answered: ArraySlice<BatchResult> = []
        var retry: (String, TimeInterval)? = state.withLock { s in
            switch outcome {
            case .answered(let results, let retryLater, let retryAfter):
                let count = results.count
                if let entry = s.queue.acknowledgement(of: batch, answered: count) {
                    do {
                        try journaled(&s) { s in
                            // Synced below, outside the lock: reports made meanwhile do not wait for the disk.
                            let sizes = try s.journal!.append([Journal.Encoded(entry)], sync: false)
                            s.queue.apply(entry, size: sizes[0])
                            ackSync = s.journal!.takeUnsynced()
                        }
                    } catch {
                        // Not durable: the batch goes again with its keys, and the service replays
                        // it; after a backoff, as any failure, since a full disk stays full a while.
                        let failure = LifecycleReporter.ReportError.journalUnwritable(configuration.directory, error)
                        unwritable = failure
                        return backoff(&s, retryAfter: nil, error: failure.description)
                    }
                }
                answered = results
                if count == batch.count { s.batchLimit = min(configuration.batchSize, s.batchLimit * 2) }
                guard retryLater else {
                    s.failures = 0
                    s.retryAfterUntil = nil
                    return nil
                }
                return backoff(&s, retryAfter: retryAfter, error: "an item was answered to retry later")
            case .failed(let error, let status, let retryAfter, _):
                s.queue.release()
                if Self.splits(batch, status) {
                    // Refused whole: halve until the refused item is alone.
                    s.batchLimit = max(1, batch.count / 2)
                    return nil
                }
                return backoff(&s, retryAfter: retryAfter, error: error)
            }
        }
        // Before settle returns, so before its caller sends again (invariant 4): this thread is
        // the sender, and the group sync that finds nothing left to sync does not wait.
        if let ackSync {
            do {
                try ackSync.run()
                syncQueue.async { self.compactIfDue() }
            } catch {
                // The ack is applied: a power loss would resend its batch, which the keys make
                // harmless. The next report syncs first, as after any failed sync.
                let failure = LifecycleReporter.ReportError.journalUnwritable(configuration.directory, error)
                unwritable = failure
                retry = state.withLock { s in
                    s.syncFailure = String(describing: error)
                    return backoff(&s, retryAfter: nil, error: failure.description)
                }
            }
        }
        report(batch, answered)
        if let (error, delay) = retry { onEvent(.retrying(error: error, retryIn: delay)) }
        return unwritable
    }

    private func backoff(_ s: inout State, retryAfter: TimeInterval?, error: String) -> (String, TimeInterval) {
        s.failures += 1
        // Each as a wait: the configuration's public fields may hold anything.
        let ceiling = min(configuration.maxBackoff.asWait, configuration.initialBackoff.asWait * pow(2, Double(min(s.failures - 1, 30))))
        let delay = (retryAfter ?? Double.random(in: 0...ceiling)).asWait
        let until = Self.now + delay
        s.notBefore = until
        s.retryAfterUntil = retryAfter == nil ? nil : until
        return (error, delay)
    }

    /// Compacts the journal when its dead bytes are due, on the sync queue, never a reporting
    /// thread (invariant 6): the live state is taken under the lock, written and synced outside
    /// it, so a report made meanwhile waits for no disk sync, and put in place under the lock
    /// again with what was written since. A failure leaves the journal as it was (whole), never
    /// undoes a write, and is kept in `status.compactionError`.
    private func compactIfDue() {
        let taken = state.withLock { s -> ([Journal.Entry], Journal.Basis)? in
            guard let size = s.journal?.size, s.queue.compacted(fileSize: size, threshold: configuration.compactionThreshold) != nil else { return nil }
            do {
                return try journaled(&s) { s in
                    // Again under the folder's lock: another process may have appended or compacted.
                    guard let size = s.journal?.size, let entries = s.queue.compacted(fileSize: size, threshold: configuration.compactionThreshold) else { return nil }
                    return (entries, s.journal!.basis)
                }
            } catch {
                s.compactionError = String(describing: error)
                return nil
            }
        }
        guard let (entries, basis) = taken else { return }
        let replacement: Journal.Replacement
        do {
            replacement = try Journal.prepare(entries, basis: basis, in: configuration.directory, io: configuration.journalIO, fullSync: configuration.powerLossDurable)
        } catch {
            state.withLock { s in s.compactionError = String(describing: error) }
            return
        }
        let committed = state.withLock { s -> Bool in
            do {
                let committed = try journaled(&s) { s -> Bool in
                    guard let (tail, sizes) = try s.journal!.commit(replacement) else { return false }
                    s.queue.reset()
                    for (entry, size) in zip(entries + tail, sizes) { s.queue.apply(entry, size: size) }
                    return true
                }
                s.compactionError = nil
                return committed
            } catch {
                replacement.discard()
                s.compactionError = String(describing: error)
                return false
            }
        }
        // The new file's tail and the rename, before any later group sync counts as durable.
        if committed { syncPending() }
    }

    /// Runs `body` under the folder's lock, once the queue holds what other processes wrote
    /// (invariant 7); the lock is released before this returns, so never held across a wait.
    private func journaled<T>(_ s: inout State, _ body: (inout State) throws -> T) throws -> T {
        guard s.journal != nil else {
            throw unwritable(s.unavailable ?? "it is not open")
        }
        try s.journal!.lock()
        defer { s.journal!.unlock() }
        guard let change = try s.journal!.catchUp() else { return try body(&s) }
        let parsed: Journal.Parsed
        switch change {
        case .appended(let appended): parsed = appended
        case .replaced(let whole):
            s.queue.reset()
            parsed = whole
        }
        for (entry, size) in zip(parsed.entries, parsed.sizes) { s.queue.apply(entry, size: size) }
        s.queue.forgetMergeable()
        s.damage = s.damage.map { $0.adding(parsed.damage) } ?? parsed.damage
        return try body(&s)
    }

    private func report(_ batch: ReportQueue.Batch, _ results: ArraySlice<BatchResult>) {
        for (member, result) in zip(batch.members, results) {
            switch member {
            case .gap(let gap): onEvent(.gapDelivered(instance: gap.instance, dropped: gap.dropped, result))
            case .item(let item): onEvent(.delivered(item, result))
            }
        }
    }
}

extension QueuedItem {
    /// The item as a batch sends it, with its key.
    var batchItem: BatchItem {
        let kind: BatchItem.Kind = switch self.kind {
        case .create: .create
        case .event: .event
        case .action: .action
        case .launch: .launch
        }
        return BatchItem(instance: instance, kind: kind, name: name, parameters: parameters, model: model, believedState: believedState,
                         ranHooks: ranHooks, occurredAt: occurredAt, idempotencyKey: key, labels: labels ?? [:])
    }
}
