import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP client that sends bytes exactly as given and reads with deadlines, for tests of
/// malformed, slow and abusive clients. Nothing it does can block past its deadline.
final class RawSocket {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Set once the server has closed (end of stream or reset).
    private(set) var isClosed = false

    /// Connects to the server on 127.0.0.1, from `source` (any 127.x.y.z address, so one
    /// test can act as several clients).
    init(port: UInt16, from source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPClientError(description: "socket failed: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        if let source {
            var local = Self.address(source, port: 0)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0 else {
                // deinit closes it (see below).
                throw HTTPClientError(description: "bind to \(source) failed: \(String(cString: strerror(errno)))")
            }
        }
        var remote = Self.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else {
            // No close here: deinit closes it (it runs when an initializer throws after
            // setting every property), and closing twice could close another thread's descriptor.
            throw HTTPClientError(description: "connect to \(port) failed: \(String(cString: strerror(errno)))")
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    private static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// Sends everything, or returns false if the server has closed or reset the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// No more requests from this side (a half close).
    func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads what arrives within `seconds`, up to the server closing the connection.
    /// Returns false on timeout.
    private func fill(within seconds: Double) -> Bool {
        guard !isClosed else { return false }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        // A signal (a child process of another test ending) interrupts poll: wait on to the deadline.
        let deadline = Date().addingTimeInterval(seconds)
        var ready: Int32
        repeat {
            ready = poll(&descriptor, 1, Int32(max(0, deadline.timeIntervalSinceNow * 1000)))
        } while ready < 0 && errno == EINTR
        guard ready > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        var count: Int
        repeat { count = recv(fd, &chunk, chunk.count, 0) } while count < 0 && errno == EINTR
        if count <= 0 {
            isClosed = true
            return false
        }
        buffer += chunk[..<count]
        return true
    }

    /// Whether the server closes the connection within `seconds` (whatever it sends first
    /// stays readable with ``readResponse(within:)``).
    func waitForClose(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !isClosed {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            _ = fill(within: left)
        }
        return true
    }

    /// Everything received so far and until the server closes (or `seconds` pass).
    func readAll(within seconds: Double) -> [UInt8] {
        _ = waitForClose(within: seconds)
        defer { buffer = [] }
        return buffer
    }

    /// One response, by its Content-Length; throws if it does not arrive within `seconds`.
    func readResponse(within seconds: Double = 10, isHead: Bool = false) throws -> HTTPResponse {
        let deadline = Date().addingTimeInterval(seconds)
        func more() throws {
            let left = deadline.timeIntervalSinceNow
            if !fill(within: max(0, left)) {
                throw HTTPClientError(description: isClosed ? "connection closed" : "no response within \(seconds) s")
            }
        }
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = buffer.indices.dropLast(3).first { buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10 }
            if headerEnd == nil { try more() }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw HTTPClientError(description: "bad status line in \(head)") }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = HTTPResponse(status: status, headers: headers, body: [])
        let length = isHead || status == 204 || status == 304 ? 0 : Int(response.header("content-length") ?? "0") ?? 0
        while buffer.count < length { try more() }
        response.body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return response
    }
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while Date() < deadline
    return false
}
