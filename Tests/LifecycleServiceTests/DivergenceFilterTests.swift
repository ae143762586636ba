import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// Divergences and device times end to end, through the store: counts and `occurredAt` across
/// a restart, and `divergent=true` on history and on both streams, live and resumed.
@Suite("divergences through history, streams and restarts")
struct DivergenceFilterTests {
    /// Posts `count` events to `id` (an ios-app instance, foreground at first), numbered from
    /// `start`: background and foreground in turn, every tenth an unexpected launch; every
    /// third believes it is launching and every fourth reports hooks the model did not run
    /// (both diverge); each carries a device time. Returns the records as answered.
    static func post(_ c: some APIClient, _ id: String, _ count: Int, from start: Int = 0) throws -> [[String: Any]] {
        try (start..<start + count).map { i in
            // Unexpected launches change nothing: the others alternate as if they were not there.
            let event = i % 10 == 9 ? "didFinishLaunching" : (i - (i + 1) / 10) % 2 == 0 ? "didEnterBackground" : "didBecomeActive"
            var body = #"{"event": "\#(event)", "occurredAt": "2026-12-02T05:\#(10 + i / 60):\#(10 + i % 50).\#(100 + i)+05:30""#
            if i % 3 == 0 { body += #", "believedState": "launching""# }
            if i % 4 == 1 { body += #", "ranHooks": ["Foreground.onTransition", "Foreground.onTransition"]"# }
            let answer = try c.event(id, body + "}")
            #expect(answer.status == (event == "didFinishLaunching" ? 409 : 200), "\(body): \(answer.text)")
            return answer.status == 409 ? answer.json["record"] as? [String: Any] ?? [:] : answer.json
        }
    }

    static func sequence(_ record: [String: Any]) -> Int64 { Int64(record["sequence"] as? Int ?? -1) }
    static func isDivergent(_ record: [String: Any]) -> Bool { record["divergence"] != nil }

    @Test("history?divergent=true pages over the divergent records only, with the same cursor; only true is taken")
    func history() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("a", events: coldStart)
        try c.makeInstance("calm", events: coldStart)
        let answered = try Self.post(c, "a", 30)
        let divergent = answered.filter(Self.isDivergent)
        #expect(divergent.count >= 10 && divergent.count < answered.count)

        let full = try c.fullHistory("a")
        let expected = full.filter(Self.isDivergent)
        #expect(expected.map(Self.sequence) == divergent.map(Self.sequence))
        for limit in [1, 3, 1000] {
            var pages: [[[String: Any]]] = []
            var after: Int64 = 0
            while pages.count <= expected.count {
                let page = try c.request("GET", "/v1/instances/a/history?divergent=true&after=\(after)&limit=\(limit)")
                #expect(page.status == 200, "\(page.text)")
                pages.append(page.json["items"] as? [[String: Any]] ?? [])
                #expect(page.json["oldestRetainedVersion"] as? Int == 1)
                guard let next = page.json["nextAfter"] as? Int else { break }
                #expect(Int64(next) == pages.last?.last.map(Self.sequence), "nextAfter is the last record on the page")
                after = Int64(next)
            }
            let records = pages.flatMap { $0 }
            #expect(records.map(Self.sequence) == expected.map(Self.sequence), "limit \(limit)")
            #expect(pages.dropLast().allSatisfy { $0.count == limit } && (pages.last?.count ?? 0) <= limit, "limit \(limit)")
            #expect(try records.map(Self.canonical) == expected.map(Self.canonical), "the records as history holds them")
        }
        let calm = try c.request("GET", "/v1/instances/calm/history?divergent=true")
        #expect(calm.status == 200 && (calm.json["items"] as? [Any])?.isEmpty == true && calm.json["nextAfter"] is NSNull)

        for query in ["divergent=false", "divergent=1", "divergent=", "divergent=true&divergent=true"] {
            let refused = try c.request("GET", "/v1/instances/a/history?\(query)")
            #expect(refused.status == 400, "\(query): \(refused.text)")
        }
        #expect(try c.request("GET", "/v1/instances/nobody/history?divergent=true").status == 404)
    }

    static func canonical(_ record: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: record, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test("counters.divergences and occurredAt survive a restart; occurredAt is in history and in streams, live and replayed from the store")
    func restart() throws {
        let server = try TestServer()
        var c = try server.connect()
        try c.makeInstance("x", events: coldStart)
        let live = try EventStream(port: server.port, path: "/v1/instances/x/stream")
        let answered = try Self.post(c, "x", 12)
        let times = answered.map { $0["occurredAt"] as? String }
        #expect(times.allSatisfy { $0 != nil } && times[4] == "2026-12-02T05:10:14.104+05:30")
        #expect(live.next(answered.count).map { $0.json["occurredAt"] as? String } == times)
        let divergences = answered.filter(Self.isDivergent).count
        let counters = { () throws -> [String: Any] in try c.request("GET", "/v1/instances/x").json["counters"] as? [String: Any] ?? [:] }
        #expect(try counters()["divergences"] as? Int == divergences)
        let unexpected = try counters()["unexpected"] as? Int

        try server.restart()
        c = try server.connect()
        #expect(try counters()["divergences"] as? Int == divergences, "the count survives the restart")
        #expect(try counters()["unexpected"] as? Int == unexpected)
        #expect(try c.fullHistory("x").suffix(answered.count).map { $0["occurredAt"] as? String } == times)
        // The ring starts empty: these come from the store.
        let replayed = try EventStream(port: server.port, path: "/v1/instances/x/stream?lastEventId=0")
        #expect(replayed.next(4 + answered.count).suffix(answered.count).map { $0.json["occurredAt"] as? String } == times)
        let divergent = try EventStream(port: server.port, path: "/v1/instances/x/stream?divergent=true&lastEventId=0")
        let got = divergent.next(divergences)
        #expect(got.map(\.id) == answered.filter(Self.isDivergent).map { Optional(Self.sequence($0)) })
        #expect(got.map { $0.json["occurredAt"] as? String } == answered.filter(Self.isDivergent).map { $0["occurredAt"] as? String })
        // Counted on from where they were.
        let more = try Self.post(c, "x", 3, from: 12)
        #expect(try counters()["divergences"] as? Int == divergences + more.filter(Self.isDivergent).count)
        #expect(divergent.next(more.filter(Self.isDivergent).count).map(\.id) == more.filter(Self.isDivergent).map { Optional(Self.sequence($0)) })
    }

    @Test("divergent=true streams, with the other filters, resumed after a disconnect and after a restart: only divergent records, no gap, no duplicate")
    func resumedStreams() throws {
        let server = try TestServer()
        var c = try server.connect()
        try c.makeInstance("a", events: coldStart)
        try c.makeInstance("b", events: coldStart)
        // Which records each stream should get, of the instances' whole histories.
        let streams: [(path: String, passes: ([String: Any]) -> Bool)] = [
            ("/v1/stream?divergent=true", { _ in true }),
            ("/v1/stream?divergent=true&instance=a", { $0["instance"] as? String == "a" }),
            ("/v1/stream?model=ios-app&divergent=true", { _ in true }),
            ("/v1/stream?divergent=true&outcome=unexpected", { $0["outcome"] as? String == "unexpected" }),
            ("/v1/instances/b/stream?divergent=true", { $0["instance"] as? String == "b" }),
        ]
        var seen = try streams.map { stream in
            let opened = try EventStream(port: server.port, path: stream.path)
            #expect(opened.status == 200, "\(stream.path)")
            return (stream: opened, ids: [Int64]())
        }
        func read(_ index: Int, _ count: Int) {
            let events = seen[index].stream.next(count, timeout: 30)
            #expect(events.count == count, "\(streams[index].path)")
            #expect(events.allSatisfy { $0.type == "record" }, "\(streams[index].path): \(events)")
            seen[index].ids += events.compactMap(\.id)
        }
        func resume(_ index: Int) throws {
            seen[index].stream.disconnect()
            let last = try #require(seen[index].ids.last, "\(streams[index].path)")
            seen[index].stream = try EventStream(port: server.port, path: streams[index].path, headers: [("Last-Event-ID", String(last))])
        }
        func expected() throws -> [[Int64]] {
            let records = (try c.fullHistory("a") + c.fullHistory("b")).filter(Self.isDivergent)
            return streams.map { stream in records.filter(stream.passes).map(Self.sequence).sorted() }
        }

        // Live: the first half, then a disconnect.
        _ = try Self.post(c, "a", 20)
        _ = try Self.post(c, "b", 20)
        var wanted = try expected()
        for index in streams.indices {
            #expect(wanted[index].count >= 2, "\(streams[index].path)")
            read(index, wanted[index].count / 2)
            try resume(index)
        }
        // Resumed from the ring, while posting goes on; an instance made and deleted meanwhile sends nothing.
        try c.makeInstance("c", events: coldStart)
        _ = try Self.post(c, "a", 10, from: 20)
        #expect(try c.request("DELETE", "/v1/instances/c").status == 204)
        _ = try Self.post(c, "b", 10, from: 20)
        wanted = try expected()
        for index in streams.indices {
            read(index, wanted[index].count - seen[index].ids.count - 1)
        }
        // Resumed from the store after a restart: the ring starts empty.
        try server.restart()
        c = try server.connect()
        _ = try Self.post(c, "a", 10, from: 30)
        _ = try Self.post(c, "b", 10, from: 30)
        wanted = try expected()
        for index in streams.indices {
            try resume(index)
            read(index, wanted[index].count - seen[index].ids.count)
            #expect(seen[index].ids == wanted[index], "\(streams[index].path): every divergent record once, in order")
            #expect(seen[index].stream.next(timeout: 0.3) == nil, "\(streams[index].path): nothing more")
        }
        for path in ["/v1/stream?divergent=false", "/v1/stream?divergent=yes", "/v1/instances/a/stream?divergent=1"] {
            let refused = try EventStream(port: server.port, path: path)
            #expect(refused.status == 400, "\(path)")
        }
    }
}

/// The flag read back from the store by a replica that did not write the records.
@Suite("divergent streams across replicas", .sqliteOnly("its replicas run on a PostgreSQL of their own in either pass"))
struct DivergentReplicaTests {
    @Test("a divergent=true stream on one replica gets exactly the divergent records another commits, live and resumed")
    func otherReplicasRecords() throws {
        let replicas = try Replicas(2, databaseURL: try PostgresCluster.shared.makeDatabase())
        let writer = try WireClient(port: replicas.ports[0])
        let live = try EventStream(port: replicas.ports[1], path: "/v1/stream?divergent=true")
        try writer.makeInstance("r", events: coldStart)
        let answered = try DivergenceFilterTests.post(writer, "r", 12)
        let divergent = answered.filter(DivergenceFilterTests.isDivergent).map { Optional(DivergenceFilterTests.sequence($0)) }
        #expect(divergent.count >= 4)
        #expect(live.next(divergent.count, timeout: 30).map(\.id) == divergent)
        #expect(live.next(timeout: 0.3) == nil, "nothing more")
        let resumed = try EventStream(port: replicas.ports[1], path: "/v1/stream?divergent=true&lastEventId=\(divergent[1]!)")
        #expect(resumed.next(divergent.count - 2, timeout: 30).map(\.id) == Array(divergent.dropFirst(2)))
    }
}
