import Foundation
import LifecycleHTTP
import LifecycleLocks
import LifecycleService
import OwnLoopEpoll

// `own-loop LIFECYCLED_FLAGS…` (Benchmarks/http-bench.sh starts it): lifecycled's service, with
// the configuration its flags give (`--port --data-dir`, as `make run`), served over an HTTP/1.1
// loop of a few hundred lines instead of libmicrohttpd. It answers what would replacing
// libmicrohttpd buy: the same store, registry, router and middlewares (`Service.pipeline`),
// with the request head read in place and each response head written whole, in one send.
//
// A measuring tool, not a server to run: it skips what the real layer does beyond the path of
// a well-formed request, so its figure is an upper bound for a layer of our own. Not here:
// the connection machine's checks (Host, framing, limits, the request deadline), the target's
// decoding (a path is taken as sent), chunked bodies, streams (answered 501), connection limits.
// By callgrind those of them on a GET's path cost about 4.4k of lifecycled's 72.7k instructions.
//
// Each of the configuration's threads runs one epoll loop. The listening socket is in every
// loop's set (EPOLLEXCLUSIVE: one loop wakes for a new connection); a connection stays on the
// loop that accepted it. A handler that answers later (a durable write, on the committer
// thread) hands its answer to the connection's loop through the loop's queue and eventfd; the
// loop finishes it through the middlewares, as lifecycled's server does, and writes it.

let arguments = Array(CommandLine.arguments.dropFirst())
let configuration: Configuration
let service: Service
do {
    configuration = try Configuration.parse(arguments: arguments, environment: ProcessInfo.processInfo.environment)
    service = try Service(configuration: configuration, listening: false)
} catch {
    FileHandle.standardError.write(Data("own-loop: \(error)\n".utf8))
    exit(1)
}
let pipeline = service.pipeline

func fail(_ what: String) -> Never {
    FileHandle.standardError.write(Data("own-loop: \(what): \(String(cString: strerror(errno)))\n".utf8))
    exit(1)
}

let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
var on: Int32 = 1
setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
var address = sockaddr_in()
address.sin_family = sa_family_t(AF_INET)
address.sin_port = configuration.port.bigEndian
guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else { fail("--host must be an IPv4 address here") }
let bound = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
}
guard bound == 0, listen(listener, 1024) == 0 else { fail("cannot listen on \(configuration.host):\(configuration.port)") }

/// One connection, owned by its loop's thread.
final class Connection: @unchecked Sendable {  // other threads only carry it back to its loop

    let descriptor: Int32
    /// Bytes read and not yet taken by a request.
    var input: UnsafeMutableRawPointer
    var capacity = 16 * 1024
    var count = 0
    /// Bytes of responses not yet sent.
    var output: [UInt8] = []
    var sent = 0
    /// A handler answers later: nothing more is read as a request until it does.
    var isWaiting = false
    var isClosed = false
    var closesAfterOutput = false
    /// Output waits for the socket to take more: EPOLLOUT is watched.
    var isWatchingOutput = false

    init(descriptor: Int32) {
        self.descriptor = descriptor
        input = .allocate(byteCount: capacity, alignment: 1)
        output.reserveCapacity(1024)
    }

    deinit { input.deallocate() }
}

/// One thread's epoll loop. Only `answers` is touched by other threads.
final class Loop: @unchecked Sendable {  // its other state is its own thread's alone
    let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    let wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    /// Deferred answers, for the loop to finish and write.
    let answers = LockedValue<[(Connection, Request, Response)]>([])
    private var connections = [Connection?](repeating: nil, count: 1 << 16)
    private var dateSecond = 0
    private var dateLine: [UInt8] = []

    init() {
        add(listener, events: EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue)
        add(wake, events: EPOLLIN.rawValue)
    }

    private func add(_ descriptor: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = descriptor
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event) == 0 else { fail("epoll_ctl") }
    }

    private func watchOutput(_ connection: Connection, _ watch: Bool) {
        guard connection.isWatchingOutput != watch else { return }
        connection.isWatchingOutput = watch
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (watch ? EPOLLOUT.rawValue : 0)
        event.data.fd = connection.descriptor
        epoll_ctl(epoll, EPOLL_CTL_MOD, connection.descriptor, &event)
    }

    /// From any thread: a deferred answer to `request` on `connection`.
    func answer(_ response: Response, to request: Request, on connection: Connection) {
        answers.withLock { $0.append((connection, request, response)) }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    func run() -> Never {
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        while true {
            let ready = epoll_wait(epoll, &events, Int32(events.count), -1)
            guard ready > 0 else { continue }
            for index in 0..<Int(ready) {
                let descriptor = events[index].data.fd
                if descriptor == listener {
                    accept()
                } else if descriptor == wake {
                    answerDeferred()
                } else if let connection = connections[Int(descriptor)] {
                    let flags = events[index].events
                    if flags & EPOLLOUT.rawValue != 0 { flush(connection) }
                    if flags & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { receive(connection) }
                }
            }
        }
    }

    private func accept() {
        while true {
            let descriptor = own_loop_accept(listener)
            guard descriptor >= 0 else { return }
            guard Int(descriptor) < connections.count else { close(descriptor); continue }
            var noDelay: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            connections[Int(descriptor)] = Connection(descriptor: descriptor)
            add(descriptor, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        }
    }

    private func receive(_ connection: Connection) {
        if connection.count == connection.capacity {
            // A head or body larger than the buffer: grow it (a real layer bounds this).
            connection.capacity *= 2
            let grown = UnsafeMutableRawPointer.allocate(byteCount: connection.capacity, alignment: 1)
            grown.copyMemory(from: connection.input, byteCount: connection.count)
            connection.input.deallocate()
            connection.input = grown
        }
        let read = recv(connection.descriptor, connection.input + connection.count, connection.capacity - connection.count, 0)
        if read < 0, errno == EAGAIN { return }
        guard read > 0 else { return closeConnection(connection) }
        connection.count += read
        serve(connection)
    }

    private func closeConnection(_ connection: Connection) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        epoll_ctl(epoll, EPOLL_CTL_DEL, connection.descriptor, nil)
        connections[Int(connection.descriptor)] = nil
        close(connection.descriptor)
    }

    private func answerDeferred() {
        var value: UInt64 = 0
        _ = read(wake, &value, 8)
        let taken = answers.withLock { answers in
            defer { answers.removeAll(keepingCapacity: true) }
            return answers
        }
        for (connection, request, response) in taken where !connection.isClosed {
            var response = response
            // Here, on the connection's thread, as lifecycled's server does.
            pipeline.finish(request, &response)
            connection.isWaiting = false
            append(response, for: request, to: connection)
            serve(connection)
        }
    }

    /// Answers every whole request in the buffer, in order, until one is deferred; then sends.
    private func serve(_ connection: Connection) {
        var start = 0
        while !connection.isWaiting, !connection.closesAfterOutput {
            let bytes = UnsafeRawBufferPointer(start: connection.input + start, count: connection.count - start)
            guard let head = Head(bytes) else { break }
            if head.isMalformed {
                append(.problem(Problem(status: 400, title: "Bad Request", detail: "malformed request head")), for: nil, to: connection)
                connection.closesAfterOutput = true
                start = connection.count
                break
            }
            guard bytes.count >= head.size + head.contentLength else { break }
            var request = Request(
                method: head.method, path: head.path, headers: head.headers, query: head.query,
                body: Array(UnsafeRawBufferPointer(rebasing: bytes[head.size..<(head.size + head.contentLength)])),
                clientAddress: "127.0.0.1"
            )
            start += head.size + head.contentLength
            if head.closes { connection.closesAfterOutput = true }
            if let refusal = pipeline.admit(&request) {
                append(refusal, for: request, to: connection)
                continue
            }
            switch pipeline.start(&request) {
            case .now(var response):
                pipeline.finish(request, &response)
                append(response, for: request, to: connection)
            case .later(let begin):
                connection.isWaiting = true
                begin { [self, request] response in answer(response, to: request, on: connection) }
            }
        }
        if start > 0 {
            connection.count -= start
            if connection.count > 0 { memmove(connection.input, connection.input + start, connection.count) }
        }
        flush(connection)
    }

    /// The response's bytes, head and body, after any still unsent.
    private func append(_ response: Response, for request: Request?, to connection: Connection) {
        var output = connection.output
        connection.output = []
        defer { connection.output = output }
        var response = response
        if case .stream = response.body {
            _ = response.forHEAD()
            response = .problem(Problem(status: 501, title: "Not Implemented", detail: "own-loop serves no streams"))
        }
        output.append(contentsOf: "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n".utf8)
        output.append(contentsOf: date())
        for (name, value) in response.headers {
            output.append(contentsOf: name.utf8)
            output.append(0x3A)
            output.append(0x20)
            output.append(contentsOf: value.utf8)
            output.append(0x0D)
            output.append(0x0A)
        }
        let body = response.body.bytes ?? []
        if response.status != 204, response.status != 304 {
            output.append(contentsOf: "Content-Length: \(body.count)\r\n".utf8)
        }
        if connection.closesAfterOutput { output.append(contentsOf: "Connection: close\r\n".utf8) }
        output.append(0x0D)
        output.append(0x0A)
        if request?.method != "HEAD", response.status != 204, response.status != 304 { output.append(contentsOf: body) }
    }

    private func flush(_ connection: Connection) {
        guard !connection.isClosed else { return }
        while connection.sent < connection.output.count {
            let sent = connection.output.withUnsafeBytes { bytes in
                send(connection.descriptor, bytes.baseAddress! + connection.sent, bytes.count - connection.sent, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                guard errno == EAGAIN else { return closeConnection(connection) }
                // The rest once the socket takes more.
                return watchOutput(connection, true)
            }
            connection.sent += sent
        }
        connection.output.removeAll(keepingCapacity: true)
        connection.sent = 0
        watchOutput(connection, false)
        if connection.closesAfterOutput, !connection.isWaiting { closeConnection(connection) }
    }

    /// `Date: …\r\n`, made again once a second.
    private func date() -> [UInt8] {
        var now = time(nil)
        if Int(now) != dateSecond {
            dateSecond = Int(now)
            var parts = tm()
            gmtime_r(&now, &parts)
            var text = [CChar](repeating: 0, count: 64)
            strftime(&text, text.count, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &parts)
            dateLine = Array(text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
        }
        return dateLine
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 409: "Conflict"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}

/// A request's head read where it lies in the buffer: `nil` until all of it has arrived.
struct Head {
    var method = ""
    var path = ""
    var query: [(name: String, value: String)] = []
    var headers: [(name: String, value: String)] = []
    /// Bytes of the request line and the header fields, with the blank line.
    var size = 0
    var contentLength = 0
    var closes = false
    var isMalformed = false

    init?(_ bytes: UnsafeRawBufferPointer) {
        // The end of the head: the first empty line.
        var lineStart = 0
        var lines: [Range<Int>] = []
        var index = 0
        while true {
            guard index < bytes.count, let found = memchr(bytes.baseAddress! + index, 0x0A, bytes.count - index) else { return nil }
            let newline = bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
            let end = newline > lineStart && bytes[newline - 1] == 0x0D ? newline - 1 : newline
            index = newline + 1
            if end == lineStart {
                size = index
                break
            }
            lines.append(lineStart..<end)
            lineStart = index
        }
        guard let requestLine = lines.first else {
            isMalformed = true
            return
        }
        let parts = bytes[requestLine].split(separator: 0x20)
        guard parts.count == 3 else {
            isMalformed = true
            return
        }
        method = String(decoding: parts[0], as: UTF8.self)
        let target = parts[1]
        if let question = target.firstIndex(of: 0x3F) {
            path = String(decoding: target[..<question], as: UTF8.self)
            for pair in target[(question + 1)...].split(separator: 0x26) {
                let split = pair.split(separator: 0x3D, maxSplits: 1, omittingEmptySubsequences: false)
                query.append((String(decoding: split[0], as: UTF8.self), split.count > 1 ? String(decoding: split[1], as: UTF8.self) : ""))
            }
        } else {
            path = String(decoding: target, as: UTF8.self)
        }
        let isHTTP10 = parts[2].elementsEqual("HTTP/1.0".utf8)
        closes = isHTTP10
        headers.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() {
            guard let colon = bytes[line].firstIndex(of: 0x3A) else {
                isMalformed = true
                return
            }
            let name = String(decoding: bytes[line.lowerBound..<colon].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
            var valueStart = colon + 1
            var valueEnd = line.upperBound
            while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            let value = String(decoding: bytes[valueStart..<valueEnd], as: UTF8.self)
            switch name {
            case "content-length": contentLength = Int(value) ?? 0
            case "connection": closes = value.lowercased() == "close" ? true : isHTTP10 && value.lowercased() != "keep-alive"
            default: break
            }
            headers.append((name, value))
        }
    }
}

let loops = (0..<configuration.threads).map { _ in Loop() }
for loop in loops {
    Thread.detachNewThread { loop.run() }
}
FileHandle.standardError.write(Data("own-loop: serving on \(configuration.host):\(configuration.port) with \(loops.count) loops\n".utf8))
// Serves until killed, as the bare server does.
while true { pause() }
