import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A response as read off the wire.
struct HTTPResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (empty when it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
}

struct HTTPClientError: Error, CustomStringConvertible {
    var description: String
}

/// A blocking HTTP/1.1 client over one TCP connection, so tests can see keep-alive
/// and exact headers. Bodies are read by Content-Length.
final class HTTPConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// `source`: the local address to connect from (another loopback address, such as
    /// 127.0.0.2, to be another client); any when `nil`. `timeout`: seconds a read waits.
    init(port: UInt16, host: String = "127.0.0.1", source: String? = nil, timeout seconds: Int = 30) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPClientError(description: "socket failed") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw HTTPClientError(description: "bind to \(source) failed: \(String(cString: strerror(errno)))") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            // No close here: deinit closes it (it runs when an initializer throws after
            // setting every property), and closing twice could close another thread's descriptor.
            throw HTTPClientError(description: "connect to \(port) failed: \(String(cString: strerror(errno)))")
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw HTTPClientError(description: "send failed: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// Sends one request and reads its response.
    func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil, contentType: String? = "application/json"
    ) throws -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body {
            if let contentType { head += "Content-Type: \(contentType)\r\n" }
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
        return try readResponse(isHead: method == "HEAD")
    }

    func request(_ method: String, _ path: String, json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, headers: headers, body: Array(json.utf8))
    }

    func readResponse(isHead: Bool = false) throws -> HTTPResponse {
        var headerEnd: Int?
        while headerEnd == nil {
            if let range = findHeaderEnd() { headerEnd = range } else { try fill() }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw HTTPClientError(description: "bad status line") }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = HTTPResponse(status: status, headers: headers, body: [])
        let length = isHead || status == 204 || status == 304 ? 0 : Int(response.header("content-length") ?? "0") ?? 0
        while buffer.count < length { try fill() }
        response.body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return response
    }

    /// Whether the server closed the connection (reads end of stream within the timeout).
    func isClosedByPeer(waitingSeconds: Int = 2) -> Bool {
        var timeout = timeval(tv_sec: waitingSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    private func findHeaderEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        var count: Int
        // A signal (a child process of another test ending) interrupts recv: not an error.
        repeat { count = recv(fd, &chunk, chunk.count, 0) } while count < 0 && errno == EINTR
        guard count > 0 else { throw HTTPClientError(description: count == 0 ? "connection closed" : "recv failed: \(String(cString: strerror(errno)))") }
        buffer += chunk[..<count]
    }
}

/// A TCP socket connected to 127.0.0.1:`port` (close-on-exec); `receiveBuffer` shrinks its
/// receive buffer, for a client that reads slowly or not at all. The caller owns the descriptor.
func connectLoopback(port: UInt16, receiveBuffer: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw HTTPClientError(description: "socket failed: \(String(cString: strerror(errno)))") }
    if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw HTTPClientError(description: "connect to \(port) failed: \(reason)")
    }
    return fd
}
