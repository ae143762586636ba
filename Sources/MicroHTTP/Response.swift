import Foundation

/// An HTTP response: status, headers and a body held in memory.
public struct Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Adds a header, keeping any already there.
    public func adding(header name: String, _ value: String) -> Response {
        var copy = self
        copy.headers.append((name, value))
        return copy
    }

    /// A JSON body encoded from a value.
    public static func json<T: Encodable>(_ value: T, status: Int = 200, headers: [(name: String, value: String)] = []) -> Response {
        do {
            let data = try JSON.encoder.encode(value)
            return Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(data))
        } catch {
            return .problem(Problem(status: 500, title: "Internal Server Error", detail: "response could not be encoded: \(error)"))
        }
    }

    /// An RFC 9457 problem body.
    public static func problem(_ problem: Problem, headers: [(name: String, value: String)] = []) -> Response {
        let data = (try? JSON.encoder.encode(problem)) ?? Data("{}".utf8)
        return Response(status: problem.status, headers: [("Content-Type", "application/problem+json")] + headers, body: Array(data))
    }

    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    public static let noContent = Response(status: 204)
}

/// Shared JSON configuration, so every body in the service looks the same.
public enum JSON {
    /// Times as ISO 8601 in UTC with milliseconds, for example `2026-11-30T00:06:49.637Z`.
    public static let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Keys sorted, so the same value always gives the same bytes.
    public static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(date.formatted(timeFormat))
        }
        e.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return e
    }()

    public static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = try? Date(text, strategy: timeFormat) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 time: \(text)"))
            }
            return date
        }
        return d
    }()
}

/// An RFC 9457 problem detail. Extra members go in `extensions`.
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
        self.type = type ?? "about:blank"
        self.extensions = extensions
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
