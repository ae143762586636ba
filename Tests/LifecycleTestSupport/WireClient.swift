import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The tests' one HTTP client: one TCP connection to a loopback server. Bytes go out exactly
/// as given (``send(_:)-([UInt8])``, or a request ``request(_:_:headers:body:contentType:)``
/// writes); what comes back is read with a deadline every time, so that nothing a server does
/// can hang a test: raw bytes (``received``, ``readAll(within:)``), parsed responses
/// (``readResponse(within:isHead:)``, ``response``), chunked bodies and event streams (see
/// ``EventStream``). Several can be read from one thread (``read(_:within:until:)``).
public final class WireClient {
    private var fd: Int32
    /// Bytes received and not yet taken by a read of a response or a stream.
    public private(set) var received: [UInt8] = []
    /// The server closed the connection (end of stream or reset), or this side did.
    public private(set) var isClosed = false
    /// Seconds a read waits when not told otherwise.
    public let timeout: Double

    /// Connects to `host`:`port`. `source`: the local address to connect from (another
    /// loopback address, such as 127.0.0.2, to be another client). `receiveBuffer` shrinks
    /// the socket's receive buffer, for a client that reads slowly or not at all (the kernel
    /// then takes little on its behalf). `timeout`: seconds a read waits by default.
    public init(port: UInt16, host: String = "127.0.0.1", source: String? = nil, receiveBuffer: Int32? = nil, timeout: Double = 30) throws {
        self.timeout = timeout
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPClientError(description: "socket failed: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if let source {
            var local = Self.address(source, port: 0)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0 else {
                // No close here: deinit closes it (it runs when an initializer throws after
                // setting every property), and closing twice could close another thread's descriptor.
                throw HTTPClientError(description: "bind to \(source) failed: \(String(cString: strerror(errno)))")
            }
        }
        var remote = Self.address(host, port: port)
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw HTTPClientError(description: "connect to \(port) failed: \(String(cString: strerror(errno)))") }
        // Non-blocking from here: every read and write waits in poll(), with a deadline.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Connects and sends `GET target` (nothing else but `Host`).
    public convenience init(port: UInt16, get target: String, version: String = "HTTP/1.1", receiveBuffer: Int32? = nil) throws {
        try self.init(port: port, receiveBuffer: receiveBuffer)
        send("GET \(target) \(version)\r\nHost: test\r\n\r\n")
    }

    deinit { if fd >= 0 { close(fd) } }

    private static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// The local port, which the server sees as the client's.
    public var localPort: UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: address.sin_port)
    }

    // MARK: out

    /// Sends everything (waiting up to ``timeout`` for room), or returns false if the server
    /// has closed or reset the connection, or took nothing for that long.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        let deadline = Date().addingTimeInterval(timeout)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                offset += sent
            } else if sent < 0, errno == EAGAIN || errno == EINTR, Date() < deadline {
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 200)
            } else {
                return false
            }
        }
        return true
    }

    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Sends one request and reads its response (see ``readResponse(within:isHead:)``).
    /// `contentType` goes with a body.
    public func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil, contentType: String? = "application/json"
    ) throws -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body {
            if let contentType { head += "Content-Type: \(contentType)\r\n" }
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        guard send(Array(head.utf8) + (body ?? [])) else { throw HTTPClientError(description: "send failed: \(String(cString: strerror(errno)))") }
        return try readResponse(isHead: method == "HEAD")
    }

    public func request(_ method: String, _ path: String, json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, headers: headers, body: Array(json.utf8))
    }

    /// No more requests from this side (a half close).
    public func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Goes away as a client process that exits does: closes the socket (the kernel then
    /// answers the server's next data with a reset), or with `reset`, resets it at once.
    public func disconnect(reset: Bool = false) {
        guard fd >= 0 else { return }
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close(fd)
        fd = -1
        isClosed = true
    }

    // MARK: in

    /// Reads whatever is there without waiting.
    public func readAvailable() {
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

    /// Waits (up to `seconds`) for bytes or the close, and reads them; false if neither came.
    @discardableResult
    public func receive(within seconds: Double) -> Bool {
        guard !isClosed else { return false }
        let before = received.count
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        // A signal (a child process of another test ending) interrupts poll: wait on to the deadline.
        let deadline = Date().addingTimeInterval(seconds)
        var ready: Int32
        repeat {
            ready = poll(&descriptor, 1, Int32(max(0, deadline.timeIntervalSinceNow * 1000)))
        } while ready < 0 && errno == EINTR
        guard ready > 0 else { return false }
        readAvailable()
        return received.count > before || isClosed
    }

    /// Takes the first `count` bytes of ``received`` (a reader that has parsed them).
    public func consume(_ count: Int) { received.removeFirst(count) }

    /// Reads until `condition` holds (true) or `seconds` pass (false).
    public func read(within seconds: Double = 10, until condition: (WireClient) -> Bool) -> Bool {
        Self.read([self], within: seconds) { _ in condition(self) }
    }

    /// Reads all `clients` until `condition` holds for all of them, or `seconds` pass.
    public static func read(_ clients: [WireClient], within seconds: Double, until condition: ([WireClient]) -> Bool) -> Bool {
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

    /// Whether the server closes the connection within `seconds` (whatever it sends first
    /// stays readable).
    public func waitForClose(within seconds: Double) -> Bool {
        read(within: seconds) { $0.isClosed }
    }

    /// Whether the server closes the connection within `seconds` without sending anything more.
    public func isClosedByPeer(waitingSeconds seconds: Double = 2) -> Bool {
        let before = received.count
        return waitForClose(within: seconds) && received.count == before
    }

    /// Everything received so far and until the server closes (or `seconds` pass).
    public func readAll(within seconds: Double) -> [UInt8] {
        _ = waitForClose(within: seconds)
        defer { received = [] }
        return received
    }

    /// What has been received, parsed as a response (``HTTPResponse/parse(_:)``).
    public var response: HTTPResponse? { HTTPResponse.parse(received) }

    /// Reads one response head and takes it from ``received``; throws if it does not arrive
    /// within `seconds` (``timeout`` when `nil`).
    public func readHead(within seconds: Double? = nil) throws -> ResponseHead {
        let seconds = seconds ?? timeout
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let (head, bodyStart) = ResponseHead.parse(received[...]) {
                guard head.status != 0 else { throw HTTPClientError(description: "bad status line in \(String(decoding: received.prefix(bodyStart), as: UTF8.self))") }
                consume(bodyStart)
                return head
            }
            try more(until: deadline, seconds)
        }
    }

    /// Reads one response and takes it from ``received``: its head, and a body by its
    /// `Content-Length` (none for HEAD, 204 and 304). A chunked body is not waited for: it
    /// stays to be read as it arrives (``EventStream``, ``response``). Throws if the response
    /// does not arrive within `seconds` (``timeout`` when `nil`).
    public func readResponse(within seconds: Double? = nil, isHead: Bool = false) throws -> HTTPResponse {
        let seconds = seconds ?? timeout
        let deadline = Date().addingTimeInterval(seconds)
        let head = try readHead(within: seconds)
        var response = HTTPResponse(status: head.status, headers: head.headers, body: [])
        let length = isHead || head.status == 204 || head.status == 304 || head.isChunked ? 0 : head.contentLength ?? 0
        while received.count < length { try more(until: deadline, seconds) }
        response.body = Array(received[..<length])
        consume(length)
        return response
    }

    private func more(until deadline: Date, _ seconds: Double) throws {
        if !receive(within: max(0, deadline.timeIntervalSinceNow)) {
            throw HTTPClientError(description: isClosed ? "connection closed" : "no response within \(seconds) s")
        }
    }
}
