import Dispatch
import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleLog
import LifecycleHTTP
import LifecycleLocks

extension RecordKind {
    /// The event type a stream gives the record (`event:`): the record's `kind`, except
    /// `record` for an event's (`event: event` would say nothing to a listener), and `dropped`
    /// for a gap's (`event: gap` already says that the stream itself lost records to retention).
    var streamEventType: String {
        switch self {
        case .event: "record"
        case .action: "action"
        case .relaunch: "relaunch"
        case .gap: "dropped"
        case .created: "created"
        case .deleted: "deleted"
        }
    }
}

/// What the hub is given to work with.
struct StreamSettings: Sendable {
    /// How long a subscription may go without a byte before it is sent a comment.
    var heartbeat: Duration = .seconds(15)
    /// How far, in bytes of records it has not been sent, a live subscriber may fall behind
    /// before it is closed with `event: overflow` (see ``Configuration/streamBuffer``).
    var subscriberBuffer = 256 * 1024
    /// Bytes of recent records kept in memory, so that most resumes need no store read.
    var ringBytes = 16 * 1024 * 1024
    /// Subscriptions open at once; the hub refuses more.
    var maxSubscribers = 20_000
    /// Subscriptions open at once for one client address (``Request/clientAddress``): what
    /// holds a client behind a trusted proxy, whose connections are not limited per address.
    var maxSubscribersPerClient = 256
    /// The `retry:` a stream opens with: how long a client waits before reconnecting.
    var retryMilliseconds = 2000
    /// Records a replay reads from the store at a time, at most.
    var replayPageSize = 256
    /// Bytes of records a replay reads from the store at a time, at most (one record if it
    /// is bigger): what a stream that does not read holds (``Configuration/pageBytes``).
    var pageBytes = PageLimit.defaultBytes
}

/// Fans committed records out to stream subscriptions.
///
/// The committer ``publish(_:)``es each committed transaction's records, in sequence order:
/// they are framed once (`id:`, `event:`, `data:`) and appended to a ring of recent records,
/// bounded in bytes, under a lock held for the append only. The hub's one thread then wakes
/// the subscriptions waiting for a record that matches them and, every heartbeat interval,
/// the idle ones; the committer never waits for a subscriber. Subscriptions read from the
/// ring at their own pace, each with its own position, on the server's threads.
///
/// A subscription that resumes after a sequence number the ring no longer holds replays
/// from the store first: each page reads `(position, P]` where `P` is the last sequence
/// number published when the page begins (all of it committed, so the store has it); once
/// the position is one the ring covers (every record after it is in the ring), it continues
/// in the ring from the entry after the position. Both steps are decided under the hub's
/// lock against the same ring, so no record is skipped or sent twice, whatever is committed
/// meanwhile.
final class StreamHub: Sendable {
    /// Why a subscription was refused.
    enum Refusal: Error, Equatable {
        /// As many subscriptions are open as the hub allows.
        case tooManySubscribers(limit: Int)
        /// As many subscriptions are open for this client as the hub allows one.
        case tooManyForClient(limit: Int)
        /// The service is stopping.
        case stopping
    }

    /// What the hub was given to work with.
    let settings: StreamSettings
    /// Where replays read records the ring no longer holds.
    let store: any InstanceStore
    /// Where subscriptions log what goes wrong.
    let logger: LineLogger
    private let state: LockedValue<HubState>
    // A LockedValue cannot be waited on: the hub's thread sleeps on this semaphore until records
    // are published, it must stop, or a heartbeat is due.
    private let signal = DispatchSemaphore(value: 0)
    // Signalled once, as the thread ends: `stop()` returns only once no waker will be called.
    private let stopped = DispatchSemaphore(value: 0)

    /// A hub whose first record will follow `lastSequence`, the store's last.
    init(store: any InstanceStore, lastSequence: Int64, settings: StreamSettings, logger: LineLogger) {
        self.settings = settings
        self.store = store
        self.logger = logger
        // At least a subscriber's budget: an unfiltered subscriber whose next record left the
        // ring is further behind than its budget allows.
        let capacity = max(settings.ringBytes, settings.subscriberBuffer)
        state = LockedValue(HubState(ring: RecordRing(capacity: capacity, lastSequence: lastSequence)))
        // The thread holds the hub until `stop()` ends it.
        let thread = Thread { [self] in runDispatcher() }
        thread.name = "lifecycled-stream-hub"
        thread.start()
    }

    /// Subscriptions open now.
    var subscriberCount: Int { state.withLock { $0.slots.count } }

    /// Subscriptions closed for falling behind since start-up.
    var overflowCount: Int { state.withLock { $0.overflowed } }

    /// The last sequence number published.
    var lastSequence: Int64 { state.withLock { $0.ring.lastSequence } }

    /// Store pages read by replays since start-up: resumes the ring served read none.
    var replayPagesRead: Int { state.withLock { $0.replayPages } }

    /// Takes one committed transaction's records, in sequence order (the store's
    /// ``ReplayedRecord``, whether this process wrote them or read them as another's). Called
    /// by the committer only.
    func publish(_ records: [ReplayedRecord]) {
        let entries = records.map { record in
            RingEntry(
                sequence: record.sequence, instance: record.instance, model: record.model, outcome: record.outcome, isDivergent: record.isDivergent,
                frame: ServerSentEvents.event(id: record.sequence, type: record.kind.streamEventType, data: record.json)
            )
        }
        if state.withLock({ $0.append(entries) }) { signal.signal() }
    }

    /// A new subscription to the records that pass `filter`: live from now on, or after
    /// `lastEventID` (the last sequence number the client has) if it resumes.
    ///
    /// The subscription counts against the limits, in all and for `client`, until its
    /// ``Subscription/finish()``: hand it to the server, which calls that when the connection
    /// ends, or call it yourself.
    ///
    /// Where it starts is decided here, against the ring as it is now: a subscription without
    /// `lastEventID` gets every record published after this call returns.
    func subscribe(filter: RecordFilter, lastEventID: Int64?, client: String = "") throws(Refusal) -> Subscription {
        // A client that comes from a replica ahead of this one resumes after a record this hub
        // has not published yet: the store says whether it is committed (then it is on its way
        // here) or beyond anything committed.
        var committed: Int64 = 0
        if let lastEventID, lastEventID > lastSequence {
            do {
                committed = try store.latestSequence()
            } catch {
                logger.error("cannot read the last committed sequence number", ["error": error.message])
            }
        }
        let (id, opening) = try state.withLock { (state) throws(Refusal) -> (Int, Opening) in
            try state.subscribe(filter: filter, client: client, lastEventID: lastEventID, committedThrough: committed, settings: settings)
        }
        return Subscription(hub: self, id: id, filter: filter, lastEventID: lastEventID, opening: opening)
    }

    /// Ends the hub's thread; subscriptions still open are the server's to end.
    func stop() {
        let wasStopping = state.withLock { state in
            defer { state.isStopping = true }
            return state.isStopping
        }
        guard !wasStopping else { return }
        signal.signal()
        stopped.wait()
    }

    // MARK: the hub's thread

    private func runDispatcher() {
        let interval = settings.heartbeat
        var nextBeat = ContinuousClock.now + interval
        while true {
            let remaining = ContinuousClock.now.duration(to: nextBeat)
            if remaining > .zero {
                let (seconds, attoseconds) = remaining.components
                _ = signal.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
            }
            let isBeat = ContinuousClock.now >= nextBeat
            if isBeat { nextBeat = ContinuousClock.now + interval }
            let (wakers, isStopping) = state.withLock { state in
                var wakers = state.dispatch()
                if isBeat { wakers += state.beat() }
                return (wakers, state.isStopping)
            }
            for waker in wakers { waker.wake() }
            if isStopping {
                stopped.signal()
                return
            }
        }
    }

    // MARK: for subscriptions

    /// Where the next replay step reads from: the ring, once it covers the position, or the
    /// store, up to the last sequence number published now (all of it committed).
    func replaySource(after position: Int64) -> ReplaySource {
        state.withLock { state in
            if position >= state.ring.coversAfter { return .ring(index: state.ring.firstIndex(after: position)) }
            state.replayPages += 1
            return .store(through: state.ring.lastSequence)
        }
    }

    /// The store's bounds for a notice, read after a page or on their own.
    func storeBounds(through newest: Int64) throws(StoreError) -> ReplayPage {
        try store.replay(after: newest, through: newest, filter: RecordFilter(), limit: PageLimit(records: 1))
    }

    /// Takes frames from the ring for subscription `id` at `cursor`, at most `room` bytes of
    /// whole frames (or one frame, if the first is larger). When nothing is there: a
    /// heartbeat if one is due, else the subscription waits to be woken; and so it does
    /// when the frames taken reach the ring's end.
    func take(_ id: Int, _ cursor: inout RingCursor, room: Int) -> RingTake {
        state.withLock { state in state.take(id, &cursor, room: room, budget: settings.subscriberBuffer) }
    }

    /// Forgets a subscription whose connection ended.
    func remove(_ id: Int) {
        state.withLock { $0.remove(id) }
    }

    /// The subscription's connection is open: `waker` wakes it when a record or a heartbeat is due.
    func started(_ id: Int, waker: StreamWaker) {
        state.withLock { $0.slots[id]?.waker = waker }
    }
}
