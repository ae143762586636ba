import Foundation

/// One parsed block of an event stream (the lines up to an empty line).
public struct StreamEvent: Equatable, Sendable, CustomStringConvertible {
    public var id: Int64?
    public var type: String?
    public var data: String?
    public var comment: String?
    public var retry: Int?

    public init(id: Int64? = nil, type: String? = nil, data: String? = nil, comment: String? = nil, retry: Int? = nil) {
        self.id = id
        self.type = type
        self.data = data
        self.comment = comment
        self.retry = retry
    }

    /// A record: it has an id, a type and data.
    public var isRecord: Bool { id != nil && data != nil && ["record", "action", "relaunch", "dropped", "created", "deleted"].contains(type ?? "") }

    /// The data as a JSON object.
    public var json: [String: Any] {
        guard let data, let object = try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any] else { return [:] }
        return object
    }

    public var description: String { "{id \(id.map(String.init) ?? "-") \(type ?? "-") \(data ?? comment.map { ": \($0)" } ?? retry.map { "retry \($0)" } ?? "")}" }
}

/// Parses complete blocks of `text/event-stream` bytes; an unfinished block stays in `bytes`.
public func parseEvents(_ bytes: inout [UInt8]) -> [StreamEvent] {
    var events: [StreamEvent] = []
    var start = 0
    var index = 0
    while index + 1 < bytes.count {
        guard bytes[index] == 0x0A, bytes[index + 1] == 0x0A else {
            index += 1
            continue
        }
        var event = StreamEvent()
        for line in String(decoding: bytes[start..<index], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(": ") { event.comment = String(line.dropFirst(2)) }
            else if line.hasPrefix("id: ") { event.id = Int64(line.dropFirst(4)) }
            else if line.hasPrefix("event: ") { event.type = String(line.dropFirst(7)) }
            else if line.hasPrefix("data: ") { event.data = String(line.dropFirst(6)) }
            else if line.hasPrefix("retry: ") { event.retry = Int(line.dropFirst(7)) }
        }
        events.append(event)
        index += 2
        start = index
    }
    bytes.removeFirst(start)
    return events
}

/// A `text/event-stream` response read off a ``WireClient`` as it arrives: its head, its
/// chunked body decoded, its events parsed. Every read has a deadline, so a test never hangs
/// on a stream that stays silent.
public final class EventStream {
    /// The connection it reads (to send more on it, or to cut it).
    public let client: WireClient
    public let status: Int
    public let headers: [(name: String, value: String)]
    private var decoder = ChunkedDecoder()
    /// Bytes of a body that is not chunked still to come (an error's problem JSON).
    private var plainLeft: Int?
    /// Decoded body bytes not yet parsed into events.
    private var text: [UInt8] = []
    /// Comment lines seen (without the colon), e.g. heartbeats.
    public private(set) var comments: [String] = []
    /// The last `retry:` value seen.
    public private(set) var retry: Int?
    /// Blocks parsed but not yet returned.
    private var parsed: ArraySlice<StreamEvent> = []

    /// Connects and sends `GET path` with `Accept: text/event-stream` and the given
    /// headers; reads the response head within `headTimeout` seconds.
    public convenience init(port: UInt16, path: String, headers: [(String, String)] = [], headTimeout: Double = 10, receiveBuffer: Int32? = nil) throws {
        let client = try WireClient(port: port, receiveBuffer: receiveBuffer)
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        guard client.send(head) else { throw HTTPClientError(description: "send failed") }
        try self.init(client, headTimeout: headTimeout)
    }

    /// Reads a response on `client` (a request already sent) as a stream.
    public init(_ client: WireClient, headTimeout: Double = 10) throws {
        self.client = client
        do {
            let head = try client.readHead(within: headTimeout)
            status = head.status
            headers = head.headers
            if !head.isChunked { plainLeft = head.contentLength ?? 0 }
        } catch {
            throw HTTPClientError(description: client.isClosed ? "connection closed before the response head" : "no response head in time")
        }
        decode()
    }

    public func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }

    /// The body ended cleanly (the zero-length chunk, or a plain body's last byte).
    public var hasEnded: Bool { decoder.hasEnded || plainLeft == 0 }
    /// The connection closed without a clean end (or the chunk framing broke).
    public var wasCut: Bool { !hasEnded && (client.isClosed || decoder.isMalformed) }

    /// Closes the connection at once (the server sees a peer that went away).
    public func disconnect() { client.disconnect() }

    /// Sends more bytes on the stream's connection (a pipelined request, say).
    public func send(_ text: String) { client.send(text) }

    /// The body of a response that is not a stream (an error's problem JSON).
    public func readBody(deadline: Date = Date().addingTimeInterval(10)) -> [UInt8] {
        while !hasEnded, !wasCut, Date() < deadline { receive(until: deadline) }
        return text
    }

    /// The next event, or `nil` if none arrives before `timeout` or the stream ends.
    public func next(timeout: Double = 10) -> StreamEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let event = parseOne() { return event }
            if hasEnded || wasCut || Date() >= deadline { return nil }
            receive(until: deadline)
        }
    }

    /// Events until `count` have arrived (or the timeout passes).
    public func next(_ count: Int, timeout: Double = 20) -> [StreamEvent] {
        let deadline = Date().addingTimeInterval(timeout)
        var events: [StreamEvent] = []
        while events.count < count, let event = next(timeout: max(0, deadline.timeIntervalSinceNow)) { events.append(event) }
        return events
    }

    /// The stream's text, byte for byte, through its `count`th blank line (the end of its
    /// `count`th block), or all that arrived before the timeout; for comparing with a
    /// transcript. Not to be mixed with ``next(timeout:)`` on one stream.
    public func text(blocks count: Int, timeout: Double = 10) -> String {
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

    /// Waits until the stream ends or is cut; true if it did within the timeout.
    public func waitForEnd(timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !hasEnded, !wasCut, Date() < deadline {
            _ = parseOne()
            receive(until: deadline)
        }
        return hasEnded || wasCut
    }

    /// Reads what arrives (waiting at most until `deadline`, and at most a second) and decodes it.
    private func receive(until deadline: Date) {
        client.receive(within: max(0.001, min(1, deadline.timeIntervalSinceNow)))
        decode()
    }

    /// Moves decoded body bytes from the connection to `text`.
    private func decode() {
        var bytes = client.received
        let before = bytes.count
        if let left = plainLeft {
            let take = min(left, bytes.count)
            text += bytes[..<take]
            bytes.removeFirst(take)
            plainLeft = left - take
        } else {
            text += decoder.decode(&bytes)
        }
        client.consume(before - bytes.count)
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
}
