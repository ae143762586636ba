// Linux only (Glibc's sockets): on Apple platforms URLSession reads streams and idles.
#if canImport(Glibc)
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import LifecycleLocks

/// A streaming `http://` request over a plain socket, read by a thread of its own that blocks
/// in `read` between events: an idle stream costs nothing.
///
/// FoundationNetworking on Linux cannot be idle: its libcurl driver keeps the socket's write
/// source after the request is sent, and a connected socket is always writable, so a stream
/// it holds open polls libcurl a few hundred times a second (most of a core). `https://`
/// still goes through URLSession, which holds the TLS this has none of.
///
/// It hands the answer on as ``StreamDelegate``'s messages do: the head, the body's bytes as
/// they come (chunked transfer coding removed), then the end and why.
final class StreamSocket: Sendable {
    private struct State {
        var descriptor: Int32 = -1
        var cancelled = false
    }

    private let state = LockedValue(State())

    /// Starts the request on a thread; `continuation` gets its messages and is finished at its end.
    init(url: URL, request: URLRequest, timeout: TimeInterval, continuation: AsyncStream<StreamMessage>.Continuation) {
        let thread = Thread { [self] in
            let error = run(url: url, request: request, timeout: timeout, continuation: continuation)
            state.withLock { s in
                if s.descriptor >= 0 { close(s.descriptor) }
                s.descriptor = -1
            }
            continuation.yield(.finished(error))
            continuation.finish()
        }
        thread.name = "lifecycle-stream"
        thread.start()
    }

    /// Ends the request: a blocked `read` returns at once.
    func cancel() {
        state.withLock { s in
            s.cancelled = true
            if s.descriptor >= 0 { shutdown(s.descriptor, Int32(SHUT_RDWR)) }
        }
    }

    /// The request from connecting to its end; why it ended, `nil` for the answer's own end.
    private func run(url: URL, request: URLRequest, timeout: TimeInterval, continuation: AsyncStream<StreamMessage>.Continuation) -> String? {
        guard let host = url.host else { return "no host in \(url)" }
        let port = url.port ?? 80
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var addresses: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), String(port), &hints, &addresses)
        guard resolved == 0, let first = addresses else { return "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))" }
        defer { freeaddrinfo(addresses) }
        var reason = "no address to connect to (\(host):\(port))"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        var connected = false
        while let address = candidate, !connected {
            candidate = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.ai_protocol)
            guard descriptor >= 0 else { continue }
            // Linux bounds a blocking connect by the send timeout, and each read by the receive
            // timeout: the stream's bound on silence (the service's heartbeats keep it open).
            var limit = timeval(tv_sec: Int(timeout.asWait), tv_usec: Int((timeout.asWait.truncatingRemainder(dividingBy: 1)) * 1_000_000))
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            let isCancelled = state.withLock { s in
                s.descriptor = descriptor
                return s.cancelled
            }
            if isCancelled { return "cancelled" }
            if connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
                connected = true
            } else {
                reason = "\(String(cString: strerror(errno))) (\(host):\(port))"
                state.withLock { s in
                    close(s.descriptor)
                    s.descriptor = -1
                }
            }
        }
        guard connected else { return reason }
        // A shutdown does not end a connect under way: a cancel that came during one ends here.
        if state.withLock({ $0.cancelled }) { return "cancelled" }
        guard send(Self.head(url: url, request: request, host: host, port: port)) else { return "the connection closed while sending the request" }
        var reader = HTTPStreamReader()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let descriptor = state.withLock { $0.descriptor }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? "timed out: nothing for \(Int(timeout)) s" : String(cString: strerror(errno))
            }
            if state.withLock({ $0.cancelled }) { return "cancelled" }
            do {
                for message in try reader.feed(buffer[..<count], ended: count == 0) { continuation.yield(message) }
            } catch {
                return error.description
            }
            if reader.isComplete { return nil }
            if count == 0 { return "the connection closed before the answer ended" }
        }
    }

    /// Writes all of `bytes`; whether it could.
    private func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let descriptor = state.withLock { $0.descriptor }
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// The request's head: its method, target and headers, and `Connection: close`, since the
    /// socket serves this one request.
    static func head(url: URL, request: URLRequest, host: String, port: Int) -> [UInt8] {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var target = components?.percentEncodedPath ?? "/"
        if target.isEmpty { target = "/" }
        if let query = components?.percentEncodedQuery { target += "?" + query }
        let name = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        var text = "\(request.httpMethod ?? "GET") \(target) HTTP/1.1\r\nHost: \(name)\(url.port.map { ":\($0)" } ?? "")\r\n"
        for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "host" && name.lowercased() != "connection" {
            text += "\(name): \(value)\r\n"
        }
        text += "Connection: close\r\n\r\n"
        return Array(text.utf8)
    }
}

/// What a streaming request hands on, in order: its head once, the body's bytes, its end.
enum StreamMessage: Sendable {
    case opened(status: Int, headers: [String: String])
    case data(Data)
    /// The end: `nil` when the answer ended, else why it did not.
    case finished(String?)
}

/// An HTTP/1.1 answer read as its bytes arrive: the head, then the body (chunked, of a
/// `Content-Length`, or to the connection's end), as messages. No I/O.
struct HTTPStreamReader {
    /// Why an answer could not be read.
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    private enum Phase {
        case head
        case body(remaining: Int?)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailers
        case complete
    }

    private var phase = Phase.head
    private var pending: [UInt8] = []
    /// Whether the answer ended as its framing says (or with the connection, when that is its framing).
    var isComplete: Bool {
        if case .complete = phase { true } else { false }
    }

    /// Where `needle` first occurs in `bytes`: Collection's `firstRange(of:)` needs iOS 16.
    private static func range(of needle: [UInt8], in bytes: [UInt8]) -> Range<Int>? {
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<start + needle.count].elementsEqual(needle) {
            return start..<start + needle.count
        }
        return nil
    }

    /// Takes the next bytes (`ended`: the connection closed after them); the messages they complete.
    mutating func feed(_ bytes: ArraySlice<UInt8>, ended: Bool) throws(Malformed) -> [StreamMessage] {
        pending += bytes
        var messages: [StreamMessage] = []
        var progressed = true
        while progressed {
            progressed = false
            switch phase {
            case .head:
                guard let end = Self.range(of: [13, 10, 13, 10], in: pending) else {
                    if pending.count > 65_536 { throw Malformed(description: "an answer head longer than 64 KiB") }
                    break
                }
                let (status, headers) = try Self.head(pending[..<end.lowerBound])
                pending.removeSubrange(..<end.upperBound)
                messages.append(.opened(status: status, headers: headers))
                let header = { (name: String) in headers.first { $0.key.lowercased() == name }?.value }
                if header("transfer-encoding")?.lowercased().contains("chunked") == true {
                    phase = .chunkSize
                } else if let length = header("content-length").flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), length >= 0 {
                    phase = length == 0 ? .complete : .body(remaining: length)
                } else {
                    phase = .body(remaining: nil)
                }
                progressed = true
            case .body(let remaining):
                guard !pending.isEmpty else { break }
                let take = remaining.map { min($0, pending.count) } ?? pending.count
                messages.append(.data(Data(pending[..<take])))
                pending.removeFirst(take)
                if let remaining { phase = remaining == take ? .complete : .body(remaining: remaining - take) }
                progressed = true
            case .chunkSize:
                guard let end = Self.range(of: [13, 10], in: pending) else { break }
                let line = String(decoding: pending[..<end.lowerBound], as: UTF8.self)
                guard let size = Int(line.split(separator: ";").first?.trimmingCharacters(in: .whitespaces) ?? "", radix: 16), size >= 0 else {
                    throw Malformed(description: "a chunk size that is not one: \(line.prefix(40))")
                }
                pending.removeSubrange(..<end.upperBound)
                phase = size == 0 ? .trailers : .chunkData(remaining: size)
                progressed = true
            case .chunkData(let remaining):
                guard !pending.isEmpty else { break }
                let take = min(remaining, pending.count)
                messages.append(.data(Data(pending[..<take])))
                pending.removeFirst(take)
                phase = remaining == take ? .chunkEnd : .chunkData(remaining: remaining - take)
                progressed = true
            case .chunkEnd:
                guard pending.count >= 2 else { break }
                guard pending.starts(with: [13, 10]) else { throw Malformed(description: "a chunk not followed by CRLF") }
                pending.removeFirst(2)
                phase = .chunkSize
                progressed = true
            case .trailers:
                guard let end = Self.range(of: [13, 10], in: pending) else { break }
                let isLast = end.lowerBound == pending.startIndex
                pending.removeSubrange(..<end.upperBound)
                if isLast { phase = .complete }
                progressed = true
            case .complete:
                break
            }
        }
        if ended, case .body(nil) = phase { phase = .complete }
        return messages
    }

    /// The status and headers of a head (its lines without the blank one).
    private static func head(_ bytes: ArraySlice<UInt8>) throws(Malformed) -> (Int, [String: String]) {
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let parts = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...599).contains(status) else {
            throw Malformed(description: "not an HTTP/1.1 status line: \(lines.first?.prefix(40) ?? "")")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers)
    }
}
#endif
