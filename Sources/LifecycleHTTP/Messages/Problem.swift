/// An RFC 9457 problem detail. Extra members go in `extensions`; without a `type` of its
/// own, a problem's type is its status's page (``ProblemTypes/uri(forStatus:)``).
public struct Problem: Error, Sendable, Encodable {
    /// A URI reference naming the kind of problem (RFC 9457 §3.1.1).
    public var type: String
    /// A short summary of the kind, the same for every problem of it.
    public var title: String
    /// The HTTP status the problem is answered with.
    public var status: Int
    /// What went wrong with this request, for the person reading it.
    public var detail: String
    /// Extra members, already encoded as JSON values.
    public var extensions: [String: JSONFragment]

    /// A problem whose type, unless given, is its status's page (``ProblemTypes/uri(forStatus:)``).
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

    /// The standard members first, then the extensions by name, so that a body is the same every time.
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
