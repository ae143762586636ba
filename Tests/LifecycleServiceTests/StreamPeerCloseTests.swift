import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import LifecycleService

/// A stream's client that goes away is noticed at once, not at the stream's next write:
/// its connection and its subscription are freed while the stream is idle.
@Suite("streams whose client closed", .serialized)
struct StreamPeerCloseTests {
    /// Another client than the streams' (127.0.0.1), outside their per-client limit.
    static func otherClient(_ server: TestServer) throws -> WireClient {
        try WireClient(port: server.port, source: "127.0.0.2")
    }

    /// `lifecycled_stream_subscribers` as `GET /metrics` answers it now, to another client.
    static func subscriberGauge(_ server: TestServer) throws -> Int? {
        let text = try otherClient(server).request("GET", "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix("lifecycled_stream_subscribers ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") }
    }

    @Test("a client's whole per-client cap of idle streams closes: long before a heartbeat the gauge is 0 and as many new streams are accepted")
    func closedStreamsFreeTheCap() throws {
        let cap = 8
        // No heartbeat within the test: nothing writes to the idle streams.
        let server = try TestServer {
            $0.heartbeat = 60
            $0.maxConnectionsPerClient = cap
        }
        var streams = try (0..<cap).map { _ in try EventStream(port: server.port, path: "/v1/stream") }
        #expect(streams.allSatisfy { $0.status == 200 })
        #expect(eventually(within: 5) { server.service!.hub.subscriberCount == cap })
        // Half shut down (FIN), half closed with the stream's first bytes unread (RST).
        for stream in streams.prefix(cap / 2) { stream.disconnect() }
        streams = []

        // Well inside the 60 s heartbeat, the only write that could find the closes otherwise; a
        // bound loose enough for the whole suite's load, which times nothing.
        #expect(eventually(within: 10) { (try? Self.subscriberGauge(server)) == 0 }, "the subscriber gauge went back to 0")
        var again: [EventStream] = []
        for index in 0..<cap {
            let accepted = eventually(within: 10) {
                guard let stream = try? EventStream(port: server.port, path: "/v1/stream", headTimeout: 5), stream.status == 200 else { return false }
                again.append(stream)
                return true
            }
            #expect(accepted, "new stream \(index + 1) of \(cap) accepted")
        }
        #expect(again.count == cap)
        // The new streams are live.
        try Self.otherClient(server).makeInstance("after")
        for stream in again { #expect(stream.next(timeout: 10)?.type == "created") }
    }

    @Test("a stream's client that sends bytes but keeps its side open is not taken for gone")
    func bytesAreNotAClose() throws {
        let server = try TestServer { $0.heartbeat = 60 }
        let stream = try EventStream(port: server.port, path: "/v1/stream")
        #expect(stream.status == 200)
        // A pipelined request, which waits behind the stream.
        stream.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        try server.connect().makeInstance("still")
        #expect(stream.next(timeout: 10)?.type == "created")
        #expect(!stream.hasEnded && !stream.wasCut)
    }
}
