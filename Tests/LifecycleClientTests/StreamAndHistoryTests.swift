import Foundation
@testable import LifecycleClient
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Alternates foreground and background: one record per event, the belief wrong every `believedWrongEvery`.
private func flip(_ client: LifecycleClient, _ id: String, _ count: Int, believedWrongEvery: Int = 0) async throws {
    for index in 0..<count {
        let event = try await client.instance(id).state == "foreground" ? "didEnterBackground" : "didBecomeActive"
        let wrong = believedWrongEvery > 0 && index % believedWrongEvery == 0
        try await client.postEvent(event, to: id, believedState: wrong ? "initializing" : nil)
    }
}

/// An instance in the foreground (version 3).
private func foreground(_ client: LifecycleClient, _ id: String) async throws {
    try await client.putInstance(id)
    for (event, parameters) in coldStart { try await client.postEvent(event, to: id, parameters: parameters) }
}

/// What a stream's reader task has yielded so far.
private final class Seen: Sendable {
    let events = LockedValue<[RecordStream.Event]>([])
}

/// A loopback peer that answers each stream request with the next of `bodies` as the service
/// would, closing all but the last: for what the service sends only under load (an overflow,
/// which a client reading as fast as this one does cannot bring about).
private final class ScriptedStreamPeer {
    /// What the peer's thread and the test share: each request's head, the connection kept open.
    final class Shared: Sendable {
        let requests = LockedValue<[String]>([])
        let open = LockedValue<[Int32]>([])
    }

    let port: UInt16
    let shared = Shared()
    private let listener: LoopbackListener

    init(_ bodies: [String]) throws {
        let listener = try LoopbackListener()
        self.listener = listener
        port = listener.port
        let listening = listener.fd
        Thread.detachNewThread { [shared] in
            for (index, body) in bodies.enumerated() {
                let client = accept(listening, nil, nil)
                guard client >= 0 else { return }
                var head = [UInt8](repeating: 0, count: 8192)
                let count = recv(client, &head, head.count, 0)
                shared.requests.withLock { $0.append(String(decoding: head.prefix(Swift.max(0, count)), as: UTF8.self)) }
                let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\(body)".utf8)
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                if index < bodies.count - 1 { close(client) } else { shared.open.withLock { $0.append(client) } }
            }
        }
    }

    deinit {
        shutdown(listener.fd, Int32(SHUT_RDWR))
        shared.open.withLock { $0.forEach { close($0) } }
    }
}

@Suite("LifecycleClient history and streams")
struct StreamAndHistoryTests {
    @Test("history pages by itself: every record once, in order, across many pages; the divergent filter")
    func historyPaging() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        try await client.putInstance("h-1")
        try await client.putInstance("h-2")
        for (event, parameters) in coldStart {
            try await client.postEvent(event, to: "h-1", parameters: parameters)
            try await client.postEvent(event, to: "h-2", parameters: parameters, believedState: "background")
        }
        for index in 0..<20 {
            try await client.postAction("openURL", to: "h-1", parameters: ["url": .string("https://example.com/\(index)")], believedState: index % 5 == 0 ? "background" : nil)
        }
        var records: [Record] = []
        for try await record in client.history(of: "h-1", pageSize: 4) { records.append(record) }
        #expect(records.map(\.version) == Array(1...23), "23 records over 6 pages, each once, in order")
        #expect(records.allSatisfy { $0.instance == "h-1" })
        #expect(zip(records, records.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        #expect(records[5].parameters == ["url": .string("https://example.com/2")])

        let page = try await client.historyPage(of: "h-1", after: records[9].sequence, limit: 4)
        #expect(page.items.map(\.version) == [11, 12, 13, 14] && page.nextAfter == records[13].sequence)
        #expect(page.oldestRetainedVersion == 1 && page.oldestRetainedSequence == records[0].sequence && !page.olderDropped)

        var divergent: [Int64] = []
        for try await record in client.history(of: "h-1", divergent: true, pageSize: 2) { divergent.append(record.version) }
        #expect(divergent == [4, 9, 14, 19], "only the actions whose belief was wrong")
        var later: [Int64] = []
        for try await record in client.history(of: "h-1", after: records[20].sequence) { later.append(record.version) }
        #expect(later == [22, 23])
        #expect(await problem { try await client.historyPage(of: "absent") }?.status == 404)
    }

    @Test("the stream resumes across a server restart: every record once, in order")
    func streamAcrossRestart() async throws {
        let server = try ClientTestServer()
        let client = server.client(timeout: 5)
        try await foreground(client, "s-1")
        try await foreground(client, "other")

        let seen = Seen()
        let stream = client.records(filter: RecordFilter(instances: ["s-1"]), after: 0, maxRetryDelay: 1)
        let reader = Task {
            for try await event in stream { seen.events.withLock { $0.append(event) } }
        }
        defer { reader.cancel() }
        func recordCount() -> Int { seen.events.withLock { $0.count { $0.record != nil } } }

        // Replayed from the store (created + 3), then live.
        try await flip(client, "s-1", 3)
        #expect(try await until { recordCount() == 6 }, "replay and live records: \(recordCount())")

        server.stop()
        // While the client waits to reconnect: a new server on the same data folder takes
        // records, the reader connecting only after them.
        try server.start()
        try await flip(client, "s-1", 3)
        try await flip(client, "other", 2)
        #expect(try await until(15) { recordCount() == 9 }, "records committed while the stream was down: \(recordCount())")
        try await flip(client, "s-1", 3, believedWrongEvery: 2)
        #expect(try await until { recordCount() == 12 }, "live again after the reconnection: \(recordCount())")

        reader.cancel()
        var stored: [Int64] = []
        for try await record in client.history(of: "s-1") { stored.append(record.sequence) }
        let events = seen.events.withLock { $0 }
        #expect(events.compactMap(\.record).map(\.sequence) == stored, "every record once, in order, as history holds them")
        #expect(events.compactMap(\.record).allSatisfy { $0.instance == "s-1" })
        guard case .created(let created) = events.first else { Issue.record("the creation comes first: \(String(describing: events.first))"); return }
        #expect(created.instance == "s-1" && created.model == "ios-app" && created.sequence < stored[0])
        #expect(events.compactMap(\.record).filter { $0.believedState == "initializing" }.count == 2)
        // The outage is told between the records before the restart and those after, its attempts counted from 1.
        let cut = events.firstIndex { if case .interrupted = $0 { true } else { false } }
        let sixth = events.indices.filter { events[$0].record != nil }.dropFirst(5).first
        #expect(cut != nil && sixth != nil && cut! > sixth!, "an interruption after the sixth record: \(events)")
        let attempts = events.compactMap { if case .interrupted(let why) = $0 { why.attempt } else { nil } }
        #expect(attempts.first == 1 && attempts == Array(1...attempts.count), "consecutive attempts from 1: \(attempts)")
        #expect(events.allSatisfy { if case .interrupted(let why) = $0 { !why.reason.isEmpty && why.retryIn > 0 } else { true } })
    }

    // The retry is absurd on purpose: held to `maxRetryDelay`, as every wait is (it trapped
    // the conversion to nanoseconds once).
    @Test("an overflow's end is no interruption: the stream reconnects after its retry, held to its longest wait, from the overflow's id, saying nothing")
    func overflowIsRoutine() async throws {
        let record = #"{"sequence":6,"instance":"a","version":1,"kind":"event","event":"didFinishLaunching","from":"initializing","to":"launching","outcome":"transitioned","hooks":["Launching.init"],"time":"2027-01-15T08:00:00.124Z"}"#
        let peer = try ScriptedStreamPeer([
            "retry: 99999999999999999\n\nid: 5\nevent: overflow\ndata: {\"lastEventId\":5}\n\n",
            "id: 6\ndata: \(record)\n\n",
        ])
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:\(peer.port)")!, timeout: 5))
        var iterator = client.records(after: 4, maxRetryDelay: 0.05).makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first?.record?.sequence == 6, "the record after the overflow, with nothing before it: \(String(describing: first))")
        let heads = peer.shared.requests.withLock { $0 }
        #expect(heads.count == 2 && heads[0].lowercased().contains("last-event-id: 4") && heads[1].lowercased().contains("last-event-id: 5"), "\(heads)")
    }

    // A service that is stopping, or cannot replay from its store, answers 200, sends its
    // `retry:` and ends the stream: the outage goes on, and a reader told of it once (as
    // `lifecycled tail` is) must not be told again at every such answer.
    @Test("streams the service ends at once, having sent nothing but their retry, count as one outage")
    func endedAtOnce() async throws {
        let peer = try ScriptedStreamPeer(Array(repeating: "retry: 10\n\n", count: 3) + [": open\n\n"])
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:\(peer.port)")!, timeout: 5))
        var iterator = client.records(after: 4, maxRetryDelay: 0.05).makeAsyncIterator()
        var attempts: [StreamInterruption] = []
        while attempts.count < 3, let event = try await iterator.next() {
            if case .interrupted(let why) = event { attempts.append(why) }
        }
        #expect(attempts.map(\.attempt) == [1, 2, 3], "\(attempts)")
        #expect(attempts.allSatisfy { $0.reason == "the service ended the stream" }, "\(attempts)")
    }

    @Test("a stream that cannot reach the service says so, with the error's own sentence, and keeps trying")
    func streamUnreachable() async throws {
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:\(freePort())")!, timeout: 2))
        var iterator = client.records(maxRetryDelay: 0.2).makeAsyncIterator()
        var attempts: [StreamInterruption] = []
        while attempts.count < 3, let event = try await iterator.next() {
            if case .interrupted(let why) = event { attempts.append(why) }
        }
        #expect(attempts.map(\.attempt) == [1, 2, 3], "\(attempts)")
        #expect(attempts.allSatisfy { $0.reason.hasPrefix("cannot reach the service: ") && !$0.reason.contains("Domain=") }, "\(attempts)")
    }

    @Test("the stream's filters, a deletion, and refusals that waiting cannot cure")
    func streamFilters() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        try await foreground(client, "f-1")
        try await client.postEvent("didFinishLaunching", to: "f-1")  // unexpected in the foreground
        try await client.postEvent("didEnterBackground", to: "f-1", believedState: "foreground")
        try await client.deleteInstance("f-1")

        func collect(_ stream: RecordStream, _ count: Int) async throws -> [RecordStream.Event] {
            var events: [RecordStream.Event] = []
            for try await event in stream {
                events.append(event)
                if events.count == count { break }
            }
            return events
        }
        let unexpected = try await collect(client.records(filter: RecordFilter(outcomes: [.unexpected]), after: 0), 1)
        #expect(unexpected.first?.record?.outcome == .unexpected && unexpected.first?.record?.name == "didFinishLaunching")
        let divergent = try await collect(client.records(filter: RecordFilter(divergent: true), after: 0), 1)
        #expect(divergent.first?.record?.divergence?.state?.believed == "foreground")
        let everything = try await collect(client.records(filter: RecordFilter(model: "ios-app"), after: 0), 7)
        guard case .deleted(let deleted) = everything.last else { Issue.record("the deletion comes last: \(everything)"); return }
        #expect(deleted.instance == "f-1" && deleted.version == 5)

        try await foreground(client, "f-2")
        let single = try await collect(client.records(of: "f-2", after: 0), 4)
        #expect(single.compactMap(\.record).map(\.version) == [1, 2, 3])

        let absent = await problem { try await collect(client.records(of: "absent"), 1) }
        #expect(absent?.status == 404)
        let badModel = await problem { try await collect(client.records(filter: RecordFilter(model: "no-such-model")), 1) }
        #expect(badModel?.status == 400)
    }

    @Test("server-sent events are parsed by the spec's rules, however the bytes are chunked")
    func parser() {
        let text = "\u{FEFF}retry: 1500\r\n: heartbeat\r\nid: 7\nevent: record\ndata: {\"a\":1}\rdata:two\n\n"
            + "data\n\nid: 8\nevent: x\n\nid\u{0}bad\ndata: é\n\nfield-without-colon\n\n"
        let expected = [
            ServerSentEvent(type: "record", data: "{\"a\":1}\ntwo", id: "7"),
            ServerSentEvent(type: "message", data: "", id: "7"),
            ServerSentEvent(type: "message", data: "é", id: "8"),
        ]
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = parser.feed(bytes[..<cut]) + parser.feed(bytes[cut...])
            #expect(events == expected, "cut at \(cut)")
            #expect(parser.retry == 1500 && parser.lastEventID == "8")
        }
        var parser = ServerSentEventParser(lastEventID: "3")
        #expect(parser.feed(Array("data: cut off".utf8)).isEmpty)
        parser.reset()
        #expect(parser.feed(Array("data: whole\n\n".utf8)) == [ServerSentEvent(type: "message", data: "whole", id: "3")])
    }
}
