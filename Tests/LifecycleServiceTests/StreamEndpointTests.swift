import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

/// The two event streams end to end: the real service, real sockets, a client that parses
/// chunked `text/event-stream` the way a browser does.
@Suite("event streams over HTTP")
struct StreamEndpointTests {
    /// Posts `count` events alternating background/foreground on a foreground instance;
    /// returns the records as answered.
    static func cycle(_ c: WireClient, _ id: String, _ count: Int) throws -> [[String: Any]] {
        try (0..<count).map { index in
            try c.event(id, index % 2 == 0 ? #"{"event": "didEnterBackground"}"# : #"{"event": "didBecomeActive"}"#).json
        }
    }

    @Test("a stream answers text/event-stream, starts with retry, and carries each record byte for byte as history holds it")
    func framing() throws {
        let server = try TestServer()
        let c = try server.connect()
        let stream = try EventStream(port: server.port, path: "/v1/stream")
        #expect(stream.status == 200)
        #expect(stream.header("content-type") == "text/event-stream; charset=utf-8")
        #expect(stream.header("cache-control") == "no-cache")
        #expect(stream.header("x-accel-buffering") == "no")

        try c.makeInstance("phone", events: coldStart)
        let events = stream.next(4)
        #expect(stream.retry == 2000)
        #expect(events.map(\.type) == ["created", "record", "record", "record"])
        #expect(events[0].json["kind"] as? String == "created" && events[0].json["instance"] as? String == "phone")
        let history = try c.request("GET", "/v1/instances/phone/history").json["items"] as? [[String: Any]] ?? []
        let historyBytes = try history.map { String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
        let streamBytes = try events.dropFirst().map {
            String(decoding: try JSONSerialization.data(withJSONObject: $0.json, options: [.sortedKeys]), as: UTF8.self)
        }
        #expect(streamBytes == historyBytes)
        // Byte-identical to the POST's answer too, but for the newline that ends every body.
        let answered = try c.event("phone", #"{"event": "willResignActive"}"#)
        let next = try #require(stream.next())
        #expect(next.data.map { $0 + "\n" } == answered.text)
        #expect(next.id == (answered.json["sequence"] as? Int).map(Int64.init))
    }

    @Test("the global stream filters by model, repeated instance and outcome; bad filters are 400, an unknown instance 404")
    func filters() throws {
        let server = try TestServer()
        let c = try server.connect()
        let unexpected = try EventStream(port: server.port, path: "/v1/stream?outcome=unexpected")
        let android = try EventStream(port: server.port, path: "/v1/stream?model=android-activity")
        let pair = try EventStream(port: server.port, path: "/v1/stream?instance=a&instance=c")
        let one = try EventStream(port: server.port, path: "/v1/instances/c/stream", headTimeout: 10)
        #expect(one.status == 404)

        try c.makeInstance("a", events: ["didFinishLaunching"])
        try c.makeInstance("b", model: "android-activity")
        try c.makeInstance("c", events: ["didBecomeActive"])  // unexpected in initializing
        let perInstance = try EventStream(port: server.port, path: "/v1/instances/c/stream?lastEventId=0")
        _ = try c.event("b", #"{"event": "onCreate"}"#)
        _ = try c.event("c", #"{"event": "didFinishLaunching"}"#)

        #expect(unexpected.next(timeout: 10)?.json["instance"] as? String == "c")
        #expect(android.next(2).map { "\($0.type ?? "") \($0.json["instance"] ?? "")" } == ["created b", "record b"])
        #expect(pair.next(5).map { "\($0.type ?? "") \($0.json["instance"] ?? "")" } == [
            "created a", "record a", "created c", "record c", "record c",
        ])
        #expect(perInstance.next(3).map(\.type) == ["created", "record", "record"])
        // Nothing else arrived on the filtered streams.
        _ = try c.event("a", #"{"event": "willConnectToWindow", "window": "w"}"#)
        _ = try c.event("c", #"{"event": "willConnectToWindow", "window": "w"}"#)
        #expect(unexpected.next(timeout: 0.5) == nil)
        #expect(android.next(timeout: 0.5) == nil)

        for path in ["/v1/stream?model=nope", "/v1/stream?outcome=weird", "/v1/stream?instance=..", "/v1/stream?colour=red",
                     "/v1/stream?lastEventId=-1", "/v1/stream?lastEventId=1&lastEventId=2", "/v1/instances/a/stream?model=ios-app"] {
            let refused = try EventStream(port: server.port, path: path)
            #expect(refused.status == 400, "\(path)")
            #expect(refused.header("content-type") == "application/problem+json", "\(path)")
        }
        let badHeader = try EventStream(port: server.port, path: "/v1/stream", headers: [("Last-Event-ID", "x1")])
        #expect(badHeader.status == 400)
    }

    @Test("8 posters and 100 subscribers: every subscriber gets every record once, in sequence order")
    func orderAndCompleteness() throws {
        let server = try TestServer()
        let setup = try server.connect()
        for poster in 0..<8 { try setup.makeInstance("p\(poster)", events: coldStart) }
        let streams = try (0..<100).map { _ in try EventStream(port: server.port, path: "/v1/stream") }
        let perPoster = 40
        let answered = LockedValue<[Int64]>([])
        startClients(8, port: server.port) { poster, c in
            guard let records = try? Self.cycle(c, "p\(poster)", perPoster) else { return }
            answered.withLock { $0 += records.compactMap { ($0["sequence"] as? Int).map(Int64.init) } }
        }.wait()
        let expected = answered.withLock { $0.sorted() }
        #expect(expected.count == 8 * perPoster)
        for stream in streams {
            let got = stream.next(expected.count, timeout: 60).compactMap(\.id)
            #expect(got == expected)
        }
    }

    @Test("resume with Last-Event-ID after a disconnect at a random point gives exactly the missed records, while posting goes on")
    func resumeWhilePosting() throws {
        let server = try TestServer { $0.streamRing = 64 * 1024 }  // small: most resumes read the store
        let setup = try server.connect()
        try setup.makeInstance("r", events: coldStart)
        let isPosting = LockedValue<Bool>(true)
        let posted = LockedValue<[Int64]>([])
        let port = server.port
        let poster = Thread {
            guard let c = try? WireClient(port: port) else { return }
            while isPosting.withLock({ $0 }) {
                guard let records = try? Self.cycle(c, "r", 2) else { return }
                posted.withLock { $0 += records.compactMap { ($0["sequence"] as? Int).map(Int64.init) } }
            }
        }
        poster.start()
        var generator = SeededGenerator(state: 7)
        var seen: [Int64] = []
        var lastID: Int64?
        for _ in 0..<12 {
            var headers: [(String, String)] = []
            if let lastID { headers.append(("Last-Event-ID", String(lastID))) }
            let stream = try EventStream(port: server.port, path: "/v1/stream", headers: headers)
            let take = Int.random(in: 1...60, using: &generator)
            let events = stream.next(take, timeout: 30)
            #expect(events.count == take)
            seen += events.compactMap(\.id)
            lastID = events.last?.id ?? lastID
            stream.disconnect()
        }
        isPosting.withLock { $0 = false }
        while poster.isExecuting { usleep(1000) }
        // Everything up to the last id seen arrived exactly once and in order.
        let all = posted.withLock { $0 }.sorted()
        let first = try #require(seen.first)
        let expected = all.filter { $0 >= first && $0 <= lastID! }
        #expect(seen == expected)
    }

    @Test("resume across a restart of the service; a retention gap and an id from the future are announced")
    func restartGapAndFuture() throws {
        let server = try TestServer { $0.historyLimit = 3 }
        var c = try server.connect()
        try c.makeInstance("x", events: coldStart)
        let before = try EventStream(port: server.port, path: "/v1/instances/x/stream?lastEventId=0")
        let firstFour = before.next(4)
        #expect(firstFour.map(\.type) == ["created", "record", "record", "record"])
        try server.restart()
        c = try server.connect()
        let records = try Self.cycle(c, "x", 2)
        let resumed = try EventStream(port: server.port, path: "/v1/instances/x/stream", headers: [("Last-Event-ID", String(firstFour.last!.id!))])
        #expect(resumed.next(2).compactMap(\.id) == records.map { Int64($0["sequence"] as! Int) })

        // History keeps 3 records: the first ones are gone, and a resume from 0 says so first.
        _ = try Self.cycle(c, "x", 4)
        let fromStart = try EventStream(port: server.port, path: "/v1/stream?lastEventId=1")
        let gap = try #require(fromStart.next())
        #expect(gap.type == "gap")
        #expect((gap.json["droppedThrough"] as? Int ?? 0) > 1)
        #expect(fromStart.next()?.type == "record")

        let future = try EventStream(port: server.port, path: "/v1/stream?lastEventId=999999")
        let reset = try #require(future.next())
        #expect(reset.type == "reset")
        let newest = try #require(reset.json["newest"] as? Int)
        let next = try Self.cycle(c, "x", 1)[0]
        #expect(future.next()?.id == Int64(next["sequence"] as! Int))
        #expect(newest < next["sequence"] as! Int)
    }

    @Test("an idle stream gets heartbeat comments")
    func heartbeat() throws {
        let server = try TestServer { $0.heartbeat = 0.2 }
        let stream = try EventStream(port: server.port, path: "/v1/stream")
        let deadline = Date().addingTimeInterval(10)
        while stream.comments.count < 2, Date() < deadline { _ = stream.next(timeout: 0.3) }
        #expect(stream.comments.count >= 2)
    }

    @Test("a reader that stops reading is closed with event: overflow naming the last record sent, and resumes from there")
    func overflow() throws {
        let server = try TestServer { $0.streamBuffer = 8 * 1024 }
        let c = try server.connect()
        try c.makeInstance("o", events: coldStart)
        let stuck = try EventStream(port: server.port, path: "/v1/stream", receiveBuffer: 4096)
        // Far more than the socket buffers (megabytes on loopback) and the stream's budget hold:
        // 800 actions of 16 KB each (an 8 KB url, repeated as the action it replaced).
        let url = "https://example.com/" + String(repeating: "a", count: 8000)
        var answered: [Int64] = []
        for _ in 0..<800 {
            let record = try c.request("POST", "/v1/instances/o/actions", json: #"{"action": "openURL", "url": "\#(url)"}"#).json
            answered.append(Int64(record["sequence"] as! Int))
        }
        var events: [StreamEvent] = []
        while let event = stuck.next(timeout: 10) { events.append(event) }
        let overflow = try #require(events.last)
        #expect(overflow.type == "overflow")
        #expect(stuck.hasEnded)
        let lastSent = try #require(overflow.json["lastEventId"] as? Int)
        let received = events.dropLast().compactMap(\.id).filter { $0 > 3 }
        #expect(received.last.map { Int($0) } ?? 3 <= lastSent)
        // Reconnecting from the overflow's id replays the rest: nothing is lost.
        let again = try EventStream(port: server.port, path: "/v1/stream", headers: [("Last-Event-ID", String(lastSent))])
        let rest = answered.filter { $0 > Int64(lastSent) }
        #expect(again.next(rest.count, timeout: 60).compactMap(\.id) == rest)
    }

    @Test("1,000 simultaneous subscribers each receive every record; one more than allowed gets 503 with Retry-After")
    func thousandSubscribers() throws {
        let server = try TestServer {
            $0.maxSubscribers = 1000
            $0.maxConnectionsPerClient = 2000  // all from 127.0.0.1
        }
        let c = try server.connect()
        try c.makeInstance("k", events: coldStart)
        let streams = try (0..<1000).map { _ in try EventStream(port: server.port, path: "/v1/stream") }
        let refused = try EventStream(port: server.port, path: "/v1/stream")
        #expect(refused.status == 503 && refused.header("retry-after") != nil)
        let answered = try Self.cycle(c, "k", 20).map { Int64($0["sequence"] as! Int) }
        for stream in streams { #expect(stream.next(20, timeout: 60).compactMap(\.id) == answered) }
    }
}
