import Dispatch
import Foundation
import LifecycleKit
import LifecycleStore
import Logging
import MicroHTTP
import Synchronization

/// A committed record as the committer hands it to the hub.
struct PublishedRecord: Sendable {
    var sequence: Int64
    var kind: RecordKind
    var instance: String
    var model: String
    /// `nil` for creation and deletion records.
    var outcome: Outcome?
    /// The record's JSON, as stored and answered.
    var json: [UInt8]
}

extension RecordKind {
    /// The event type a stream gives the record (`event:`): the record's `kind`, except
    /// `record` for an event's (`event: event` would say nothing to a listener).
    var streamEventType: String {
        switch self {
        case .event: "record"
        case .action: "action"
        case .relaunch: "relaunch"
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

    let settings: StreamSettings
    let store: any InstanceStore
    let logger: Logger
    private let state: Mutex<HubState>
    /// Tells the hub's thread that records were published or that it must stop.
    private let signal = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)

    /// A hub whose first record will follow `lastSequence`, the store's last.
    init(store: any InstanceStore, lastSequence: Int64, settings: StreamSettings, logger: Logger) {
        self.settings = settings
        self.store = store
        self.logger = logger
        // At least a subscriber's budget: an unfiltered subscriber whose next record left the
        // ring is further behind than its budget allows.
        let capacity = max(settings.ringBytes, settings.subscriberBuffer)
        state = Mutex(HubState(ring: RecordRing(capacity: capacity, lastSequence: lastSequence)))
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

    /// Takes one committed transaction's records, in sequence order. Called by the committer only.
    func publish(_ records: [PublishedRecord]) {
        let entries = records.map { record in
            RingEntry(
                sequence: record.sequence, instance: record.instance, model: record.model, outcome: record.outcome,
                frame: ServerSentEvents.event(id: record.sequence, type: record.kind.streamEventType, data: record.json)
            )
        }
        state.withLock { state in
            for entry in entries { state.ring.append(entry) }
        }
        signal.signal()
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
            guard !state.isStopping else { throw .stopping }
            guard state.slots.count < settings.maxSubscribers else { throw .tooManySubscribers(limit: settings.maxSubscribers) }
            guard state.clients[client, default: 0] < settings.maxSubscribersPerClient else {
                throw .tooManyForClient(limit: settings.maxSubscribersPerClient)
            }
            state.nextID += 1
            state.slots[state.nextID] = Slot(filter: filter, client: client)
            state.clients[client, default: 0] += 1
            return (state.nextID, state.ring.opening(resumingAfter: lastEventID, committedThrough: committed))
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
    /// heartbeat if one is due, else, if `mayWait`, the subscription waits to be woken.
    func take(_ id: Int, _ cursor: inout RingCursor, room: Int, mayWait: Bool) -> RingTake {
        state.withLock { state in state.take(id, &cursor, room: room, mayWait: mayWait, budget: settings.subscriberBuffer) }
    }

    /// Forgets a subscription whose connection ended.
    func remove(_ id: Int) {
        state.withLock { state in
            guard let slot = state.slots.removeValue(forKey: id) else { return }
            state.waiting.remove(id, slot.filter)
            let left = state.clients[slot.client, default: 1] - 1
            state.clients[slot.client] = left > 0 ? left : nil
        }
    }

    func started(_ id: Int, waker: StreamWaker) {
        state.withLock { $0.slots[id]?.waker = waker }
    }
}

/// Where a subscription reads next in the ring.
struct RingCursor {
    /// Absolute ring index of the next entry to send.
    var next: Int
    /// Live subscriptions only: entries before this index have been counted in `pendingBytes`.
    var scanned: Int
    /// Bytes of matching records in `next..<scanned`, not yet sent.
    var pendingBytes = 0
    /// Live (cut off past its budget) rather than catching up after a resume.
    var isLive: Bool
    /// The sequence number of the last entry `next` passed, or where the subscription
    /// started: a replay from the store goes on from there if the ring loses its next entry.
    var position: Int64
    /// The hub's heartbeat count when the subscription last wrote (`nil` until its first read).
    var beats: Int?
    let filter: RecordFilter

    init(next: Int, position: Int64, isLive: Bool, filter: RecordFilter) {
        self.next = next
        self.scanned = next
        self.position = position
        self.isLive = isLive
        self.filter = filter
    }
}

/// What a subscription gets from the ring.
enum RingTake {
    /// Frames to send, in order; `last` is the sequence number of the last; `isAtEnd` when
    /// the ring has nothing more for the subscription now.
    case frames([[UInt8]], last: Int64, isAtEnd: Bool)
    /// Nothing to send, but a heartbeat is due.
    case heartbeat
    /// Nothing to send; the subscription is registered to be woken (if it was allowed to wait).
    case nothing
    /// Live, it fell further behind than its budget (or, unfiltered, than the ring, which is
    /// larger): it is closed.
    case overflow
    /// Its next record left the ring, but it may be within its budget (catching up, or a
    /// filter that few records pass): replay from the store after `position`.
    case evicted
}

/// Where a new subscription starts.
enum Opening {
    /// No resume: live from the ring's end (the last sequence number published).
    case live(index: Int, sequence: Int64)
    /// The resume point is ahead of every sequence number published, and of every one committed.
    case future(index: Int, newest: Int64)
    /// The resume point is ahead of every sequence number published but committed (by another
    /// replica): live from the ring's end, passing over the records up to it as they arrive.
    case ahead(index: Int)
    /// The ring holds every record after the resume point.
    case ring(index: Int)
    /// Older than the ring: replay from the store.
    case store
}

/// Where a replay step reads.
enum ReplaySource {
    case ring(index: Int)
    case store(through: Int64)
}

/// A record in the ring, framed for every subscriber alike.
struct RingEntry {
    let sequence: Int64
    let instance: String
    let model: String
    let outcome: Outcome?
    let frame: [UInt8]

    func passes(_ filter: RecordFilter) -> Bool {
        filter.matches(instance: instance, model: model, outcome: outcome)
    }
}

/// Recent records, oldest first, addressed by absolute index (the count of records appended
/// before), bounded in bytes: the oldest leave as new ones arrive.
struct RecordRing {
    let capacity: Int
    private var entries: [RingEntry] = []
    /// Index in `entries` of the oldest entry kept.
    private var head = 0
    /// Absolute index of the oldest entry kept.
    private(set) var firstIndex = 0
    private(set) var bytes = 0
    /// The last sequence number published.
    private(set) var lastSequence: Int64
    /// Every record published after this sequence number is in the ring.
    private(set) var coversAfter: Int64

    init(capacity: Int, lastSequence: Int64) {
        self.capacity = capacity
        self.lastSequence = lastSequence
        coversAfter = lastSequence
    }

    /// Absolute index after the newest entry.
    var endIndex: Int { firstIndex + entries.count - head }

    subscript(index: Int) -> RingEntry { entries[head + index - firstIndex] }

    /// What an entry costs beyond its frame: its strings and the array slot.
    private static func cost(_ entry: RingEntry) -> Int { entry.frame.count + entry.instance.utf8.count + entry.model.utf8.count + 96 }

    mutating func append(_ entry: RingEntry) {
        entries.append(entry)
        bytes += Self.cost(entry)
        lastSequence = entry.sequence
        while bytes > capacity, head < entries.count {
            let oldest = entries[head]
            bytes -= Self.cost(oldest)
            coversAfter = oldest.sequence
            head += 1
            firstIndex += 1
        }
        // Drop the slots of evicted entries now and then: amortised O(1) per append.
        if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The sequence number of the entry before `index` (one the ring holds, or its end).
    func sequence(before index: Int) -> Int64 {
        index > firstIndex ? self[index - 1].sequence : coversAfter
    }

    /// Where a subscription that resumes after `lastEventID` (or does not resume) starts,
    /// when the store has committed up to `committedThrough`.
    func opening(resumingAfter lastEventID: Int64?, committedThrough: Int64 = 0) -> Opening {
        guard let resume = lastEventID else { return .live(index: endIndex, sequence: lastSequence) }
        if resume > lastSequence {
            return resume <= committedThrough ? .ahead(index: endIndex) : .future(index: endIndex, newest: lastSequence)
        }
        if resume >= coversAfter { return .ring(index: firstIndex(after: resume)) }
        return .store
    }

    /// The absolute index of the first entry with a sequence number after `sequence`
    /// (``endIndex`` if none).
    func firstIndex(after sequence: Int64) -> Int {
        var low = head
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].sequence <= sequence { low = middle + 1 } else { high = middle }
        }
        return firstIndex + low - head
    }
}

/// A subscription as the hub tracks it.
struct Slot {
    let filter: RecordFilter
    /// Whose subscription it is, for the per-client limit.
    let client: String
    var waker: StreamWaker?
    /// While waiting with a filter: the ring's end when it began to wait.
    var waitingFrom: Int?
    /// Set when woken: entries from where it waited up to this index did not match it;
    /// `position` is the sequence number of the last of them.
    var skipTo: (index: Int, position: Int64)?

    init(filter: RecordFilter, client: String) {
        self.filter = filter
        self.client = client
    }
}

/// Waiting subscriptions, indexed by what they wait for, so that a record wakes the
/// subscriptions it matches without looking at the others.
struct WaitingIndex {
    /// No filter: any record wakes them, all at once; their wakers are kept here.
    private var everything: [Int: StreamWaker] = [:]
    private var byInstance: [String: Set<Int>] = [:]
    private var byModel: [String: Set<Int>] = [:]
    private var byOutcome: [Outcome: Set<Int>] = [:]

    var isEmpty: Bool { everything.isEmpty && byInstance.isEmpty && byModel.isEmpty && byOutcome.isEmpty }

    mutating func insert(_ id: Int, _ filter: RecordFilter, waker: StreamWaker) {
        if let instances = filter.instances {
            for instance in instances { byInstance[instance, default: []].insert(id) }
        } else if let model = filter.model {
            byModel[model, default: []].insert(id)
        } else if let outcomes = filter.outcomes {
            for outcome in outcomes { byOutcome[outcome, default: []].insert(id) }
        } else {
            everything[id] = waker
        }
    }

    /// Removes `id` if it waits; nothing otherwise.
    mutating func remove(_ id: Int, _ filter: RecordFilter) {
        func drop<Key: Hashable>(_ key: Key, from buckets: inout [Key: Set<Int>]) {
            buckets[key]?.remove(id)
            if buckets[key]?.isEmpty == true { buckets[key] = nil }
        }
        if let instances = filter.instances {
            for instance in instances { drop(instance, from: &byInstance) }
        } else if let model = filter.model {
            drop(model, from: &byModel)
        } else if let outcomes = filter.outcomes {
            for outcome in outcomes { drop(outcome, from: &byOutcome) }
        } else {
            everything[id] = nil
        }
    }

    /// Takes every unfiltered waiter at once: their wakers.
    mutating func takeEverything() -> Dictionary<Int, StreamWaker>.Values {
        defer { everything = [:] }
        return everything.values
    }

    /// Filtered waiters that `entry` may match (their whole filter is still to be checked).
    func candidates(for entry: RingEntry) -> [Int] {
        var ids: [Int] = []
        if let set = byInstance[entry.instance] { ids += set }
        if let set = byModel[entry.model] { ids += set }
        if let outcome = entry.outcome, let set = byOutcome[outcome] { ids += set }
        return ids
    }

    /// Takes every filtered waiter.
    mutating func takeFiltered() -> Set<Int> {
        var ids: Set<Int> = []
        for set in byInstance.values { ids.formUnion(set) }
        for set in byModel.values { ids.formUnion(set) }
        for set in byOutcome.values { ids.formUnion(set) }
        byInstance = [:]
        byModel = [:]
        byOutcome = [:]
        return ids
    }
}

/// Everything the hub's lock guards.
struct HubState {
    var ring: RecordRing
    var slots: [Int: Slot] = [:]
    /// Open subscriptions by client address (only addresses with some).
    var clients: [String: Int] = [:]
    var nextID = 0
    var waiting = WaitingIndex()
    /// Ring entries before this absolute index have been matched against the waiters.
    var dispatched = 0
    /// Heartbeat intervals elapsed.
    var beats = 0
    var overflowed = 0
    var replayPages = 0
    var isStopping = false

    /// Ring entries a reader examines per hold of the lock, so that one far behind does not
    /// hold the committer up; it goes on at its next take.
    static let scanLimit = 4096

    init(ring: RecordRing) {
        self.ring = ring
        dispatched = ring.endIndex
    }

    /// Wakes the waiters that the records published since the last round match.
    mutating func dispatch() -> [StreamWaker] {
        var wakers: [StreamWaker] = []
        if dispatched < ring.firstIndex {
            // Records left the ring before they were matched (the thread fell a whole ring
            // behind): wake every waiter; each finds out what it missed.
            wakers += waiting.takeEverything()
            for id in waiting.takeFiltered() { wakers += wake(id, skipTo: nil) }
            dispatched = ring.firstIndex
        }
        while dispatched < ring.endIndex, !waiting.isEmpty {
            let index = dispatched
            let entry = ring[index]
            // Unfiltered waiters wait at the ring's end: any new record is theirs.
            wakers += waiting.takeEverything()
            for id in waiting.candidates(for: entry) {
                guard let slot = slots[id], let from = slot.waitingFrom, from <= index, entry.passes(slot.filter) else { continue }
                waiting.remove(id, slot.filter)
                wakers += wake(id, skipTo: index)
            }
            dispatched += 1
        }
        dispatched = ring.endIndex
        return wakers
    }

    /// Counts a heartbeat interval and wakes every waiter to send one. Records up to
    /// `dispatched` have been matched against the filtered ones: none matched.
    mutating func beat() -> [StreamWaker] {
        beats += 1
        var wakers = Array(waiting.takeEverything())
        for id in waiting.takeFiltered() { wakers += wake(id, skipTo: dispatched) }
        return wakers
    }

    /// A filtered waiter woken: records from where it waited up to `skipTo` did not match it.
    private mutating func wake(_ id: Int, skipTo: Int?) -> [StreamWaker] {
        guard var slot = slots[id] else { return [] }
        if let skipTo, let from = slot.waitingFrom, skipTo > from {
            slot.skipTo = (skipTo, ring.sequence(before: skipTo))
        }
        slot.waitingFrom = nil
        slots[id] = slot
        return slot.waker.map { [$0] } ?? []
    }

    mutating func take(_ id: Int, _ cursor: inout RingCursor, room: Int, mayWait: Bool, budget: Int) -> RingTake {
        if slots[id]?.waitingFrom != nil {
            // Read before it was woken (a spurious read): it waits no more, so that no wake
            // later tells it to skip records it has since moved past.
            waiting.remove(id, cursor.filter)
            slots[id]!.waitingFrom = nil
        }
        if let skip = slots[id]?.skipTo {
            slots[id]?.skipTo = nil
            // Woken by the hub, which matched the entries from where it waited up to `skip`
            // against it: none matched. (Only a live subscription at the ring's end waits.)
            if skip.index > cursor.next, cursor.pendingBytes == 0 {
                cursor.next = skip.index
                cursor.position = max(cursor.position, skip.position)
                cursor.scanned = max(cursor.scanned, skip.index)
            }
        }
        if cursor.beats == nil { cursor.beats = beats }
        guard cursor.next >= ring.firstIndex else {
            if cursor.isLive, cursor.filter == RecordFilter() {
                overflowed += 1
                return .overflow
            }
            return .evicted
        }
        if cursor.isLive {
            let scanEnd = min(ring.endIndex, max(cursor.scanned, ring.firstIndex) + Self.scanLimit)
            while cursor.scanned < scanEnd {
                let entry = ring[cursor.scanned]
                if entry.sequence > cursor.position, entry.passes(cursor.filter) { cursor.pendingBytes += entry.frame.count }
                cursor.scanned += 1
            }
            if cursor.pendingBytes > budget {
                overflowed += 1
                return .overflow
            }
        }
        var frames: [[UInt8]] = []
        var size = 0
        var last: Int64 = 0
        while cursor.next < ring.endIndex {
            let entry = ring[cursor.next]
            // Only a subscription that resumed ahead of this replica finds entries at or
            // before its position: the client has them already.
            if entry.sequence > cursor.position, entry.passes(cursor.filter) {
                guard frames.isEmpty || size + entry.frame.count <= room else { break }
                frames.append(entry.frame)
                size += entry.frame.count
                last = entry.sequence
                if cursor.next < cursor.scanned { cursor.pendingBytes -= entry.frame.count }
            }
            cursor.position = max(cursor.position, entry.sequence)
            cursor.next += 1
            if size >= room { break }
        }
        cursor.scanned = max(cursor.scanned, cursor.next)
        let isAtEnd = cursor.next == ring.endIndex
        if isAtEnd, !cursor.isLive {
            // Caught up: from now on it is live, with a budget.
            cursor.isLive = true
        }
        if !frames.isEmpty {
            cursor.beats = beats
            return .frames(frames, last: last, isAtEnd: isAtEnd)
        }
        if let seen = cursor.beats, seen < beats {
            cursor.beats = beats
            return .heartbeat
        }
        if mayWait, let waker = slots[id]?.waker {
            slots[id]!.waitingFrom = ring.endIndex
            waiting.insert(id, cursor.filter, waker: waker)
        }
        return .nothing
    }
}
