import Foundation
import LifecycleTestSupport
import LifecycleHTTP
import LifecycleLocks
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Streamed responses on the real server (LifecycleHTTP's ``HTTPServer`` over libmicrohttpd),
/// with streams fed by the test. A libmicrohttpd panic aborts the whole test process, so
/// any misuse of suspend and resume fails the run.
@Suite("streamed responses", .serialized, .sqliteOnly("the HTTP server alone; opens no store"))
struct StreamingServerTests {
    static func event(_ number: Int, size: Int = 0) -> String {
        "id: \(number)\ndata: {\"n\":\(number)\(size > 0 ? ",\"pad\":\"" + String(repeating: "x", count: size) + "\"" : "")}\n\n"
    }

    /// Opens `GET /stream?n=number` and waits for its head; returns the client and its stream.
    static func openStream(_ fixture: StreamServer, _ number: Int) throws -> (WireClient, QueueStream) {
        let client = try WireClient(port: fixture.port, get: "/stream?n=\(number)")
        guard client.read(until: { $0.response != nil }) else { throw HTTPClientError(description: "no head for stream \(number)") }
        return (client, try fixture.streams.waitFor(number))
    }

    @Test("a stream's bytes arrive as a chunked text/event-stream; events queued together leave in one chunk")
    func chunkedEventStream() throws {
        let fixture = try StreamServer()
        let (client, stream) = try Self.openStream(fixture, 1)
        let head = try #require(client.response)
        #expect(head.status == 200)
        #expect(head.header("content-type") == "text/event-stream; charset=utf-8")
        #expect(head.header("cache-control") == "no-cache" && head.header("x-accel-buffering") == "no")
        #expect(head.header("transfer-encoding") == "chunked" && head.header("content-length") == nil)

        stream.push(Self.event(1))
        #expect(client.read { $0.response?.text == Self.event(1) })

        // Forty events of about 350 bytes queued at once (14 KiB) go out in one read, one chunk.
        let burst = (2...41).map { Self.event($0, size: 330) }.joined()
        stream.push(burst)
        #expect(client.read { $0.response?.text == Self.event(1) + burst })
        let chunks = try #require(client.response).chunks
        #expect(chunks.count == 2 && chunks.last == Array(burst.utf8))
        // The stream writer's buffer: 32 KiB.
        #expect(stream.largestBuffer >= 16 * 1024)

        stream.end()
        #expect(client.read { $0.response?.isComplete == true })
        #expect(client.response?.isMalformed == false)
        // The stream is over: finished once, and the connection is kept for another request.
        #expect(eventually { stream.finishes == 1 })
        client.send("GET /plain HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(client.read { String(decoding: $0.received, as: UTF8.self).hasSuffix("\r\n\r\nplain") })
        fixture.server.stop()
        #expect(stream.starts == 1 && stream.finishes == 1)
    }

    @Test("streams are read and written off the request threads: a stream whose read blocks holds up no request")
    func streamsOffRequestThreads() throws {
        // One daemon thread, which a stream read on it would hold.
        let fixture = try StreamServer(threads: 1)
        let client = try WireClient(port: fixture.port, get: "/blocking-stream?n=1")
        #expect(client.read(until: { $0.response != nil }))
        let stream = try fixture.blocking.waitFor(1)
        #expect(stream.reading.wait(timeout: .now() + 10) == .success, "the stream was read")
        let plain = try WireClient(port: fixture.port, get: "/plain")
        #expect(plain.read(within: 3) { $0.response?.isComplete == true }, "a request was answered while the stream's read blocked")
        stream.release.signal()
        #expect(client.read { $0.response?.text == "data: late\n\n" })
    }

    @Test("a waiting stream is suspended and resumed by wake() from another thread, many times")
    func wakeFromAnotherThread() throws {
        let fixture = try StreamServer()
        let (client, stream) = try Self.openStream(fixture, 1)
        var expected = ""
        for number in 1...300 {
            let event = Self.event(number)
            expected += event
            // Each event is pushed once the stream has found nothing to send (after the head,
            // then after each event), so each needs the connection woken.
            #expect(eventually { stream.waits >= number })
            let pusher = Thread { stream.push(event) }
            pusher.start()
            guard client.read(until: { $0.response?.text == expected }) else {
                Issue.record("event \(number) did not arrive")
                return
            }
        }
        #expect(stream.waits >= 300)
        #expect(client.response?.chunks.count == 300)
    }

    @Test("events pushed back to back from other threads, racing the server's reads, all arrive in order")
    func pushesRacingReads() throws {
        let fixture = try StreamServer()
        let clients = try (0..<8).map { try WireClient(port: fixture.port, get: "/stream?n=\($0)") }
        #expect(WireClient.read(clients, within: 10) { $0.allSatisfy { $0.response != nil } })
        let streams = try (0..<8).map { try fixture.streams.waitFor($0) }
        let events = (0..<2000).map { Self.event($0) }
        // Pushes land while the server reads, writes, or is about to suspend; a wake lost
        // among them would leave the last events unsent.
        for stream in streams {
            Thread.detachNewThread { for event in events { stream.push(event) } }
        }
        let all = events.joined()
        #expect(WireClient.read(clients, within: 30) { $0.allSatisfy { $0.response?.body.count == all.utf8.count } })
        #expect(clients.allSatisfy { $0.response?.text == all })
    }

    @Test("a deferred handler can answer with a stream")
    func deferredStream() throws {
        let fixture = try StreamServer()
        let client = try WireClient(port: fixture.port, get: "/deferred-stream?n=7")
        #expect(client.read { $0.response?.text == "data: first\n\n" })
        #expect(client.response?.header("content-type") == ServerSentEvents.contentType)
        let stream = try fixture.streams.waitFor(7)
        stream.push("data: second\n\n")
        #expect(client.read { $0.response?.text == "data: first\n\ndata: second\n\n" })
    }

    @Test("an HTTP/1.0 client gets the stream unchunked, ended by the close")
    func http10() throws {
        let fixture = try StreamServer()
        let client = try WireClient(port: fixture.port, get: "/stream?n=1", version: "HTTP/1.0")
        let stream = try fixture.streams.waitFor(1)
        stream.push(Self.event(1))
        stream.push(Self.event(2))
        stream.end()
        #expect(client.read { $0.isClosed })
        let response = try #require(client.response)
        #expect(response.header("transfer-encoding") == nil && response.text == Self.event(1) + Self.event(2))
        #expect(eventually { stream.finishes == 1 })
    }

    @Test("HEAD on a stream sends the head only (no chunk, no length) and closes, and finishes the stream")
    func head() throws {
        let fixture = try StreamServer()
        let client = try WireClient(port: fixture.port)
        client.send("HEAD /stream?n=1 HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(client.read { $0.isClosed })
        #expect(client.response?.status == 200)
        // Nothing after the head: libmicrohttpd's `0\r\n\r\n` was read as the next response's start.
        let text = String(decoding: client.received, as: UTF8.self)
        #expect(text.hasSuffix("\r\n\r\n") && text.components(separatedBy: "\r\n\r\n").count == 2, "\(text)")
        #expect(client.response?.header("transfer-encoding") == nil && client.response?.header("content-length") == nil)
        let stream = try fixture.streams.waitFor(1)
        #expect(eventually { stream.finishes == 1 })
        #expect(stream.starts == 1)
    }

    @Test("a peer that goes away is found by the stream's next writes: finish() runs exactly once", arguments: [false, true])
    func deadPeer(isReset: Bool) throws {
        let fixture = try StreamServer()
        let (client, stream) = try Self.openStream(fixture, 1)
        stream.push(Self.event(1))
        #expect(client.read { $0.response?.text == Self.event(1) })
        client.disconnect(reset: isReset)
        // Heartbeats, as the event hub sends them: a write to the gone peer fails, and
        // libmicrohttpd closes the connection and frees the stream's response.
        #expect(eventually {
            stream.push(": heartbeat\n\n")
            return stream.finishes > 0
        })
        // Wakes after the end reach nothing.
        for _ in 0..<100 { stream.push(": heartbeat\n\n") }
        fixture.server.stop()
        #expect(stream.finishes == 1 && stream.starts == 1)
    }

    @Test("a waiting stream outlives the request deadline and the idle timeout")
    func notTimedOut() throws {
        let fixture = try StreamServer(connectionTimeout: 1, requestTimeout: 1)
        let (client, stream) = try Self.openStream(fixture, 1)
        stream.push(Self.event(1))
        #expect(client.read { $0.response?.text == Self.event(1) })
        // A connection that sends nothing is closed after a second; once it is, the
        // suspended stream has been waiting longer than both limits.
        let idle = try WireClient(port: fixture.port)
        #expect(idle.read(within: 15) { $0.isClosed })
        #expect(eventually { stream.waits > 0 })
        let idle2 = try WireClient(port: fixture.port)
        #expect(idle2.read(within: 15) { $0.isClosed })
        stream.push(Self.event(2))
        #expect(client.read { $0.response?.text == Self.event(1) + Self.event(2) })
        #expect(!client.isClosed && stream.finishes == 0)
    }

    @Test("the kernel gives up on a stream's silent peer after the connection timeout")
    func unacknowledgedTimeout() throws {
        let fixture = try StreamServer(connectionTimeout: 7)
        let (client, _) = try Self.openStream(fixture, 1)
        let plain = try WireClient(port: fixture.port, get: "/plain")
        #expect(plain.read { $0.response?.isComplete == true })
        func userTimeout(_ client: WireClient) -> UInt32? {
            guard let fd = serverSocket(serverPort: fixture.port, clientPort: client.localPort) else { return nil }
            var milliseconds: UInt32 = 0
            var length = socklen_t(MemoryLayout<UInt32>.size)
            guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &milliseconds, &length) == 0 else { return nil }
            return milliseconds
        }
        #expect(userTimeout(client) == 7000)
        #expect(userTimeout(plain) == 0)
    }

    @Test("after a stream ends, its stale wakes do not touch the connection's next request")
    func staleWake() throws {
        let fixture = try StreamServer()
        let (client, stream) = try Self.openStream(fixture, 1)
        let waker = try #require(stream.waker)
        stream.end()
        #expect(client.read { $0.response?.isComplete == true })
        #expect(eventually { stream.finishes == 1 })
        client.send("GET /deferred?n=2 HTTP/1.1\r\nHost: test\r\n\r\n")
        let respond = try fixture.replies.waitFor(2)
        for _ in 0..<1000 { waker.wake() }
        respond(.text("deferred"))
        #expect(client.read { String(decoding: $0.received, as: UTF8.self).hasSuffix("\r\n\r\ndeferred") })
    }

    /// The issue's shutdown test at server level: stop() under load, with 1,000 open streams
    /// (some suspended, some in the middle of long writes, some being woken all along) and
    /// deferred requests whose replies come while it stops.
    @Test("stop() with 1,000 open streams and deferred requests in flight ends every stream cleanly, within 5 s")
    func stopUnderLoad() throws {
        let fixture = try StreamServer()
        let streamCount = 1000
        let deferredCount = 50
        var clients: [WireClient] = []
        for number in 0..<streamCount { clients.append(try WireClient(port: fixture.port, get: "/stream?n=\(number)")) }
        #expect(WireClient.read(clients, within: 30) { $0.allSatisfy { $0.response != nil } })
        #expect(eventually(within: 30) { fixture.streams.count == streamCount })
        let streams = (0..<streamCount).map { fixture.streams[$0]! }
        #expect(streams.allSatisfy { $0.starts == 1 })

        var waiting: [WireClient] = []
        for number in 0..<deferredCount { waiting.append(try WireClient(port: fixture.port, get: "/deferred?n=\(number)")) }
        #expect(eventually(within: 30) { fixture.replies.count == deferredCount })

        // A quarter gets a long write (it is still being sent when stop() begins), a quarter
        // one event; the rest stay suspended until stop() resumes them.
        for (number, stream) in streams.enumerated() {
            switch number % 4 {
            case 0: stream.push(String(repeating: Self.event(number, size: 1000), count: 200))
            case 1: stream.push(Self.event(number))
            default: break
            }
        }

        // A thread waking streams throughout (and on after the stop), one answering the
        // deferred requests while the server stops, one stopping it; this one reads every
        // connection meanwhile, as clients do.
        let isStopped = Counter()
        let wakesAfterStop = Counter()
        let wakerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var number = 0
            while wakesAfterStop.current < 5000 {
                number = (number + 7) % streamCount
                streams[number].push(": heartbeat\n\n")
                if isStopped.current == 1 { wakesAfterStop.add() }
            }
            wakerDone.signal()
        }
        let replies = (0..<deferredCount).map { fixture.replies[$0]! }
        Thread.detachNewThread {
            for (number, respond) in replies.enumerated() { respond(.text("deferred \(number)")) }
        }
        let stopNanoseconds = Counter()
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let started = DispatchTime.now().uptimeNanoseconds
            fixture.server.stop()
            stopNanoseconds.set(Int(DispatchTime.now().uptimeNanoseconds - started))
            isStopped.set(1)
            stopped.signal()
        }
        let everyone = clients + waiting
        #expect(WireClient.read(everyone, within: 60) { $0.allSatisfy(\.isClosed) }, "connections still open after the stop")
        #expect(stopped.wait(timeout: .now() + 60) == .success)
        let seconds = Double(stopNanoseconds.current) / 1e9
        #expect(seconds < 5, "stop() took \(seconds) s")

        // Replies and wakes after the stop do nothing.
        for respond in replies { respond(.text("too late")) }
        #expect(wakerDone.wait(timeout: .now() + 30) == .success)

        for (number, client) in clients.enumerated() {
            let response = try #require(client.response)
            let stream = streams[number]
            #expect(response.status == 200 && response.isComplete && !response.isMalformed, "stream \(number) did not end cleanly")
            #expect(response.body == stream.handedOut, "stream \(number) lost or changed bytes")
            #expect(stream.starts == 1 && stream.finishes == 1, "stream \(number): started \(stream.starts), finished \(stream.finishes)")
        }
        for (number, client) in waiting.enumerated() {
            #expect(client.response?.status == 200 && client.response?.text == "deferred \(number)")
        }
    }

    @Test("stop() gives up on requests that do not finish in time: no suspended connection is left, and late replies and wakes do nothing")
    func stopAbandons() throws {
        let fixture = try StreamServer()
        // A deferred request never answered in time, and a stream whose client reads nothing
        // (its socket buffers fill, so its end cannot be sent).
        let pending = try WireClient(port: fixture.port, get: "/deferred?n=1")
        let respond = try fixture.replies.waitFor(1)
        let stuck = try WireClient(port: fixture.port, get: "/stream?n=2", receiveBuffer: 4096)
        let stream = try fixture.streams.waitFor(2)
        let waker = try #require(stream.waker)
        // Small kernel buffers on both sides hold less than one chunk (about 32 KiB), so
        // the server is stuck in the middle of its first chunk, which it can never finish.
        let stuckSocket = try #require(serverSocket(serverPort: fixture.port, clientPort: stuck.localPort))
        var sendBuffer: Int32 = 4096
        setsockopt(stuckSocket, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        stream.push(String(repeating: Self.event(1, size: 10_000), count: 200))
        #expect(eventually(within: 30) {
            var descriptor = pollfd(fd: stuckSocket, events: Int16(POLLOUT), revents: 0)
            return poll(&descriptor, 1, 0) == 0
        })
        // A suspended stream next to them.
        let (reader, suspended) = try Self.openStream(fixture, 3)

        fixture.server.stop(drainSeconds: 0.5)

        respond(.text("too late"))
        waker.wake()
        suspended.push("data: after\n\n")
        #expect(pending.read { $0.isClosed } && pending.response == nil)
        #expect(reader.read { $0.isClosed } && reader.response?.isComplete == true)
        #expect(stream.finishes == 1 && suspended.finishes == 1)
        // The stuck client got part of its stream, and no clean end.
        #expect(stuck.read { $0.isClosed } && stuck.response?.isComplete == false && stuck.response?.isMalformed == false)
        #expect(stream.handedOut.count <= stream.largestBuffer)
    }

    @Test("requests that come while the server stops get 503; a stream queued then ends at once")
    func queuedWhileStopping() throws {
        let fixture = try StreamServer()
        // A deferred request answered with a stream only once the stop has begun.
        let client = try WireClient(port: fixture.port, get: "/deferred?n=1")
        let respond = try fixture.replies.waitFor(1)
        let streamAfterStop = QueueStream(Array("data: never\n\n".utf8))
        let probe = try WireClient(port: fixture.port)
        // Answered once before the stop, so the server has accepted this connection: one still
        // in the listening socket's backlog when the stop begins is turned away instead.
        probe.send("GET /plain HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try probe.readResponse(within: 10).status == 200)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            fixture.server.stop()
            stopped.signal()
        }
        // The stop waits for the deferred request; once it has begun, the server refuses
        // new requests, which a kept-alive connection sees.
        #expect(eventually {
            probe.send("GET /plain HTTP/1.1\r\nHost: test\r\n\r\n")
            return (try? probe.readResponse(within: 5))?.status == 503
        })
        respond(.eventStream(streamAfterStop))
        #expect(client.read { $0.isClosed })
        let response = try #require(client.response)
        #expect(response.status == 200 && response.isComplete && response.body.isEmpty)
        #expect(stopped.wait(timeout: .now() + 30) == .success)
        #expect(streamAfterStop.starts == 1 && streamAfterStop.finishes == 1)
    }
}
