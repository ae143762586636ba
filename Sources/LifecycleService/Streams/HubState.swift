import LifecycleKit
import LifecycleStore
import LifecycleHTTP

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
    /// Frames to send, in order; `last` is the sequence number of the last; `waits` when
    /// the ring has nothing more for the subscription now and it is registered to be woken.
    case frames([[UInt8]], last: Int64, waits: Bool)
    /// Nothing to send, but a heartbeat is due.
    case heartbeat
    /// Nothing to send; the subscription is registered to be woken (once started).
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
    private var divergent: Set<Int> = []

    var isEmpty: Bool { everything.isEmpty && byInstance.isEmpty && byModel.isEmpty && byOutcome.isEmpty && divergent.isEmpty }

    mutating func insert(_ id: Int, _ filter: RecordFilter, waker: StreamWaker) {
        if let instances = filter.instances {
            for instance in instances { byInstance[instance, default: []].insert(id) }
        } else if let model = filter.model {
            byModel[model, default: []].insert(id)
        } else if let outcomes = filter.outcomes {
            for outcome in outcomes { byOutcome[outcome, default: []].insert(id) }
        } else if filter.divergentOnly {
            divergent.insert(id)
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
        } else if filter.divergentOnly {
            divergent.remove(id)
        } else {
            everything[id] = nil
        }
    }

    /// Takes every unfiltered waiter at once: their wakers. The table keeps its capacity,
    /// as the same subscribers wait again after each record.
    mutating func takeEverything() -> [StreamWaker] {
        defer { everything.removeAll(keepingCapacity: true) }
        return Array(everything.values)
    }

    /// Filtered waiters that `entry` may match (their whole filter is still to be checked).
    func candidates(for entry: RingEntry) -> [Int] {
        var ids: [Int] = []
        if let set = byInstance[entry.instance] { ids += set }
        if let set = byModel[entry.model] { ids += set }
        if let outcome = entry.outcome, let set = byOutcome[outcome] { ids += set }
        if entry.isDivergent { ids += divergent }
        return ids
    }

    /// Takes every filtered waiter.
    mutating func takeFiltered() -> Set<Int> {
        var ids: Set<Int> = []
        for set in byInstance.values { ids.formUnion(set) }
        for set in byModel.values { ids.formUnion(set) }
        for set in byOutcome.values { ids.formUnion(set) }
        ids.formUnion(divergent)
        byInstance = [:]
        byModel = [:]
        byOutcome = [:]
        divergent = []
        return ids
    }
}

/// Everything the hub's lock guards, with its transitions: each takes what the hub was asked
/// and returns what it must do (the wakers to call, the frames to send); none waits or reads the store.
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

    /// Admits a subscription to the records that pass `filter` for `client`, within the
    /// limits of `settings`: its id and where it starts, when it resumes after `lastEventID`
    /// and the store has committed through `committedThrough`.
    mutating func subscribe(
        filter: RecordFilter, client: String, lastEventID: Int64?, committedThrough: Int64, settings: StreamSettings
    ) throws(StreamHub.Refusal) -> (id: Int, opening: Opening) {
        guard !isStopping else { throw .stopping }
        guard slots.count < settings.maxSubscribers else { throw .tooManySubscribers(limit: settings.maxSubscribers) }
        guard clients[client, default: 0] < settings.maxSubscribersPerClient else {
            throw .tooManyForClient(limit: settings.maxSubscribersPerClient)
        }
        nextID += 1
        slots[nextID] = Slot(filter: filter, client: client)
        clients[client, default: 0] += 1
        return (nextID, ring.opening(resumingAfter: lastEventID, committedThrough: committedThrough))
    }

    /// Forgets subscription `id`, whether or not it waits.
    mutating func remove(_ id: Int) {
        guard let slot = slots.removeValue(forKey: id) else { return }
        waiting.remove(id, slot.filter)
        let left = clients[slot.client, default: 1] - 1
        clients[slot.client] = left > 0 ? left : nil
    }

    /// Appends one transaction's records to the ring; whether the hub's thread must match
    /// them against waiters (``dispatch()``). With none waiting there is nothing to match:
    /// they count as dispatched now (a subscription that waits later waits at the ring's end,
    /// after them), and with no stream open a commit wakes no thread.
    mutating func append(_ entries: [RingEntry]) -> Bool {
        for entry in entries { ring.append(entry) }
        guard waiting.isEmpty else { return true }
        dispatched = ring.endIndex
        return false
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

    mutating func take(_ id: Int, _ cursor: inout RingCursor, room: Int, budget: Int) -> RingTake {
        // One lookup; the slot is read and changed in place through it (a copy would retain
        // its filter, client and waker).
        let slot = slots.index(forKey: id)
        let (wasWaiting, skipTo) = slot.map { index in
            inPlace(&slots.values[index]) { slot in
                defer { (slot.waitingFrom, slot.skipTo) = (nil, nil) }
                return (slot.waitingFrom != nil, slot.skipTo)
            }
        } ?? (false, nil)
        if wasWaiting {
            // Read before it was woken (a spurious read): it waits no more, so that no wake
            // later tells it to skip records it has since moved past.
            waiting.remove(id, cursor.filter)
        }
        if let skip = skipTo {
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
            return .frames(frames, last: last, waits: isAtEnd && wait(id, at: slot, cursor.filter))
        }
        if let seen = cursor.beats, seen < beats {
            cursor.beats = beats
            return .heartbeat
        }
        _ = wait(id, at: slot, cursor.filter)
        return .nothing
    }

    /// Registers subscription `id` (at `slot` in `slots`), at the ring's end, to be woken;
    /// false if it has no waker yet.
    private mutating func wait(_ id: Int, at slot: Dictionary<Int, Slot>.Index?, _ filter: RecordFilter) -> Bool {
        let end = ring.endIndex
        guard let slot, let waker = inPlace(&slots.values[slot], { slot -> StreamWaker? in
            if slot.waker != nil { slot.waitingFrom = end }
            return slot.waker
        }) else { return false }
        waiting.insert(id, filter, waker: waker)
        return true
    }
}

/// Runs `body` on `value` in place: through a collection's element, without copying it out.
private func inPlace<Value, Result>(_ value: inout Value, _ body: (inout Value) -> Result) -> Result {
    body(&value)
}
