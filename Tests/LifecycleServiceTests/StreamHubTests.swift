import Foundation
import LifecycleTestSupport
import LifecycleStore
import LifecycleLog
import LifecycleHTTP
import LifecycleLocks
import Testing
@testable import LifecycleService

/// Every record the store keeps (creation and deletion records too), by sequence number, as
/// stored: what a stream must send byte for byte.
func storedRecords(_ store: any InstanceStore, through last: Int64) throws -> [Int64: String] {
    var records: [Int64: String] = [:]
    var after: Int64 = 0
    while after < last {
        let page = try store.replay(after: after, through: last, filter: RecordFilter(), limit: PageLimit(records: 1000))
        for record in page.records { records[record.sequence] = String(decoding: record.json, as: UTF8.self) }
        after = page.coveredThrough
    }
    return records
}

/// Posts the app cycle to `id`, `count` events, and returns the sequence numbers answered.
func postCycle(_ c: some APIClient, _ id: String, count: Int, from start: Int = 0) throws -> [Int64] {
    try (start..<(start + count)).map { i in
        let response = try c.event(id, #"{"event": "\#(appCycle[i % appCycle.count])"}"#)
        guard response.status == 200, let sequence = sequence(of: response) else {
            throw HTTPClientError(description: "event refused: \(response.status) \(response.text)")
        }
        return sequence
    }
}

@Suite("stream hub")
struct StreamHubTests {
    @Test("a client resuming on a replica that lags behind the one it came from gets exactly the records after its last one, once they arrive")
    func resumeAheadOfThisReplica() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("ahead", events: coldStart)
        let store = server.service!.store
        let last = store.lastSequence
        #expect(last == 4)
        // A hub that has published up to 1 of the 4 committed records, as a replica that has
        // not caught up yet; its client has 3 from a replica that had.
        let hub = StreamHub(store: store, lastSequence: 1, settings: StreamSettings(), logger: LineLogger(level: .error))
        defer { hub.stop() }
        let resumed = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 3))
        let beyond = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: last + 10))
        resumed.readAvailable()
        #expect(resumed.records.isEmpty)
        #expect(!resumed.events.contains { $0.type == "reset" }, "a committed resume point is no reset")

        let page = try store.replay(after: 1, through: last, filter: RecordFilter(), limit: PageLimit(records: 100))
        hub.publish(page.records)
        let deadline = Date().addingTimeInterval(10)
        while resumed.records.isEmpty, Date() < deadline { resumed.readAvailable() }
        #expect(resumed.records.map(\.id) == [last], "records 2 and 3 are passed over, 4 is sent")
        beyond.readAvailable()
        #expect(beyond.events.contains { $0.type == "reset" }, "a resume point beyond every committed record is reset")
    }

    @Test("8 posters, 100 subscriptions: each gets every committed record once, in order, as stored")
    func everyRecordInOrder() throws {
        let server = try TestServer()
        let hub = server.service!.hub
        let setup = try server.connect()
        for poster in 0..<8 { try setup.makeInstance("poster-\(poster)", events: coldStart) }

        // Four reading threads of 25 subscriptions each, reading as the server would.
        let goal = LockedValue<Int64>(.max)
        let subscribed = DispatchGroup()
        let reading = DispatchGroup()
        let streams = LockedValue<[[StreamEvent]]>([])
        let refusals = LockedValue<[String]>([])
        for _ in 0..<4 {
            subscribed.enter()
            reading.enter()
            Thread.detachNewThread {
                defer { reading.leave() }
                let woken = DispatchSemaphore(value: 0)
                var readers: [StreamReader] = []
                do {
                    for _ in 0..<25 { readers.append(StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: nil), woken: woken)) }
                } catch {
                    refusals.withLock { $0.append("\(error)") }
                }
                subscribed.leave()
                let deadline = Date().addingTimeInterval(90)
                while Date() < deadline {
                    for reader in readers { reader.readAvailable() }
                    let target = goal.withLock { $0 }
                    if readers.allSatisfy({ ($0.lastRecordID ?? 0) >= target }) { break }
                    _ = woken.wait(timeout: .now() + 0.2)
                }
                streams.withLock { $0 += readers.map(\.events) }
            }
        }
        subscribed.wait()
        let start = hub.lastSequence
        let acknowledged = runClients(8, port: server.port) { client, c in
            try postCycle(c, "poster-\(client)", count: 40).map { Acknowledged(instance: "poster-\(client)", version: 0, sequence: Int($0)) }
        }.flatMap { $0 }
        let end = hub.lastSequence
        goal.withLock { $0 = end }
        #expect(reading.wait(timeout: .now() + 120) == .success)
        #expect(refusals.withLock { $0 } == [])
        #expect(acknowledged.count == 320)
        #expect(Set(acknowledged.map { Int64($0.sequence) }) == Set(start + 1...end), "every number after the start is an acknowledged record")

        let stored = try storedRecords(server.service!.store, through: end)
        let received = streams.withLock { $0 }
        #expect(received.count == 100)
        for events in received {
            #expect(events.first?.retry == 2000, "a stream opens with retry")
            #expect(events.dropFirst().first == StreamEvent(id: start), "then the position it starts from")
            let records = events.filter(\.isRecord)
            #expect(records.map { $0.id! } == Array(start + 1...end))
            #expect(records.allSatisfy { $0.type == "record" && $0.data == stored[$0.id!] }, "data is the stored JSON")
            if records.map({ $0.id! }) != Array(start + 1...end) { break }
        }
    }

    @Test("resumes at seeded random points while posting goes on get exactly the records after them, from the store or the ring")
    func resumeWhilePosting() throws {
        // A small ring (about 150 records): most resumes replay from the store first, and
        // switch to the ring while commits go on.
        let server = try TestServer {
            $0.streamRing = 65536
            $0.streamBuffer = 65536
        }
        let hub = server.service!.hub
        let c = try server.connect()
        for poster in 0..<4 {
            try c.makeInstance("r-\(poster)", events: coldStart)
            _ = try postCycle(c, "r-\(poster)", count: 150)
        }

        // Four posters, 100 events each; the first 60 two at a time, each pair once the next
        // subscription has begun its replay, so that every switch to the ring races commits.
        let stages = 30
        let stage = DispatchSemaphore(value: 0)
        let posting = DispatchGroup()
        posting.enter()
        let port = server.port
        Thread.detachNewThread {
            defer { posting.leave() }
            _ = runClients(4, port: port) { client, c in
                var answered: [Acknowledged] = []
                for i in 0..<100 {
                    if i % 2 == 0, i / 2 < stages { stage.wait() }
                    let sequence = try postCycle(c, "r-\(client)", count: 1, from: 150 + i)[0]
                    answered.append(Acknowledged(instance: "r-\(client)", version: 0, sequence: Int(sequence)))
                }
                return answered
            }
        }
        var generator = SeededGenerator(state: 7)
        var readers: [(after: Int64, reader: ResumingReader)] = []
        let deadline = Date().addingTimeInterval(60)
        for _ in 0..<stages {
            let published = hub.lastSequence
            let after = Int64.random(in: 0...published, using: &generator)
            // One read of 4 KiB now, about ten records: the rest of its replay, and its switch
            // to the ring, while the next commits land.
            let reader = try ResumingReader(hub, after: after, bufferSize: 4096)
            try reader.readOnce()
            readers.append((after, reader))
            for _ in 0..<4 { stage.signal() }
            while hub.lastSequence < published + 8, Date() < deadline {
                for (_, reader) in readers { try reader.readAvailable() }
            }
        }
        // Reading on, as clients do, while the posts go on.
        while posting.wait(timeout: .now()) == .timedOut, Date() < deadline {
            for (_, reader) in readers { try reader.readAvailable() }
        }
        #expect(posting.wait(timeout: .now() + 60) == .success)
        let end = hub.lastSequence
        #expect(end == 4 * 154 + 400, "4 creations, 4 × 153 records, then 400 more")
        let stored = try storedRecords(server.service!.store, through: end)
        for (after, reader) in readers {
            try reader.read(through: end)
            #expect(reader.records.map { $0.id! } == Array((after + 1)...end), "resumed after \(after)")
            #expect(reader.records.allSatisfy { $0.data == stored[$0.id!] })
        }
        #expect(hub.replayPagesRead > 0, "some resumes replayed from the store")
    }

    @Test("a resume within the ring reads no store page; one after a restart replays from the store, then goes on live")
    func ringAndRestart() throws {
        let server = try TestServer(.router)
        var c = server.router()
        try c.makeInstance("a", events: coldStart)
        try c.makeInstance("d", model: "android-activity", events: [])
        _ = try c.request("POST", "/v1/instances/d/events", json: #"{"event": "onCreate"}"#)
        _ = try postCycle(c, "a", count: 40)
        var hub = server.service!.hub
        let last = hub.lastSequence

        let pages = hub.replayPagesRead
        let recent = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: last - 20))
        try recent.read(through: last)
        #expect(recent.records.map { $0.id! } == Array((last - 19)...last))
        #expect(hub.replayPagesRead == pages, "served from the ring")

        let stored = try storedRecords(server.service!.store, through: last)
        try server.restart()
        c = server.router()
        hub = server.service!.hub
        let everything = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 0))
        let onlyD = StreamReader(try hub.subscribe(filter: RecordFilter(instances: ["d"]), lastEventID: 0))
        try everything.read(through: last)
        #expect(everything.records.map { $0.id! } == Array(1...last))
        #expect(everything.records.allSatisfy { $0.data == stored[$0.id!] })
        #expect(everything.records.first?.type == "created")
        #expect(hub.replayPagesRead > 0, "the ring is empty after a restart: the store served it")

        // Live after the replay, with no gap: the next record follows.
        let next = try #require(sequence(of: try c.request("POST", "/v1/instances/d/events", json: #"{"event": "onStart"}"#)))
        #expect(next == last + 1)
        try everything.read(through: next)
        try onlyD.read(through: next)
        #expect(everything.records.map { $0.id! } == Array(1...next))
        #expect(onlyD.records.map(\.type) == ["created", "record", "record"])
        #expect(onlyD.records.allSatisfy { $0.json["instance"] as? String == "d" })
    }

    @Test("filters by model, instances and outcome: the same records live and replayed from the store")
    func filters() throws {
        let server = try TestServer(.router)
        var hub = server.service!.hub
        let filters: [(RecordFilter, ([String: Any]) -> Bool)] = [
            (RecordFilter(model: "android-activity"), { $0["model"] as? String == "android-activity" }),
            (RecordFilter(instances: ["a"]), { $0["instance"] as? String == "a" }),
            (RecordFilter(instances: ["a", "b"]), { ["a", "b"].contains($0["instance"] as? String) }),
            (RecordFilter(outcomes: [.unexpected]), { $0["outcome"] as? String == "unexpected" }),
            (RecordFilter(model: "ios-app", outcomes: [.transitioned, .ignored]), {
                $0["model"] as? String == "ios-app" && ["transitioned", "ignored"].contains($0["outcome"] as? String)
            }),
            (RecordFilter(instances: ["a", "d"], outcomes: [.stayed, .transitioned]), {
                ["a", "d"].contains($0["instance"] as? String) && ["stayed", "transitioned"].contains($0["outcome"] as? String)
            }),
        ]
        let all = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: nil))
        let live = try filters.map { StreamReader(try hub.subscribe(filter: $0.0, lastEventID: nil)) }

        let c = server.router()
        try c.makeInstance("a", events: coldStart + ["willResignActive"])
        try c.makeInstance("b", events: ["didFinishLaunching"])
        try c.makeInstance("d", model: "android-activity")
        #expect(try c.event("a", #"{"event": "didFinishLaunching"}"#).status == 409)
        #expect(try c.request("POST", "/v1/instances/b/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#).status == 200)
        for event in ["onCreate", "onStart", "onResume"] {
            #expect(try c.request("POST", "/v1/instances/d/events", json: #"{"event": "\#(event)"}"#).status == 200)
        }
        #expect(try c.event("b", #"{"event": "willConnectToWindow", "window": "main"}"#).status == 200)
        #expect(try c.event("b", #"{"event": "willEnterForeground"}"#).status == 200, "ignored in connected")
        #expect(try c.request("POST", "/v1/instances/a/relaunches").status == 200)
        #expect(try c.request("DELETE", "/v1/instances/b").status == 204)
        let end = hub.lastSequence

        try all.read(through: end)
        #expect(all.records.map { $0.id! } == Array(1...end))
        #expect(Set(all.records.map { $0.type! }) == ["created", "record", "action", "relaunch", "deleted"])
        // Each record with its model (from its instance's creation), as the filters see it.
        var models: [String: String] = [:]
        let described: [(id: Int64, fields: [String: Any])] = all.records.map { event in
            var fields = event.json
            if let model = fields["model"] as? String { models[fields["instance"] as! String] = model }
            fields["model"] = models[fields["instance"] as! String]
            return (event.id!, fields)
        }
        for ((filter, passes), reader) in zip(filters, live) {
            try reader.read(until: { _ in true })
            let expected = described.filter { passes($0.fields) }.map(\.id)
            #expect(!expected.isEmpty, "\(filter)")
            #expect(reader.records.map { $0.id! } == expected, "live, \(filter)")
        }

        // From the store: b's records went with it, all but its deletion.
        try server.restart()
        hub = server.service!.hub
        for (filter, passes) in filters {
            let replay = StreamReader(try hub.subscribe(filter: filter, lastEventID: 0))
            try replay.read(until: { $0.waits > 0 })
            let expected = described.filter { passes($0.fields) && ($0.fields["instance"] as? String != "b" || $0.fields["kind"] as? String == "deleted") }
            #expect(replay.records.map { $0.id! } == expected.map(\.id), "replayed, \(filter)")
        }
    }

    @Test("a filtered subscriber whose place left the ring is not cut off: woken from the ring, or replayed from the store")
    func filteredBehindTheRing() throws {
        let server = try TestServer(.router) {
            $0.streamRing = 65536
            $0.streamBuffer = 4096
        }
        let hub = server.service!.hub
        let waiting = StreamReader(try hub.subscribe(filter: RecordFilter(instances: ["quiet"]), lastEventID: nil))
        waiting.readAvailable()
        #expect(waiting.waits == 1)
        let unread = StreamReader(try hub.subscribe(filter: RecordFilter(instances: ["quiet"]), lastEventID: nil))
        let c = server.router()
        // About three rings of other records: both places leave the ring.
        try c.makeInstance("busy", events: coldStart)
        _ = try postCycle(c, "busy", count: 400)
        try c.makeInstance("quiet")
        let created = hub.lastSequence
        let pages = hub.replayPagesRead

        // Waiting, it was passed over by every record until its own woke it; as the server
        // does, it reads once woken.
        waiting.waitForWake(timeout: 30)
        try waiting.read(through: created)
        #expect(waiting.records.map { $0.id! } == [created])
        #expect(hub.replayPagesRead == pages, "woken straight at its record")
        // Not reading, it had no place to jump to: it replays from the store instead.
        try unread.read(through: created)
        #expect(unread.records.map { $0.id! } == [created])
        #expect(hub.replayPagesRead > pages)
        #expect(!waiting.hasEnded && !unread.hasEnded && hub.overflowCount == 0)
    }

    @Test("a subscriber that stops reading past its budget gets event: overflow naming its last record, then the end; a resume gets the rest")
    func overflow() throws {
        let server = try TestServer(.router) { $0.streamBuffer = 4096 }
        let hub = server.service!.hub
        let c = server.router()
        try c.makeInstance("slow", events: coldStart)
        let reader = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: nil))
        reader.readAvailable()
        let start = hub.lastSequence
        let first = try postCycle(c, "slow", count: 1)[0]
        try reader.read(through: first)

        // It stops reading while about 12 KiB of records are committed, three times its budget:
        // the writes go on regardless.
        let more = try postCycle(c, "slow", count: 30, from: 1)
        #expect(more.count == 30 && hub.overflowCount == 0)
        try reader.read(until: { $0.hasEnded })
        #expect(reader.records.map { $0.id! } == [first])
        let last = try #require(reader.events.last)
        #expect(last.type == "overflow" && last.id == first)
        #expect(last.json["lastEventId"] as? Int == Int(first))
        #expect(hub.overflowCount == 1)
        #expect(start < first)

        // Reconnecting with its last id replays the rest, more than its budget, then goes on live.
        let resumed = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: first))
        try resumed.read(through: more.last!)
        #expect(resumed.records.map { $0.id! } == more)
        let next = try postCycle(c, "slow", count: 1, from: 31)[0]
        try resumed.read(through: next)
        #expect(resumed.records.map { $0.id! } == more + [next] && !resumed.hasEnded)
        #expect(hub.overflowCount == 1)
    }

    @Test("a resume behind retention first says what was dropped; one from the future says so and goes on live")
    func gapAndFuture() throws {
        let server = try TestServer(.router) { $0.historyLimit = 2 }
        let c = server.router()
        try c.makeInstance("short", events: coldStart)
        let sequences = try postCycle(c, "short", count: 4)
        // Creation is 1, the cold start 2-4, the cycle 5-8; versions 1-5 (numbers 1-6 with
        // the creation) are dropped, 7 and 8 kept.
        #expect(sequences == [5, 6, 7, 8])
        try server.restart()
        let hub = server.service!.hub

        let behind = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 0))
        try behind.read(through: 8)
        let gap = try #require(behind.events.dropFirst().first)
        #expect(gap.type == "gap" && gap.id == nil)
        #expect(gap.data == #"{"lastEventId":0,"droppedThrough":6,"oldest":7,"newest":8}"#)
        #expect(behind.records.map { $0.id! } == [7, 8])

        let after = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 6))
        try after.read(through: 8)
        #expect(after.records.map { $0.id! } == [7, 8])
        #expect(!after.events.contains { $0.type == "gap" }, "nothing after 6 was dropped")

        let future = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 100))
        future.readAvailable()
        let reset = try #require(future.events.dropFirst().first)
        #expect(reset.type == "reset" && reset.id == 8)
        #expect(reset.data == #"{"lastEventId":100,"newest":8,"oldest":7}"#)
        let c2 = server.router()
        let next = try postCycle(c2, "short", count: 1, from: 4)[0]
        try future.read(through: next)
        #expect(future.records.map { $0.id! } == [9])
    }

    @Test("creation and deletion are numbered records; after a restart only the deletion of a deleted instance replays")
    func creationAndDeletion() throws {
        let server = try TestServer(.router)
        var hub = server.service!.hub
        let reader = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: nil))
        let c = server.router()
        #expect(try c.request("PUT", "/v1/instances/x", json: #"{"model": "ios-app"}"#).status == 201)
        #expect(try c.event("x", #"{"event": "didFinishLaunching"}"#).status == 200)
        #expect(try c.request("DELETE", "/v1/instances/x").status == 204)
        try reader.read(through: 3)
        let records = reader.records
        #expect(records.map(\.type) == ["created", "record", "deleted"])
        #expect(records.map { $0.id! } == [1, 2, 3])
        #expect(records[0].data?.hasPrefix(#"{"sequence":1,"instance":"x","version":0,"kind":"created","model":"ios-app","state":"initializing","time":""#) == true)
        #expect(records[1].data?.hasPrefix(#"{"sequence":2,"instance":"x","version":1,"kind":"event","event":"didFinishLaunching","#) == true)
        #expect(records[2].data?.hasPrefix(#"{"sequence":3,"instance":"x","version":1,"kind":"deleted","model":"ios-app","state":"launching","time":""#) == true)
        #expect(records.allSatisfy { ($0.json["time"] as? String)?.hasSuffix("Z") == true })
        #expect(try c.request("GET", "/v1/instances/x/history").status == 404, "the history went with the instance")

        try server.restart()
        hub = server.service!.hub
        let replay = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: 0))
        try replay.read(through: 3)
        #expect(replay.records == [records[2]], "the deletion replays; the deleted instance's records do not")
    }

    @Test("an idle stream gets a heartbeat comment every interval")
    func heartbeat() throws {
        let server = try TestServer(.router) { $0.heartbeat = 0.05 }
        let hub = server.service!.hub
        let idle = StreamReader(try hub.subscribe(filter: RecordFilter(instances: ["nobody"]), lastEventID: nil))
        try idle.read(until: { $0.events.filter { $0.comment == "heartbeat" }.count >= 3 }, timeout: 20)
        #expect(idle.events.filter { $0.comment == "heartbeat" }.count >= 3)
        #expect(idle.records.isEmpty && !idle.hasEnded)
        // Still woken by a record that matches, between heartbeats.
        let c = server.router()
        try c.makeInstance("nobody")
        try idle.read(through: hub.lastSequence)
        #expect(idle.records.map(\.type) == ["created"])
    }

    @Test("a failed group commit publishes only what was committed: retried halves, in order, nothing rolled back", .sqliteOnly("a trigger in the SQLite file fails the writes"))
    func failedBatchPublishesCommitsOnly() throws {
        let server = try TestServer(.router)
        let c = server.router()
        for id in ["h0", "h1", "h2", "bad"] { try c.makeInstance(id, events: coldStart) }
        // The failure comes after every record of the batch is written, when the instances
        // are stored: each record was numbered and written in a transaction that rolls back.
        try poison(server, "poison", "BEFORE UPDATE ON instances WHEN NEW.id = 'bad'")
        let hub = server.service!.hub
        let reader = StreamReader(try hub.subscribe(filter: RecordFilter(), lastEventID: nil))
        let start = hub.lastSequence

        let answers = try commitAsOneBatch(server.service!.registry, [
            event("willResignActive", on: "h0"),
            event("willResignActive", on: "bad"),
            .create(id: "fresh", model: "ios-app", isPut: false, key: nil),
            event("didEnterBackground", on: "h1"),
            .apply(.action("openURL", ["url": .string("https://duckduckgo.com")]), id: "bad", expected: nil, key: nil),
            .delete(id: "h2", expected: nil),
        ])
        #expect(answers.map(\.status) == [200, 503, 201, 200, 503, 204])
        let end = hub.lastSequence
        #expect(end == start + 4, "two events, a creation and a deletion")
        try reader.read(through: end)
        let records = reader.records
        #expect(records.map { $0.id! } == Array((start + 1)...end), "each committed number once, in order")
        #expect(records.map { $0.json["instance"] as? String } == ["h0", "fresh", "h1", "h2"])
        #expect(records.map(\.type) == ["record", "created", "record", "deleted"])
        let acknowledged = answers.compactMap { $0.json["sequence"] as? Int }.map(Int64.init)
        #expect(Set(acknowledged).isSubset(of: Set(records.map { $0.id! })))
    }

    @Test("past the subscriber limit a subscription is refused, until one ends")
    func subscriberLimit() throws {
        let server = try TestServer(.router) { $0.maxSubscribers = 3 }
        let hub = server.service!.hub
        let open = try (0..<3).map { _ in try hub.subscribe(filter: RecordFilter(), lastEventID: nil) }
        #expect(hub.subscriberCount == 3)
        #expect(throws: StreamHub.Refusal.tooManySubscribers(limit: 3)) { try hub.subscribe(filter: RecordFilter(), lastEventID: nil) }
        open[0].finish()
        #expect(hub.subscriberCount == 2)
        let again = try hub.subscribe(filter: RecordFilter(), lastEventID: nil)
        #expect(hub.subscriberCount == 3)
        for subscription in open.dropFirst() + [again] { subscription.finish() }
        #expect(hub.subscriberCount == 0)
    }

    @Test("past the per-client limit (--max-connections-per-client) a client's subscription is refused, until one of its own ends; other clients are not")
    func perClientLimit() throws {
        let server = try TestServer(.router) { $0.maxConnectionsPerClient = 2 }
        let hub = server.service!.hub
        let open = try (0..<2).map { _ in try hub.subscribe(filter: RecordFilter(), lastEventID: nil, client: "203.0.113.7") }
        #expect(throws: StreamHub.Refusal.tooManyForClient(limit: 2)) { try hub.subscribe(filter: RecordFilter(), lastEventID: nil, client: "203.0.113.7") }
        let other = try hub.subscribe(filter: RecordFilter(), lastEventID: nil, client: "203.0.113.8")
        other.finish()
        #expect(throws: StreamHub.Refusal.tooManyForClient(limit: 2)) { try hub.subscribe(filter: RecordFilter(), lastEventID: nil, client: "203.0.113.7") }
        open[0].finish()
        let again = try hub.subscribe(filter: RecordFilter(), lastEventID: nil, client: "203.0.113.7")
        for subscription in [open[1], again] { subscription.finish() }
        #expect(hub.subscriberCount == 0)
    }
}

@Suite("stream settings", .sqliteOnly("parses flags; opens no store"))
struct StreamSettingsTests {
    @Test("--heartbeat, --stream-buffer, --stream-ring and --max-subscribers: defaults, flags, variables, refusals, help")
    func settings() throws {
        let defaults = try Configuration.parse(arguments: [], environment: [:])
        #expect(defaults.heartbeat == 15 && defaults.streamBuffer == 262_144 && defaults.streamRing == 16_777_216 && defaults.maxSubscribers == 20_000)
        let given = try Configuration.parse(
            arguments: ["--heartbeat", "0.25", "--stream-buffer=65536", "--max-subscribers", "12"],
            environment: ["LIFECYCLED_STREAM_RING": "1048576", "LIFECYCLED_HEARTBEAT": "30"]
        )
        #expect(given.heartbeat == 0.25 && given.streamBuffer == 65536 && given.streamRing == 1_048_576 && given.maxSubscribers == 12)
        let settings = given.streamSettings
        #expect(settings.heartbeat == .milliseconds(250) && settings.subscriberBuffer == 65536 && settings.ringBytes == 1_048_576 && settings.maxSubscribers == 12)
        for (flag, value) in [("--heartbeat", "0"), ("--heartbeat", "soon"), ("--stream-buffer", "1024"), ("--stream-ring", "4096"), ("--max-subscribers", "0")] {
            #expect(throws: Configuration.ParseError.badValue(flag, value)) { try Configuration.parse(arguments: [flag, value], environment: [:]) }
        }
        for text in ["--heartbeat SECONDS", "LIFECYCLED_HEARTBEAT", "--stream-buffer BYTES", "LIFECYCLED_STREAM_BUFFER", "--stream-ring BYTES", "LIFECYCLED_STREAM_RING", "--max-subscribers N", "LIFECYCLED_MAX_SUBSCRIBERS"] {
            #expect(Configuration.usage.contains(text), "\(text)")
        }
    }
}
