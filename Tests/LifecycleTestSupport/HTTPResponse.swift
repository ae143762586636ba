import Foundation

/// A failure of the tests' own machinery (a connection, a deadline, a helper process).
public struct HTTPClientError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}

/// A response as read off the wire (or, from ``HTTPResponse/parse(_:)``, as much of one as
/// has arrived).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    /// The body: by `Content-Length`, the decoded chunks of a chunked body, or (parsed from
    /// bytes that end at a close) everything after the head.
    public var body: [UInt8]
    /// A chunked body's chunks as they were framed; empty for any other body.
    public var chunks: [[UInt8]] = []
    /// The whole body arrived (a chunked one: its last chunk).
    public var isComplete = true
    /// A chunked body's framing is broken.
    public var isMalformed = false

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (empty when it is not one).
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// Parses a response from the start of `bytes`; `nil` until its head has arrived. A
    /// chunked body is decoded as far as it has arrived (see ``chunks``, ``isComplete``,
    /// ``isMalformed``); any other is its `Content-Length` bytes, or without one everything
    /// after the head.
    public static func parse(_ bytes: [UInt8]) -> HTTPResponse? {
        guard let (head, headEnd) = ResponseHead.parse(bytes[...]) else { return nil }
        var response = HTTPResponse(status: head.status, headers: head.headers, body: [])
        let rest = bytes[headEnd...]
        guard head.isChunked else {
            let length = head.contentLength ?? rest.count
            response.body = Array(rest.prefix(length))
            response.isComplete = rest.count >= length
            return response
        }
        var decoder = ChunkedDecoder()
        var unread = Array(rest)
        let payload = decoder.decode(&unread)
        // The chunks received whole, as framed; not one still arriving.
        var start = 0
        for size in decoder.chunkSizes {
            response.chunks.append(Array(payload[start..<start + size]))
            start += size
        }
        response.body = Array(payload[..<start])
        response.isComplete = decoder.hasEnded
        response.isMalformed = decoder.isMalformed
        return response
    }
}

/// A response's status line and header fields: the one parser of response heads.
public struct ResponseHead: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public var isChunked: Bool { header("transfer-encoding")?.lowercased() == "chunked" }
    public var contentLength: Int? { header("content-length").flatMap { Int($0) } }

    /// The head at the start of `bytes` and where its body starts (after the blank line);
    /// `nil` until the blank line has arrived. A status line without a number reads as 0.
    public static func parse(_ bytes: ArraySlice<UInt8>) -> (head: ResponseHead, bodyStart: Int)? {
        guard let end = bytes.firstRange(of: [13, 10, 13, 10]) else { return nil }
        var lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        let headers = lines.compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        return (ResponseHead(status: status, headers: headers), end.upperBound)
    }
}

/// Decodes a chunked body as it arrives: the one chunked decoder.
public struct ChunkedDecoder: Sendable {
    /// Bytes of the current chunk still to come; `nil` between chunks.
    private var pending: Int?
    /// The size of each chunk received whole (with its CRLF) so far, in order.
    public private(set) var chunkSizes: [Int] = []
    /// The size of the chunk arriving.
    private var size = 0
    /// The last chunk (`0`) and the blank line after it arrived: the body ended cleanly.
    public private(set) var hasEnded = false
    /// The framing is broken (a size that is no hex number, a chunk not followed by CRLF).
    public private(set) var isMalformed = false

    public init() {}

    /// Takes what it can decode from the front of `bytes` and returns the payload in it,
    /// a chunk's first bytes as soon as they arrive; what stays in `bytes` is an unfinished
    /// size line or chunk end.
    public mutating func decode(_ bytes: inout [UInt8]) -> [UInt8] {
        var payload: [UInt8] = []
        var position = 0
        defer { bytes.removeFirst(position) }
        while !hasEnded, !isMalformed {
            if let left = pending {
                let take = min(left, bytes.count - position)
                payload += bytes[position..<position + take]
                position += take
                guard take == left else {
                    pending = left - take
                    return payload
                }
                guard bytes.count - position >= 2 else {
                    pending = 0
                    return payload
                }
                guard bytes[position] == 13, bytes[position + 1] == 10 else {
                    isMalformed = true
                    return payload
                }
                position += 2
                pending = nil
                chunkSizes.append(size)
                continue
            }
            guard let lineEnd = bytes[position...].firstRange(of: [13, 10]) else { return payload }
            let sizeText = String(decoding: bytes[position..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                isMalformed = true
                return payload
            }
            if size == 0 {
                // No trailers: the last chunk is followed by an empty line.
                guard bytes.count - lineEnd.upperBound >= 2 else { return payload }
                if bytes[lineEnd.upperBound] == 13, bytes[lineEnd.upperBound + 1] == 10 {
                    hasEnded = true
                    position = lineEnd.upperBound + 2
                } else {
                    isMalformed = true
                }
                return payload
            }
            position = lineEnd.upperBound
            pending = size
            self.size = size
        }
        return payload
    }
}
