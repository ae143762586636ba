import Foundation
import LifecycleLog
import LifecycleTestSupport
import LifecycleHTTP
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// A response stream fed by the test: bytes pushed from any thread are handed to the server
/// as it reads, as much as fits at once; it keeps count of what the server did with it.
final class QueueStream: ResponseStream {
    struct State {
        var pending: [UInt8] = []
        /// Bytes of `pending` already handed out.
        var offset = 0
        var isEnding = false
        var waker: StreamWaker?
        var starts = 0
        var finishes = 0
        var waits = 0
        var largestBuffer = 0
        /// Every byte handed to the server, in order.
        var handedOut: [UInt8] = []
    }

    let state = LockedValue(State())

    init(_ initial: [UInt8] = []) {
        state.withLock { $0.pending = initial }
    }

    func start(waker: StreamWaker) {
        state.withLock {
            $0.waker = waker
            $0.starts += 1
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        state.withLock { state in
            state.largestBuffer = max(state.largestBuffer, buffer.count)
            let offset = state.offset
            if offset == state.pending.count {
                if state.isEnding { return .end }
                state.waits += 1
                return .wait
            }
            let count = min(buffer.count, state.pending.count - offset)
            state.pending.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + count])) }
            state.handedOut += state.pending[offset..<offset + count]
            state.offset += count
            if state.offset == state.pending.count {
                state.pending.removeAll(keepingCapacity: true)
                state.offset = 0
            }
            return .wrote(count)
        }
    }

    func finish() {
        state.withLock { $0.finishes += 1 }
    }

    /// Queues bytes and wakes the connection, holding the stream's lock as a hub
    /// publishing under its lock would.
    func push(_ bytes: [UInt8]) {
        state.withLock { state in
            state.pending += bytes
            state.waker?.wake()
        }
    }

    func push(_ text: String) { push(Array(text.utf8)) }

    /// Ends the body once what is queued has been read.
    func end() {
        state.withLock { state in
            state.isEnding = true
            state.waker?.wake()
        }
    }

    var starts: Int { state.withLock { $0.starts } }
    var finishes: Int { state.withLock { $0.finishes } }
    var waits: Int { state.withLock { $0.waits } }
    var largestBuffer: Int { state.withLock { $0.largestBuffer } }
    var handedOut: [UInt8] { state.withLock { $0.handedOut } }
    var waker: StreamWaker? { state.withLock { $0.waker } }
}

/// A stream whose first read blocks until the test releases it, then sends `data: late`.
final class BlockingStream: ResponseStream {
    let release = DispatchSemaphore(value: 0)
    /// Signalled when the first read begins.
    let reading = DispatchSemaphore(value: 0)
    private let state = LockedValue((reads: 0, sent: false))

    func start(waker: StreamWaker) {}

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        let first = state.withLock { state in
            state.reads += 1
            return state.reads == 1
        }
        if first {
            reading.signal()
            release.wait()
        }
        return state.withLock { state in
            guard !state.sent else { return .wait }
            state.sent = true
            let bytes = Array("data: late\n\n".utf8)
            bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
            return .wrote(bytes.count)
        }
    }

    func finish() {}
}

/// Values registered by number from the server's handlers, for the test to find.
final class Registry<Value: Sendable>: Sendable {
    private let items = LockedValue<[Int: Value]>([:])

    func set(_ number: Int, _ value: Value) { items.withLock { $0[number] = value } }
    func take(_ number: Int) -> Value? { items.withLock { $0.removeValue(forKey: number) } }
    subscript(number: Int) -> Value? { items.withLock { $0[number] } }
    var count: Int { items.withLock { $0.count } }
    var all: [Int: Value] { items.withLock { $0 } }

    /// The value for `number` once a handler has registered it (within 10 s).
    func waitFor(_ number: Int) throws -> Value {
        var found: Value?
        _ = eventually { found = self[number]; return found != nil }
        guard let found else { throw HTTPClientError(description: "no handler registered \(number)") }
        return found
    }
}

/// A real ``HTTPServer`` whose routes hand their streams and deferred replies to the test:
/// `GET /stream?n=N` answers with a ``QueueStream`` (registered as N), `GET /deferred?n=N`
/// answers when the test calls the registered reply, `GET /deferred-stream?n=N` answers
/// with a stream from another thread, `GET /blocking-stream?n=N` with a ``BlockingStream``,
/// `GET /plain` at once.
final class StreamServer: Sendable {
    let server: HTTPServer
    let streams = Registry<QueueStream>()
    let blocking = Registry<BlockingStream>()
    let replies = Registry<@Sendable (Response) -> Void>()

    init(
        threads: Int = 2, connectionTimeout: Int = 60, requestTimeout: Int = 30, maxConnectionsPerClient: Int = 4096,
        logLevel: LineLogger.Level = .error
    ) throws {
        var router = Router()
        let streams = streams
        let replies = replies
        let blocking = blocking
        router.get("/blocking-stream") { request in
            let stream = BlockingStream()
            blocking.set(Int(request.query("n") ?? "") ?? 0, stream)
            return .eventStream(stream)
        }
        router.get("/stream") { request in
            let stream = QueueStream()
            streams.set(Int(request.query("n") ?? "") ?? 0, stream)
            return .eventStream(stream)
        }
        router.addDeferred(.get, "/deferred") { request, respond in
            replies.set(Int(request.query("n") ?? "") ?? 0, respond)
        }
        router.addDeferred(.get, "/deferred-stream") { request, respond in
            let stream = QueueStream(Array("data: first\n\n".utf8))
            streams.set(Int(request.query("n") ?? "") ?? 0, stream)
            Thread.detachNewThread { respond(.eventStream(stream)) }
        }
        router.get("/plain") { _ in .text("plain") }
        let routes = router
        server = HTTPServer(
            configuration: ServerConfiguration(
                port: 0, threads: threads, connectionTimeout: connectionTimeout, requestTimeout: requestTimeout,
                maxConnectionsPerClient: maxConnectionsPerClient
            ),
            logger: LineLogger(level: logLevel),
            pipeline: Pipeline(router: routes)
        )
        try server.start()
    }

    deinit { server.stop() }

    var port: UInt16 { server.port }
}

/// The server's end of a loopback connection, found among this process's descriptors (the
/// server runs in the test process): the socket on `serverPort` whose peer is `clientPort`.
func serverSocket(serverPort: UInt16, clientPort: UInt16) -> Int32? {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for name in descriptors {
        guard let fd = Int32(name) else { continue }
        var local = sockaddr_in()
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let isSocket = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } } == 0
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
        guard isSocket, local.sin_family == sa_family_t(AF_INET),
              withUnsafeMutablePointer(to: &peer, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }) == 0
        else { continue }
        if UInt16(bigEndian: local.sin_port) == serverPort, UInt16(bigEndian: peer.sin_port) == clientPort { return fd }
    }
    return nil
}

/// A count shared with other threads.
final class Counter: Sendable {
    private let value = LockedValue<Int>(0)

    func add(_ amount: Int = 1) { value.withLock { $0 += amount } }
    func set(_ amount: Int) { value.withLock { $0 = amount } }
    var current: Int { value.withLock { $0 } }
}
