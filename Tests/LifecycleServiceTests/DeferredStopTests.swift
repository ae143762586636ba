import Foundation
import MicroHTTP
import Synchronization
import Testing

/// Stopping the server while a deferred reply is pending (the registry's committer answers
/// posts this way). libmicrohttpd aborts the process if it is stopped with a suspended
/// connection, and a resume after it stopped touches freed memory; either crashes this run.
@Suite("stop with deferred replies pending", .serialized)
struct DeferredStopTests {
    final class Replies: Sendable {
        let pending = Mutex<[@Sendable (Response) -> Void]>([])
        var count: Int { pending.withLock { $0.count } }
    }

    /// A started server whose one route, `GET /later`, keeps each request's reply for the test.
    static func startServer(keeping replies: Replies) throws -> HTTPServer {
        var router = Router()
        router.addDeferred("GET", "/later") { _, respond in replies.pending.withLock { $0.append(respond) } }
        let routes = router
        let server = HTTPServer(configuration: ServerConfiguration(port: 0, threads: 2), logger: Logger(level: .error), pipeline: Pipeline(router: routes))
        try server.start()
        return server
    }

    @Test("stop() gives up on a deferred request that does not finish in time; its reply after the stop does nothing")
    func pendingReply() throws {
        let replies = Replies()
        let server = try Self.startServer(keeping: replies)
        let clients = try (0..<4).map { _ in try RawSocket(port: server.port) }
        for client in clients { client.send("GET /later HTTP/1.1\r\nHost: test\r\n\r\n") }
        #expect(eventually { replies.count == clients.count })

        server.stop(drainSeconds: 0.2)

        for respond in replies.pending.withLock({ $0 }) { respond(.text("too late")) }
        for client in clients { #expect(client.waitForClose(within: 10)) }
        // A server started afterwards in the same process works: nothing was left broken.
        let next = try Self.startServer(keeping: replies)
        let probe = try RawSocket(port: next.port)
        probe.send("GET /later HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(eventually { replies.count == clients.count + 1 })
        replies.pending.withLock { $0.last! }(.text("answered"))
        #expect(try probe.readResponse().status == 200)
        next.stop()
    }

    @Test("a deferred reply racing stop(): answered before the drain ends, or given up; never a crash")
    func replyRacingStop() throws {
        for round in 0..<20 {
            let replies = Replies()
            let server = try Self.startServer(keeping: replies)
            let clients = try (0..<8).map { _ in try RawSocket(port: server.port) }
            for client in clients { client.send("GET /later HTTP/1.1\r\nHost: test\r\n\r\n") }
            #expect(eventually { replies.count == clients.count })
            let all = replies.pending.withLock { $0 }
            // Half answered from another thread while stopping; the rest only after.
            Thread.detachNewThread { for respond in all.prefix(4) { respond(.text("in time")) } }
            server.stop(drainSeconds: Double(round % 3) * 0.05)
            for respond in all { respond(.text("late")) }
            for client in clients { #expect(client.waitForClose(within: 10), "round \(round)") }
        }
    }
}
