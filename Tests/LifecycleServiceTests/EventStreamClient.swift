import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A client for `text/event-stream` responses over one TCP connection: reads the response
/// head, decodes the chunked body as it arrives and parses events. Every read has a
/// deadline, so a test never hangs on a stream that stays silent.
final class EventStreamClient {
    private let fd: Int32
    private var raw: [UInt8] = []
    /// Decoded body bytes not yet parsed into events.
    private var text: [UInt8] = []
    private var pendingChunk = 0
    private var isChunked = true
    /// Set when the body ended cleanly (the zero-length chunk).
    private(set) var hasEnded = false
    /// Set when the connection closed without a clean end.
    private(set) var wasCut = false
    private(set) var status = 0
    private(set) var headers: [(name: String, value: String)] = []
    /// Comment lines seen (without the colon), e.g. heartbeats.
    private(set) var comments: [String] = []
    /// The last `retry:` value seen.
    private(set) var retry: Int?
    /// Blocks parsed but not yet returned.
    private var parsed: ArraySlice<StreamEvent> = []

    /// Connects and sends `GET path` with the given headers; reads the response head.
    /// `receiveBuffer` shrinks the socket's receive buffer, for a reader that falls behind.
    init(port: UInt16, path: String, headers: [(String, String)] = [], headTimeout: Double = 10, receiveBuffer: Int32? = nil) throws {
        fd = try connectLoopback(port: port, receiveBuffer: receiveBuffer)
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8)
        guard bytes.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw HTTPClientError(description: "send failed")
        }
        try readHead(deadline: Date().addingTimeInterval(headTimeout))
    }

    deinit { close(fd) }

    func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }

    /// Closes the connection at once (the server sees a peer that went away).
    func disconnect() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Sends more bytes on the stream's connection (a pipelined request, say).
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The body of a response that is not a stream (an error's problem JSON).
    func readBody(deadline: Date = Date().addingTimeInterval(10)) -> [UInt8] {
        while !hasEnded, !wasCut, Date() < deadline { receive(until: deadline) }
        return text
    }

    /// The next event, or `nil` if none arrives before `timeout` or the stream ends.
    func next(timeout: Double = 10) -> StreamEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let event = parseOne() { return event }
            if hasEnded || wasCut || Date() >= deadline { return nil }
            receive(until: deadline)
        }
    }

    /// Events until `count` have arrived (or the timeout passes).
    func next(_ count: Int, timeout: Double = 20) -> [StreamEvent] {
        let deadline = Date().addingTimeInterval(timeout)
        var events: [StreamEvent] = []
        while events.count < count, let event = next(timeout: max(0, deadline.timeIntervalSinceNow)) { events.append(event) }
        return events
    }

    /// The stream's text, byte for byte, through its `count`th blank line (the end of its
    /// `count`th block), or all that arrived before the timeout; for comparing with a
    /// transcript. Not to be mixed with ``next(timeout:)`` on one stream.
    func text(blocks count: Int, timeout: Double = 10) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            var ends = 0
            for i in text.indices.dropLast() where text[i] == 10 && text[i + 1] == 10 {
                ends += 1
                if ends == count { return String(decoding: text[...(i + 1)], as: UTF8.self) }
            }
            if hasEnded || wasCut || Date() >= deadline { return String(decoding: text, as: UTF8.self) }
            receive(until: deadline)
        }
    }

    /// Waits until the stream ends or is cut; true if it ended within the timeout.
    func waitForEnd(timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !hasEnded, !wasCut, Date() < deadline {
            _ = parseOne()
            receive(until: deadline)
        }
        return hasEnded || wasCut
    }

    // MARK: reading

    private func readHead(deadline: Date) throws {
        while true {
            if let end = Self.find([13, 10, 13, 10], in: raw) {
                let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                raw.removeFirst(end + 4)
                let statusLine = lines[0].split(separator: " ")
                guard statusLine.count >= 2, let code = Int(statusLine[1]) else { throw HTTPClientError(description: "bad status line") }
                status = code
                headers = lines.dropFirst().compactMap { line in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                if header("transfer-encoding")?.lowercased() != "chunked" {
                    isChunked = false
                    pendingChunk = Int(header("content-length") ?? "0") ?? 0
                }
                decode()
                return
            }
            guard Date() < deadline else { throw HTTPClientError(description: "no response head in time") }
            receive(until: deadline)
            if wasCut { throw HTTPClientError(description: "connection closed before the response head") }
        }
    }

    /// Reads what arrives (waiting at most until `deadline`) and decodes it.
    private func receive(until deadline: Date) {
        let wait = max(0.001, min(1, deadline.timeIntervalSinceNow))
        var timeout = timeval(tv_sec: Int(wait), tv_usec: Int((wait - Double(Int(wait))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &chunk, chunk.count, 0)
        if count > 0 {
            raw += chunk[..<count]
            if status != 0 { decode() }
        } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            if !hasEnded { wasCut = true }
        }
    }

    /// Moves complete chunk payloads from `raw` to `text`.
    private func decode() {
        guard isChunked else {
            let take = min(pendingChunk, raw.count)
            text += raw[..<take]
            raw.removeFirst(take)
            pendingChunk -= take
            if pendingChunk == 0 { hasEnded = true }
            return
        }
        while !hasEnded {
            if pendingChunk > 0 {
                let take = min(pendingChunk, raw.count)
                guard take > 0 else { return }
                text += raw[..<take]
                raw.removeFirst(take)
                pendingChunk -= take
                if pendingChunk == 0 { pendingChunk = -2 }  // its CRLF follows
                continue
            }
            if pendingChunk == -2 {
                guard raw.count >= 2 else { return }
                raw.removeFirst(2)
                pendingChunk = 0
                continue
            }
            guard let lineEnd = Self.find([13, 10], in: raw) else { return }
            let sizeText = String(decoding: raw[..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            raw.removeFirst(lineEnd + 2)
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                wasCut = true
                return
            }
            if size == 0 { hasEnded = true } else { pendingChunk = size }
        }
    }

    /// The next block with data (comments and `retry:` are noted, not returned).
    private func parseOne() -> StreamEvent? {
        if parsed.isEmpty { parsed = parseEvents(&text)[...] }
        while let event = parsed.popFirst() {
            if let comment = event.comment { comments.append(comment) }
            if let value = event.retry { retry = value }
            if event.data != nil { return event }
        }
        return nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}
