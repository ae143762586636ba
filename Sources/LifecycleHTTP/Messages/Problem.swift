/// An RFC 9457 problem detail. Extra members go in `extensions`; without a `type` of its
/// own, a problem's type is its status's page (``ProblemTypes/uri(forStatus:)``).
public struct Problem: Error, Sendable {
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

    /// The problem as an `application/problem+json` body: the standard members first, then
    /// the extensions by name, so that a body is the same every time.
    public var json: [UInt8] {
        var json = body()
        json.raw("}\n")
        return json.bytes
    }

    /// The body with one more member after the others, whose value is `value`, JSON already
    /// (an unexpected input's record as it is stored): written as it is, not parsed again.
    public func json(adding name: StaticString, json value: [UInt8]) -> [UInt8] {
        var json = body(reserving: value.count)
        json.raw(",\"")
        json.raw(name)
        json.raw("\":")
        json.bytes += value
        json.raw("}\n")
        return json.bytes
    }

    /// Written by hand rather than through `Codable`: a problem answers every refusal, and an
    /// unexpected input's on the committer thread, where the generic encoder cost a third of
    /// that write's work.
    private func body(reserving more: Int = 0) -> JSONBuffer {
        var json = JSONBuffer(capacity: 96 + type.utf8.count + title.utf8.count + detail.utf8.count + more)
        json.raw("{\"type\":")
        json.string(type)
        json.raw(",\"title\":")
        json.string(title)
        json.raw(",\"status\":")
        json.integer(status)
        json.raw(",\"detail\":")
        json.string(detail)
        for (name, value) in extensions.sorted(by: { $0.key < $1.key }) {
            json.byte(UInt8(ascii: ","))
            json.key(name)
            json.bytes += value.json
        }
        return json
    }
}
