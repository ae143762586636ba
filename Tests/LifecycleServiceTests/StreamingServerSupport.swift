import Foundation
import Logging
import MicroHTTP
import Synchronization
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

    let state = Mutex(State())

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

/// Values registered by number from the server's handlers, for the test to find.
final class Registry<Value: Sendable>: Sendable {
    private let items = Mutex<[Int: Value]>([:])

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
/// with a stream from another thread, `GET /plain` at once.
final class StreamServer: Sendable {
    let server: HTTPServer
    let streams = Registry<QueueStream>()
    let replies = Registry<@Sendable (Response) -> Void>()

    init(
        threads: Int = 2, connectionTimeout: Int = 60, requestTimeout: Int = 30, maxConnectionsPerClient: Int = 4096,
        logLevel: Logger.Level = .error
    ) throws {
        var router = Router()
        let streams = streams
        let replies = replies
        router.get("/stream") { request in
            let stream = QueueStream()
            streams.set(Int(request.query("n") ?? "") ?? 0, stream)
            return .eventStream(stream)
        }
        router.addDeferred("GET", "/deferred") { request, respond in
            replies.set(Int(request.query("n") ?? "") ?? 0, respond)
        }
        router.addDeferred("GET", "/deferred-stream") { request, respond in
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
            logger: Logger(level: logLevel),
            pipeline: Pipeline(router: routes)
        )
        try server.start()
    }

    deinit { server.stop() }

    var port: UInt16 { server.port }
}

/// A response read off the wire whose body may be chunked.
struct WireResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    /// The body's chunks as they were framed (for a chunked body), or one piece.
    var chunks: [[UInt8]]
    /// The last chunk (`0`) arrived: the body ended cleanly.
    var isComplete: Bool
    /// The chunk framing is broken.
    var isMalformed: Bool

    var body: [UInt8] { chunks.flatMap { $0 } }
    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Parses a response from `bytes`; `nil` until its head has arrived. A body that is
    /// not chunked is everything after the head (`Content-Length` or up to the close).
    static func parse(_ bytes: [UInt8]) -> WireResponse? {
        guard let headEnd = bytes.indices.dropLast(3).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 })
        else { return nil }
        var lines = String(decoding: bytes[..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = WireResponse(
            status: statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0, headers: headers, chunks: [], isComplete: false, isMalformed: false
        )
        var position = headEnd + 4
        guard response.header("transfer-encoding")?.lowercased() == "chunked" else {
            let length = response.header("content-length").flatMap { Int($0) } ?? (bytes.count - position)
            response.chunks = [Array(bytes[position..<min(bytes.count, position + length)])]
            response.isComplete = bytes.count >= position + length
            return response
        }
        while position < bytes.count {
            guard let lineEnd = (position..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { break }
            guard let size = Int(String(decoding: bytes[position..<lineEnd], as: UTF8.self), radix: 16) else {
                response.isMalformed = true
                break
            }
            let dataStart = lineEnd + 2
            if size == 0 {
                // No trailers: the last chunk is followed by an empty line.
                if bytes.count >= dataStart + 2 {
                    response.isComplete = bytes[dataStart] == 13 && bytes[dataStart + 1] == 10
                    response.isMalformed = !response.isComplete
                }
                break
            }
            guard bytes.count >= dataStart + size + 2 else { break }
            guard bytes[dataStart + size] == 13, bytes[dataStart + size + 1] == 10 else {
                response.isMalformed = true
                break
            }
            response.chunks.append(Array(bytes[dataStart..<dataStart + size]))
            position = dataStart + size + 2
        }
        return response
    }
}

/// A client socket read without blocking, so that one thread can follow many streams.
final class StreamClient {
    private(set) var fd: Int32
    private(set) var received: [UInt8] = []
    /// The server closed the connection (end of stream or reset), or this side did.
    private(set) var isClosed = false

    /// `receiveBuffer` (bytes) keeps the kernel from taking much on this side's behalf,
    /// for a client that reads nothing.
    init(port: UInt16, receiveBuffer: Int32? = nil) throws {
        fd = try connectLoopback(port: port, receiveBuffer: receiveBuffer)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Connects and sends `GET target`.
    convenience init(port: UInt16, get target: String, version: String = "HTTP/1.1", receiveBuffer: Int32? = nil) throws {
        try self.init(port: port, receiveBuffer: receiveBuffer)
        send("GET \(target) \(version)\r\nHost: test\r\n\r\n")
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The local port, which the server sees as the client's.
    var localPort: UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: address.sin_port)
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                offset += sent
            } else if sent < 0, errno == EAGAIN {
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 1000)
            } else {
                return
            }
        }
    }

    /// Goes away as a client process that exits does: closes the socket (the kernel then
    /// answers the server's next data with a reset), or with `reset`, resets it at once.
    func disconnect(reset: Bool) {
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close(fd)
        fd = -1
        isClosed = true
    }

    /// Reads whatever is there without waiting.
    func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !isClosed {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count > 0 {
                received += chunk[..<count]
            } else if count < 0, errno == EINTR {
                continue
            } else if count == 0 || errno != EAGAIN {
                isClosed = true
            } else {
                return
            }
        }
    }

    var response: WireResponse? { WireResponse.parse(received) }

    /// Reads until `condition` holds (true) or `seconds` pass (false).
    func read(within seconds: Double = 10, until condition: (StreamClient) -> Bool) -> Bool {
        StreamClient.read([self], within: seconds) { _ in condition(self) }
    }

    /// Reads all `clients` until `condition` holds for all of them, or `seconds` pass.
    static func read(_ clients: [StreamClient], within seconds: Double, until condition: ([StreamClient]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var descriptors = clients.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        while true {
            for client in clients { client.readAvailable() }
            if condition(clients) { return true }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            for index in descriptors.indices { descriptors[index].fd = clients[index].isClosed ? -1 : clients[index].fd }
            _ = poll(&descriptors, nfds_t(descriptors.count), Int32(min(left, 0.2) * 1000))
        }
    }
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
    private let value = Atomic<Int>(0)

    func add(_ amount: Int = 1) { value.add(amount, ordering: .relaxed) }
    func set(_ amount: Int) { value.store(amount, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}
