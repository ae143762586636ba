import LifecycleKit
import LifecycleStore
import LifecycleHTTP
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// `HubState`, the value behind every stream, driven as `StreamHub` drives it (an append and a
/// `dispatch()` for each publish, a `beat()` for each heartbeat interval, a `take` for each read)
/// but as a value: no store, no socket, no thread. The stream tests cover the same decisions
/// end to end; these pin each one down at its boundary.
@Suite("hub state", .sqliteOnly("values only; opens no store"))
struct HubStateTests {
    /// A ring that holds everything these tests publish, and a budget nothing reaches.
    static let roomy = 1 << 20

    @Test("a subscription without a resume starts live at the ring's end and gets only what is published after it")
    func liveFromTheEnd() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 10))
        _ = state.publish(record(11), record(12))
        let (id, opening) = try state.subscribe(filter: RecordFilter(), client: "c", lastEventID: nil, committedThrough: 0, settings: StreamSettings())
        guard case .live(let index, let sequence) = opening else {
            Issue.record("opened \(opening)")
            return
        }
        #expect(index == 2 && sequence == 12)
        var cursor = RingCursor(next: index, position: sequence, isLive: true, filter: RecordFilter())
        #expect(state.read(id, &cursor) == .nothing)
        _ = state.publish(record(13), record(14))
        #expect(state.read(id, &cursor) == .frames([13, 14], waits: false), "not started: it has no waker to wait with")
        #expect(cursor.position == 14 && cursor.next == 4)
        let second = try state.subscribe(filter: RecordFilter(), client: "c", lastEventID: nil, committedThrough: 0, settings: StreamSettings())
        #expect(second.id != id)
        #expect(state.slots.count == 2 && state.clients == ["c": 2])
    }

    @Test("a waiting subscriber is woken once by the records published after it waited, and waits again only at the ring's end")
    func wakeOnce() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var (id, cursor) = try state.open()
        var idle = try state.open(started: false)
        #expect(state.read(id, &cursor) == .nothing)
        #expect(state.read(idle.id, &idle.cursor) == .nothing)
        #expect(state.woken(state.publish(record(1), record(2), record(3))) == [id], "once for three records; the unstarted one has no waker")
        #expect(state.woken(state.publish(record(4))) == [], "woken, it waits no more until it reads")
        #expect(state.read(id, &cursor, room: 250) == .frames([1, 2], waits: false), "not at the ring's end: no wait")
        #expect(state.woken(state.publish(record(5))) == [])
        #expect(state.read(id, &cursor) == .frames([3, 4, 5], waits: true))
        #expect(state.woken(state.publish(record(6))) == [id])
    }

    @Test("with no one waiting a publish needs no dispatch; a subscriber that waits after it is woken by later records only")
    func publishWithNoWaiter() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var (id, cursor) = try state.open(RecordFilter(instances: ["x"]))
        var needsDispatch = state.append([record(1, instance: "x"), record(2, instance: "y")])
        #expect(!needsDispatch, "no one waits: the hub's thread is not woken")
        #expect(state.dispatched == state.ring.endIndex)
        #expect(state.read(id, &cursor) == .frames([1], waits: true), "it reads what was published before it waited")
        needsDispatch = state.append([record(3, instance: "y")])
        #expect(needsDispatch, "one waits: the thread matches")
        #expect(state.woken(state.dispatch()) == [])
        needsDispatch = state.append([record(4, instance: "x")])
        #expect(needsDispatch)
        #expect(state.woken(state.dispatch()) == [id])
        #expect(state.read(id, &cursor) == .frames([4], waits: true))
        state.remove(id)
        needsDispatch = state.append([record(5, instance: "x")])
        #expect(!needsDispatch, "its subscription ended: no one waits")
    }

    @Test("a take sends whole frames that fit its room, or the first alone if it is larger")
    func room() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var (id, cursor) = try state.open()
        _ = state.publish(record(1), record(2), record(3), record(4, size: 500))
        #expect(state.read(id, &cursor, room: 150) == .frames([1], waits: false))
        #expect(state.read(id, &cursor, room: 200) == .frames([2, 3], waits: false))
        #expect(state.read(id, &cursor, room: 10) == .frames([4], waits: true))
    }

    @Test("a live subscriber past its budget of unsent matching bytes is closed with overflow; at its budget it is not")
    func overflow() throws {
        for (budget, expected) in [(300, Took.frames([1, 2, 3], waits: true)), (299, .overflow)] {
            var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
            var (id, cursor) = try state.open()
            _ = state.publish(record(1), record(2), record(3))
            #expect(state.read(id, &cursor, budget: budget) == expected, "budget \(budget)")
            #expect(state.overflowed == (expected == .overflow ? 1 : 0))
        }

        // What it was sent leaves its budget; what it has not been sent counts across takes.
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var (id, cursor) = try state.open()
        _ = state.publish(record(1), record(2), record(3))
        #expect(state.read(id, &cursor, room: 100, budget: 300) == .frames([1], waits: false))
        #expect(cursor.pendingBytes == 200)
        _ = state.publish(record(4))
        #expect(state.read(id, &cursor, room: 100, budget: 300) == .frames([2], waits: false))
        _ = state.publish(record(5), record(6))
        #expect(state.read(id, &cursor, room: 100, budget: 300) == .overflow, "3, 4, 5 and 6 unsent: 400 bytes")
    }

    @Test("a filtered subscriber's budget counts only the records that pass its filter")
    func filteredBudget() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        let filter = RecordFilter(instances: ["x"])
        var (id, cursor) = try state.open(filter)
        _ = state.publish(record(1, instance: "y"), record(2, instance: "y"), record(3, instance: "x"), record(4, instance: "y"))
        #expect(state.read(id, &cursor, budget: 150) == .frames([3], waits: true))
        _ = state.publish(record(5, instance: "x"), record(6, instance: "x"))
        #expect(state.read(id, &cursor, budget: 150) == .overflow, "two of its own records unsent: 200 bytes")
    }

    @Test("a resume catching up is never cut off for its budget, and is live (with a budget) once at the ring's end")
    func catchingUp() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        _ = state.publish(record(1), record(2), record(3), record(4), record(5))
        var (id, cursor) = try state.open(after: 1)
        #expect(!cursor.isLive && cursor.next == 1)
        #expect(state.read(id, &cursor, room: 100, budget: 150) == .frames([2], waits: false), "300 bytes behind a budget of 150")
        #expect(!cursor.isLive)
        #expect(state.read(id, &cursor, budget: 150) == .frames([3, 4, 5], waits: true))
        #expect(cursor.isLive)
        _ = state.publish(record(6), record(7))
        #expect(state.read(id, &cursor, budget: 150) == .overflow)
    }

    @Test("when its next record has left the ring: an unfiltered live subscriber overflows; a filtered or catching-up one replays from the store after its position")
    func evicted() throws {
        // A 100-byte frame costs 198 bytes in the ring: it holds five.
        var state = HubState(ring: RecordRing(capacity: 1000, lastSequence: 0))
        _ = state.publish((1...5).map { record($0) })
        var everything = try state.open()
        var filtered = try state.open(RecordFilter(model: "m"))
        var resumed = try state.open(after: 3)
        _ = state.publish((6...11).map { record($0) })
        #expect(state.ring.firstIndex == 6)

        #expect(state.read(everything.id, &everything.cursor) == .overflow)
        #expect(state.overflowed == 1)
        #expect(state.read(filtered.id, &filtered.cursor) == .evicted)
        #expect(filtered.cursor.position == 5, "the store replay goes on after 5")
        #expect(state.read(resumed.id, &resumed.cursor) == .evicted)
        #expect(resumed.cursor.position == 3)
        #expect(state.overflowed == 1, "neither is counted as an overflow")
    }

    @Test("where a resume starts: in the ring, from the store, ahead of this replica, or from the future")
    func openings() throws {
        var state = HubState(ring: RecordRing(capacity: 1000, lastSequence: 0))
        _ = state.publish((1...8).map { record($0) })
        // The ring holds 4...8, at indices 3...7: every record after 3.
        func opening(after lastEventID: Int64?, committed: Int64 = 8) throws -> String {
            let opening = try state.subscribe(filter: RecordFilter(), client: "c", lastEventID: lastEventID, committedThrough: committed, settings: StreamSettings()).opening
            return "\(opening)"
        }
        #expect(try opening(after: nil) == "\(Opening.live(index: 8, sequence: 8))")
        #expect(try opening(after: 2) == "\(Opening.store)")
        #expect(try opening(after: 3) == "\(Opening.ring(index: 3))", "every record after 3 is in the ring")
        #expect(try opening(after: 5) == "\(Opening.ring(index: 5))")
        #expect(try opening(after: 8) == "\(Opening.ring(index: 8))", "nothing to catch up")
        #expect(try opening(after: 10, committed: 10) == "\(Opening.ahead(index: 8))", "committed, not yet published here")
        #expect(try opening(after: 11, committed: 10) == "\(Opening.future(index: 8, newest: 8))")
    }

    @Test("a resume within the ring gets the records after its point; one ahead passes over those it has without counting them")
    func resumes() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        _ = state.publish((1...8).map { record($0) })
        var inRing = try state.open(after: 5)
        #expect(state.read(inRing.id, &inRing.cursor) == .frames([6, 7, 8], waits: true))

        var ahead = try state.open(after: 10, committed: 10)
        #expect(ahead.cursor.isLive)
        _ = state.publish(record(9), record(10), record(11))
        #expect(state.read(ahead.id, &ahead.cursor, budget: 150) == .frames([11], waits: true), "9 and 10 are the client's already, and not in its budget")
        #expect(ahead.cursor.position == 11)

        var future = try state.open(after: 50, committed: 11)
        #expect(future.cursor.position == 11, "reset: it goes on after the newest")
        _ = state.publish(record(12))
        #expect(state.read(future.id, &future.cursor) == .frames([12], waits: true))
    }

    @Test("the limits: in all and per client; a refusal changes nothing; an ended subscription frees its place; a stopping hub admits none")
    func limits() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        let settings = StreamSettings(maxSubscribers: 3, maxSubscribersPerClient: 2)
        func subscribe(_ client: String) throws(StreamHub.Refusal) -> Int {
            try state.subscribe(filter: RecordFilter(), client: client, lastEventID: nil, committedThrough: 0, settings: settings).id
        }
        let a1 = try subscribe("a")
        _ = try subscribe("a")
        #expect(throws: StreamHub.Refusal.tooManyForClient(limit: 2)) { try subscribe("a") }
        #expect(state.slots.count == 2 && state.clients == ["a": 2], "the refusal changed nothing")
        let b = try subscribe("b")
        #expect(throws: StreamHub.Refusal.tooManySubscribers(limit: 3)) { try subscribe("c") }
        #expect(state.clients == ["a": 2, "b": 1])

        state.remove(a1)
        state.remove(a1)
        #expect(state.clients == ["a": 1, "b": 1], "removed twice, counted once")
        state.remove(999)
        #expect(state.slots.count == 2)
        _ = try subscribe("a")
        state.remove(b)
        #expect(state.clients == ["a": 2], "a client with none is forgotten")

        state.isStopping = true
        #expect(throws: StreamHub.Refusal.stopping) { try subscribe("d") }
    }

    @Test("a removed subscription is no longer waited on nor woken, filtered or not")
    func removed() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var all = try state.open()
        var mine = try state.open(RecordFilter(instances: ["x"]))
        var kept = try state.open(RecordFilter(instances: ["x"]))
        #expect(state.read(all.id, &all.cursor) == .nothing)
        #expect(state.read(mine.id, &mine.cursor) == .nothing)
        #expect(state.read(kept.id, &kept.cursor) == .nothing)
        state.remove(all.id)
        state.remove(mine.id)
        #expect(!state.waiting.isEmpty)
        #expect(state.woken(state.publish(record(1, instance: "x"))) == [kept.id])
        #expect(state.waiting.isEmpty)
    }

    @Test("a filtered waiter is woken only by a record that passes its whole filter, told to skip those before it")
    func filteredWake() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        let filter = RecordFilter(model: "m", outcomes: [.unexpected])
        var (id, cursor) = try state.open(filter)
        var divergent = try state.open(RecordFilter(divergentOnly: true))
        var everything = try state.open()
        #expect(state.read(id, &cursor) == .nothing)
        #expect(state.read(divergent.id, &divergent.cursor) == .nothing)
        #expect(state.read(everything.id, &everything.cursor) == .nothing)

        // Its model with another outcome, and its outcome in another model: candidates by one
        // half of the filter, refused by the other.
        #expect(state.woken(state.publish(record(1, outcome: .transitioned), record(2, model: "n", outcome: .unexpected))) == [everything.id])
        #expect(state.slots[id]?.skipTo == nil)
        #expect(state.woken(state.publish(record(3, outcome: .unexpected, divergent: true))) == [id, divergent.id].sorted())
        let skip = try #require(state.slots[id]?.skipTo)
        #expect(skip.index == 2 && skip.position == 2, "records 1 and 2, at indices 0 and 1, did not match")

        #expect(state.read(id, &cursor) == .frames([3], waits: true))
        #expect(cursor.position == 3)
        #expect(state.slots[id]?.skipTo == nil && state.slots[id]?.waitingFrom == 3, "consumed; it waits at the end again")
    }

    @Test("a waiter that reads before it is woken waits no more, and is not matched against records it has passed")
    func spuriousRead() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var (id, cursor) = try state.open(RecordFilter(instances: ["x"]))
        #expect(state.read(id, &cursor) == .nothing)
        // Published, not yet dispatched, when it reads.
        state.ring.append(record(1, instance: "y"))
        state.ring.append(record(2, instance: "x"))
        state.ring.append(record(3, instance: "x"))
        #expect(state.read(id, &cursor, room: 100) == .frames([2], waits: false))
        #expect(state.waiting.isEmpty && state.slots[id]?.waitingFrom == nil)
        #expect(state.woken(state.dispatch()) == [], "records 2 and 3 match, but it does not wait")
        #expect(state.read(id, &cursor) == .frames([3], waits: true))

        // Waiting at the end (index 3), it reads record 4 before the dispatch: 4 does not wake it.
        state.ring.append(record(4, instance: "x"))
        #expect(state.read(id, &cursor) == .frames([4], waits: true))
        #expect(state.slots[id]?.waitingFrom == 4)
        #expect(state.woken(state.dispatch()) == [])
        #expect(state.woken(state.publish(record(5, instance: "y"), record(6, instance: "x"))) == [id])
        let skip = try #require(state.slots[id]?.skipTo)
        #expect(skip.index == 5 && skip.position == 5, "it waited from index 4; record 5 there did not match")
        #expect(state.read(id, &cursor) == .frames([6], waits: true))
    }

    @Test("when records leave the ring before they are matched, every waiter is woken and finds out what it missed")
    func dispatchBehindTheRing() throws {
        var state = HubState(ring: RecordRing(capacity: 1000, lastSequence: 0))
        var (id, cursor) = try state.open(RecordFilter(instances: ["x"]))
        #expect(state.read(id, &cursor) == .nothing)
        for sequence in Int64(1)...8 { state.ring.append(record(sequence, instance: "y")) }
        #expect(state.woken(state.dispatch()) == [id], "none of its records, but it cannot be told so")
        #expect(state.slots[id]?.skipTo == nil)
        #expect(state.dispatched == state.ring.endIndex)
        #expect(state.read(id, &cursor) == .evicted, "filtered: it replays from the store")
    }

    @Test("an idle subscriber gets one heartbeat per interval, none before its first read or right after frames; a filtered one passes what the hub matched")
    func heartbeats() throws {
        var state = HubState(ring: RecordRing(capacity: Self.roomy, lastSequence: 0))
        var idle = try state.open()
        var filtered = try state.open(RecordFilter(instances: ["x"]))
        #expect(state.read(idle.id, &idle.cursor) == .nothing)
        #expect(state.read(filtered.id, &filtered.cursor) == .nothing)
        #expect(state.woken(state.publish(record(1, instance: "y"), record(2, instance: "y"))) == [idle.id])
        #expect(state.read(idle.id, &idle.cursor) == .frames([1, 2], waits: true))

        var late = try state.open()
        #expect(state.woken(state.beat()) == [idle.id, filtered.id].sorted())
        #expect(state.beats == 1)
        let skip = try #require(state.slots[filtered.id]?.skipTo)
        #expect(skip.index == 2 && skip.position == 2)
        #expect(state.read(late.id, &late.cursor) == .nothing, "its first read after the beat: not idle for an interval")
        #expect(state.read(idle.id, &idle.cursor) == .heartbeat)
        #expect(state.read(idle.id, &idle.cursor) == .nothing, "one per interval")
        #expect(state.read(filtered.id, &filtered.cursor) == .heartbeat)
        #expect(filtered.cursor.next == 2 && filtered.cursor.position == 2)
        #expect(state.read(filtered.id, &filtered.cursor) == .nothing)

        #expect(state.woken(state.beat()) == [idle.id, filtered.id, late.id].sorted())
        _ = state.publish(record(3))
        #expect(state.read(late.id, &late.cursor) == .frames([3], waits: true), "a record rather than a heartbeat")
        #expect(state.read(late.id, &late.cursor) == .nothing)
    }

    @Test("a reader far behind examines at most scanLimit entries for its budget per take")
    func scanLimit() throws {
        var state = HubState(ring: RecordRing(capacity: 4 << 20, lastSequence: 0))
        var (id, cursor) = try state.open()
        let count = HubState.scanLimit + 100
        _ = state.publish((1...Int64(count)).map { record($0, size: 10) })
        #expect(state.read(id, &cursor, room: 10) == .frames([1], waits: false))
        #expect(cursor.scanned == HubState.scanLimit)
        #expect(cursor.pendingBytes == (HubState.scanLimit - 1) * 10)
        #expect(state.read(id, &cursor, room: 10) == .frames([2], waits: false))
        #expect(cursor.scanned == count)
    }
}

/// A record numbered `sequence`, whose frame of `size` bytes starts with its number.
private func record(
    _ sequence: Int64, instance: String = "a", model: String = "m", outcome: Outcome? = .transitioned, divergent: Bool = false, size: Int = 100
) -> RingEntry {
    let number = Array("\(sequence) ".utf8)
    return RingEntry(
        sequence: sequence, instance: instance, model: model, outcome: outcome, isDivergent: divergent,
        frame: number + [UInt8](repeating: UInt8(ascii: "."), count: max(0, size - number.count))
    )
}

/// What a take gave, comparable: the numbers of the frames, or the case.
enum Took: Equatable {
    case frames([Int64], waits: Bool)
    case heartbeat
    case nothing
    case overflow
    case evicted
}

extension HubState {
    /// Publishes as `StreamHub` does (appends), then dispatches as its thread does if it is
    /// woken: the wakers.
    mutating func publish(_ entries: RingEntry...) -> [StreamWaker] {
        publish(entries)
    }

    mutating func publish(_ entries: [RingEntry]) -> [StreamWaker] {
        append(entries) ? dispatch() : []
    }

    /// Subscribes as `StreamHub` does, with its default limits, and opens as the reader does
    /// (`started`: its connection is open, with a waker): its id and cursor in the ring.
    mutating func open(
        _ filter: RecordFilter = RecordFilter(), client: String = "c", after lastEventID: Int64? = nil, committed: Int64 = 0, started: Bool = true
    ) throws -> (id: Int, cursor: RingCursor) {
        let (id, opening) = try subscribe(filter: filter, client: client, lastEventID: lastEventID, committedThrough: committed, settings: StreamSettings())
        if started { slots[id]?.waker = StreamWaker {} }
        let cursor: RingCursor? = switch opening {
        case .live(let index, let sequence): RingCursor(next: index, position: sequence, isLive: true, filter: filter)
        case .future(let index, let newest): RingCursor(next: index, position: newest, isLive: true, filter: filter)
        case .ahead(let index): RingCursor(next: index, position: lastEventID ?? 0, isLive: true, filter: filter)
        case .ring(let index): RingCursor(next: index, position: lastEventID ?? 0, isLive: false, filter: filter)
        case .store: nil
        }
        return (id, try #require(cursor, "opens in the ring, not the store"))
    }

    /// A take, as the sequence numbers of its frames or its case.
    mutating func read(_ id: Int, _ cursor: inout RingCursor, room: Int = 1 << 20, budget: Int = 1 << 20) -> Took {
        switch take(id, &cursor, room: room, budget: budget) {
        case .frames(let frames, let last, let waits):
            let numbers = frames.map { frame in Int64(String(decoding: frame.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)) ?? -1 }
            #expect(last == numbers.last, "last names the last frame")
            return .frames(numbers, waits: waits)
        case .heartbeat: return .heartbeat
        case .nothing: return .nothing
        case .overflow: return .overflow
        case .evicted: return .evicted
        }
    }

    /// The subscriptions `wakers` wake, by id, sorted: one id per waker, so a subscription
    /// woken twice is there twice, and -1 for a waker no open subscription has.
    func woken(_ wakers: [StreamWaker]) -> [Int] {
        wakers.map { waker in slots.first { $0.value.waker === waker }?.key ?? -1 }.sorted()
    }
}
