import Foundation

/// An HTTP response: status, headers and a body, held in memory or written over time.
public struct Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Body

    /// What follows the headers.
    public enum Body: Sendable {
        /// Bytes held in memory, sent with `Content-Length`.
        case bytes([UInt8])
        /// Bytes written over time (a chunked body for HTTP/1.1 clients); the connection
        /// holds no thread while the stream has nothing to send.
        case stream(any ResponseStream)
        /// None, and no length announced: the answer to a HEAD request whose GET would be
        /// streamed (see ``Response/forHEAD()``).
        case omitted

        /// The bytes of a body held in memory; `nil` for a stream.
        public var bytes: [UInt8]? {
            if case .bytes(let bytes) = self { return bytes }
            return nil
        }
    }

    /// A response whose body is held in memory.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = .bytes(body)
    }

    /// A response whose body is written over time by `stream` (see ``ResponseStream``).
    public init(status: Int, headers: [(name: String, value: String)] = [], stream: any ResponseStream) {
        self.status = status
        self.headers = headers
        self.body = .stream(stream)
    }

    /// This response as the answer to a HEAD request, which has no body (RFC 9110 §9.3.2): a
    /// streamed body is finished before it starts. (A body held in memory stays, since
    /// libmicrohttpd sends its length for a HEAD request, and not the body itself.)
    public func forHEAD() -> Response {
        guard case .stream(let stream) = body else { return self }
        stream.start(waker: StreamWaker {})
        stream.finish()
        var answer = self
        answer.body = .omitted
        return answer
    }

    /// A JSON body encoded from a value.
    public static func json<T: Encodable>(_ value: T, status: Int = 200, headers: [(name: String, value: String)] = []) -> Response {
        do {
            return Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: try JSON.encode(value))
        } catch {
            return .problem(Problem(status: 500, title: "Internal Server Error", detail: "response could not be encoded: \(error)"))
        }
    }

    /// 304 for a representation whose 200 would carry `body`. libmicrohttpd sends no body
    /// with a 304 but states the length of the one it is given, which must then be the full
    /// answer's (RFC 9110 §8.6): so the body goes in, and is not sent.
    public static func notModified(headers: [(name: String, value: String)], body: [UInt8]) -> Response {
        Response(status: 304, headers: headers, body: body)
    }

    /// An RFC 9457 problem body.
    public static func problem(_ problem: Problem, headers: [(name: String, value: String)] = []) -> Response {
        Response(status: problem.status, headers: [("Content-Type", "application/problem+json")] + headers, body: problem.json)
    }

    /// 404 for a path nothing serves.
    public static func notFound(_ request: Request) -> Response {
        .problem(Problem(status: 404, title: "Not Found", detail: "no resource at \(request.path)"))
    }

    /// 405 naming, in `Allow`, the methods the path does serve.
    public static func methodNotAllowed(_ request: Request, allow: String) -> Response {
        .problem(
            Problem(status: 405, title: "Method Not Allowed", detail: "\(request.method) is not allowed on \(request.path); allowed: \(allow)"),
            headers: [("Allow", allow)]
        )
    }

    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }
}

/// The service's one way to write JSON, so every body looks the same.
///
/// Every JSON body ends with a newline, so that `curl` in a terminal, line-oriented tools
/// and logs see whole lines. A record's JSON has none of its own: a stream's `data:` line,
/// history and the store hold it as it is, and an answer made of it gets the newline from
/// ``terminated(_:)``.
public enum JSON {
    /// What every body ends with.
    public static let newline = UInt8(ascii: "\n")

    /// `body` ending with a newline: for bodies assembled from JSON encoded elsewhere.
    public static func terminated(_ body: [UInt8]) -> [UInt8] {
        body.last == newline ? body : body + [newline]
    }

    /// A time as ISO 8601 in UTC, rounded to the millisecond: `2026-11-30T00:06:49.637Z`.
    /// (Foundation's ISO 8601 style truncates, which shows 0.123 stored as 0.12299… as .122.)
    public static func formatTime(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(milliseconds.floorDivided(by: 1000))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let fraction = milliseconds - Int64(seconds) * 1000
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let millis = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
    }

    /// The value as a JSON body: its JSON (see ``StreamingJSONEncoder`` for the layout), then a newline.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = StreamingJSONEncoder()
        try encoder.encodeValue(value)
        encoder.buffer.byte(newline)
        return encoder.buffer.bytes
    }
}

/// An RFC 9457 problem detail. Extra members go in `extensions`; without a `type` of its
/// own, a problem's type is its status's page (``ProblemTypes/uri(forStatus:)``).
public struct Problem: Error, Sendable, Encodable {
    public var type: String
    public var title: String
    public var status: Int
    public var detail: String
    /// Extra members, already encoded as JSON values.
    public var extensions: [String: JSONFragment]

    public init(status: Int, title: String, detail: String, type: String? = nil, extensions: [String: JSONFragment] = [:]) {
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type ?? ProblemTypes.uri(forStatus: status)
        self.extensions = extensions
    }

    /// The problem as an `application/problem+json` body.
    public var json: [UInt8] {
        (try? JSON.encode(self)) ?? Array("{}\n".utf8)
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(type, forKey: Key(stringValue: "type"))
        try c.encode(title, forKey: Key(stringValue: "title"))
        try c.encode(status, forKey: Key(stringValue: "status"))
        try c.encode(detail, forKey: Key(stringValue: "detail"))
        for (name, value) in extensions.sorted(by: { $0.key < $1.key }) {
            try c.encode(value, forKey: Key(stringValue: name))
        }
    }
}

/// Any encodable value, boxed so it can sit in a heterogeneous dictionary.
public struct JSONFragment: Sendable, Encodable {
    private let encodeValue: @Sendable (any Encoder) throws -> Void

    public init<T: Encodable & Sendable>(_ value: T) {
        encodeValue = { try value.encode(to: $0) }
    }

    public func encode(to encoder: any Encoder) throws { try encodeValue(encoder) }
}

extension Int64 {
    /// Division rounding toward negative infinity, so times before 1970 format correctly.
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
