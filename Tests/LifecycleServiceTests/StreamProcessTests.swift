import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Streams against `lifecycled` as its own process: shutdown with streams open, and a
/// real EventSource client (Debian's node-eventsource) reconnecting across a restart.
@Suite("event streams, process level")
struct StreamProcessTests {
    @Test("SIGTERM with 1,000 open streams and posts in flight: every stream ends cleanly, exit 0 within 5 s")
    func shutdownWithOpenStreams() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--max-connections-per-client", "2000"])
        let setup = try WireClient(port: server.port)
        for id in 0..<8 { try setup.makeInstance("s\(id)", events: coldStart) }
        let streams = try (0..<1000).map { _ in try EventStream(port: server.port, path: "/v1/stream") }
        for stream in streams.prefix(10) { #expect(stream.status == 200) }
        // Posters keep writing until the server goes away.
        let posters = startClients(8, port: server.port) { index, c in
            for round in 0..<100_000 {
                let event = round % 2 == 0 ? #"{"event": "didEnterBackground"}"# : #"{"event": "didBecomeActive"}"#
                guard let answer = try? c.event("s\(index)", event), answer.status == 200 else { return }
            }
        }
        // Streams are carrying records when the signal comes.
        #expect(streams[0].next(timeout: 10) != nil)
        let signalled = Date()
        server.signal(SIGTERM)
        let (status, _, stderr) = server.finish(within: 10)
        let took = Date().timeIntervalSince(signalled)
        #expect(status == 0, "\(stderr)")
        #expect(took < 5, "stopping took \(took) s")
        #expect(posters.wait(timeout: .now() + 30) == .success)
        var ended = 0
        for stream in streams {
            while stream.next(timeout: 5) != nil {}
            if stream.hasEnded { ended += 1 }
        }
        #expect(ended == streams.count, "streams that saw a clean end of the chunked body")
    }

    @Test("a real EventSource client receives every record, reconnects by itself after a restart and resumes with Last-Event-ID")
    func eventSourceReconnects() throws {
        let module = "/usr/share/nodejs/eventsource"
        try #require(FileManager.default.fileExists(atPath: module), "node-eventsource is installed by make test (apt)")
        let data = TemporaryDirectory()
        var server = try LifecycledProcess.serving(dataDirectory: data.path)
        let port = server.port
        var c = try WireClient(port: port)
        try c.makeInstance("es", events: coldStart)

        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("stream/eventsource-client.js").path
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        client.arguments = ["node", script, "http://127.0.0.1:\(port)/v1/stream?lastEventId=0", "12", "60"]
        let output = PipeCollector()
        client.standardOutput = output.writeEnd
        client.standardError = output.writeEnd
        try client.run()
        try output.writeEnd.close()

        // 4 records so far (creation and cold start); 4 more, a restart, then 4 more.
        for index in 0..<4 { _ = try c.event("es", index % 2 == 0 ? #"{"event": "didEnterBackground"}"# : #"{"event": "didBecomeActive"}"#) }
        // The client has all 8 records so far before the server stops, so what follows
        // reaches it only through its own reconnect.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, output.received.components(separatedBy: "\"id\"").count - 1 < 8 { usleep(10_000) }
        #expect(output.received.components(separatedBy: "\"id\"").count - 1 == 8)
        server.signal(SIGTERM)
        #expect(server.finish().status == 0)
        for index in 0..<4 {
            if index == 0 {
                server = try LifecycledProcess.serving(dataDirectory: data.path, port: port)
                c = try WireClient(port: port)
            }
            _ = try c.event("es", index % 2 == 0 ? #"{"event": "didEnterBackground"}"# : #"{"event": "didBecomeActive"}"#)
        }
        while client.isRunning, Date() < deadline.addingTimeInterval(40) { usleep(20_000) }
        if client.isRunning { client.terminate() }
        client.waitUntilExit()
        let lines = output.finish().split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
        #expect(client.terminationStatus == 0, "\(lines)")
        let ids = lines.compactMap { $0["id"] as? String }.compactMap { Int($0) }
        let history = try c.fullHistory("es").compactMap { $0["sequence"] as? Int }
        #expect(ids == [ids.first ?? 0] + history, "every record once, in order, across the reconnect")
        #expect(lines.contains { $0["error"] != nil }, "the client saw the connection drop")
        #expect(lines.filter { $0["open"] != nil }.count >= 2, "and opened it again by itself")
        server.signal(SIGTERM)
        server.finish()
    }
}
