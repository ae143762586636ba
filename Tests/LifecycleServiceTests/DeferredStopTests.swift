import Foundation
import LifecycleLog
import LifecycleTestSupport
import LifecycleHTTP
import LifecycleLocks
import Testing

/// Stopping the server while a deferred reply is pending (the registry's committer answers
/// posts this way), or while a connection is still being read. libmicrohttpd aborts the
/// process if it is stopped with a suspended connection, and a resume after it stopped
/// touches freed memory; either crashes this run (as does the refusal in the last test).
@Suite("stop with deferred replies pending", .serialized, .sqliteOnly("the HTTP server alone; opens no store"))
struct DeferredStopTests {
    final class Replies: Sendable {
        let pending = LockedValue<[@Sendable (Response) -> Void]>([])
        var count: Int { pending.withLock { $0.count } }
    }

    /// A started server whose one route, `GET /later`, keeps each request's reply for the test.
    static func startServer(keeping replies: Replies) throws -> HTTPServer {
        var router = Router()
        router.addDeferred(.get, "/later") { _, respond in replies.pending.withLock { $0.append(respond) } }
        let routes = router
        let server = HTTPServer(configuration: ServerConfiguration(port: 0, threads: 2), logger: LineLogger(level: .error), pipeline: Pipeline(router: routes))
        try server.start()
        return server
    }

    @Test("stop() gives up on a deferred request that does not finish in time; its reply after the stop does nothing")
    func pendingReply() throws {
        let replies = Replies()
        let server = try Self.startServer(keeping: replies)
        let clients = try (0..<4).map { _ in try WireClient(port: server.port) }
        for client in clients { client.send("GET /later HTTP/1.1\r\nHost: test\r\n\r\n") }
        #expect(eventually { replies.count == clients.count })

        server.stop(drainSeconds: 0.2)

        for respond in replies.pending.withLock({ $0 }) { respond(.text("too late")) }
        for client in clients { #expect(client.waitForClose(within: 10)) }
        // A server started afterwards in the same process works: nothing was left broken.
        let next = try Self.startServer(keeping: replies)
        let probe = try WireClient(port: next.port)
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
            let clients = try (0..<8).map { _ in try WireClient(port: server.port) }
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

    /// libmicrohttpd 0.9.75 answers a header block it refuses itself (a bad Content-Length)
    /// with `MHD_queue_response`, which queues nothing once the daemon is stopping, and then
    /// builds that response's head from a null pointer. It reads connections until its
    /// thread notices the stop, so the daemon must have no connection left when it is told to.
    @Test("stop() while the daemon thread is busy and a refused header block waits to be read: no crash, every client closed")
    func refusalWhileStopping() throws {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        var router = Router()
        router.get("/hold") { _ in
            entered.signal()
            release.wait()
            return .text("released")
        }
        router.get("/plain") { _ in .text("plain") }
        let routes = router
        // One daemon thread: every connection is read by the thread the handler holds.
        let server = HTTPServer(configuration: ServerConfiguration(port: 0, threads: 1), logger: LineLogger(level: .error), pipeline: Pipeline(router: routes))
        try server.start()
        // Both open and answered once, so the daemon has them before its thread is held.
        let busy = try WireClient(port: server.port)
        let refused = try WireClient(port: server.port)
        for client in [busy, refused] {
            client.send("GET /plain HTTP/1.1\r\nHost: test\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
        let holder = try WireClient(port: server.port)
        holder.send("GET /hold HTTP/1.1\r\nHost: test\r\n\r\n")
        try #require(entered.wait(timeout: .now() + 10) == .success)
        // While the thread is held both arrive, so its next pass reads them in this order:
        // `busy` holds the thread again, and the refused header block waits behind it.
        busy.send("GET /hold HTTP/1.1\r\nHost: test\r\n\r\n")
        refused.send("POST /plain HTTP/1.1\r\nHost: test\r\nContent-Length: -1\r\n\r\n")
        release.signal()
        try #require(entered.wait(timeout: .now() + 10) == .success)

        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            server.stop(drainSeconds: 0)
            stopped.signal()
        }
        // Long enough for stop() to pass its (zero) drain and reach the daemon; then the held
        // request returns and the thread goes on to the refused header block.
        Thread.sleep(forTimeInterval: 0.3)
        release.signal()
        #expect(stopped.wait(timeout: .now() + 20) == .success)
        for client in [holder, busy, refused] { #expect(client.waitForClose(within: 10)) }
    }
}
