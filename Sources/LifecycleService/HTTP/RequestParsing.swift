import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleHTTP

/// A member of a request body: a flat value, `null`, or something nested (which no parameter accepts).
enum BodyValue {
    case value(Value)
    case null
    case nested

    init(_ json: JSONValue) {
        switch json {
        case .string(let s): self = .value(.string(s))
        case .integer(let i): self = .value(.integer(i))
        case .number(let d): self = .value(.number(d))
        case .bool(let b): self = .value(.bool(b))
        case .null: self = .null
        case .array, .object: self = .nested
        }
    }
}

extension Problem {
    static func badRequest(_ detail: String) -> Problem { Problem(status: 400, title: "Bad Request", detail: detail) }
    static func notFound(_ detail: String) -> Problem { Problem(status: 404, title: "Not Found", detail: detail) }
    static func conflict(_ detail: String) -> Problem { Problem(status: 409, title: "Conflict", detail: detail) }
    static func preconditionFailed(_ detail: String) -> Problem { Problem(status: 412, title: "Precondition Failed", detail: detail) }
    static func unsupportedMediaType(_ detail: String) -> Problem { Problem(status: 415, title: "Unsupported Media Type", detail: detail) }
    static func unprocessable(_ detail: String) -> Problem { Problem(status: 422, title: "Unprocessable Content", detail: detail) }
    static func unavailable(_ detail: String) -> Problem { Problem(status: 503, title: "Service Unavailable", detail: detail) }
    static func internalError(_ detail: String) -> Problem { Problem(status: 500, title: "Internal Server Error", detail: detail) }

    static func unknownInstance(_ id: String) -> Problem { .notFound("no instance \"\(id)\"") }
}

/// A body's members; `[:]` for no body unless `isRequired`.
private func bodyMembers(_ body: [String: JSONValue]?, isRequired: Bool) throws(Problem) -> [String: JSONValue] {
    guard let body else {
        if isRequired { throw .badRequest("the request needs a JSON object body") }
        return [:]
    }
    return body
}

/// What a write's parser reads, from a request or from a batch item: the instance its path
/// names, its body, the tags its `If-Match` accepts and its idempotency key.
struct WriteArguments {
    var id: String
    /// The members of the body's JSON object; `nil` when there is no body.
    var body: [String: JSONValue]?
    var expected: [InstanceRegistry.InstanceTag]? = nil
    var key: IdempotencyKey? = nil

    /// The body's members; `[:]` without a body unless `isRequired`. A NUL in any of them is
    /// refused (``refuseNUL(in:)``).
    func members(isRequired: Bool) throws(Problem) -> [String: JSONValue] {
        let members = try bodyMembers(body, isRequired: isRequired)
        try refuseNUL(in: members)
        return members
    }
}

/// Refuses (422, naming the member) a U+0000 in any member's name or string, at any depth.
/// Neither store keeps one: PostgreSQL's text refuses it (which would fail the write for ever,
/// and stall the queue of the device that sent it), and SQLite's ends the string there after a
/// restart. Every other character, control characters included, is kept as sent.
func refuseNUL(in members: [String: JSONValue]) throws(Problem) {
    // Looked for first without spelling any member's name: a batch's thousands of items hold none, and
    // spelling each name on the way cost more than parsing them.
    guard members.contains(where: { $0.key.utf8.contains(0) || holdsNUL($0.value) }) else { return }
    func shown(_ name: String) -> String {
        "\"\(name.replacingOccurrences(of: "\u{0}", with: "\\u0000"))\""
    }
    func refusal(_ member: String) -> Problem {
        .unprocessable("\(member) holds U+0000 (NUL), which no stored string may; nothing was stored")
    }
    func check(_ value: JSONValue, at member: String) throws(Problem) {
        switch value {
        case .string(let text) where text.utf8.contains(0): throw refusal(member)
        case .array(let elements):
            for (index, element) in elements.enumerated() { try check(element, at: "\(member)[\(index)]") }
        case .object(let nested):
            for name in nested.keys.sorted() { try check(name, nested[name]!, in: "\(member).") }
        default: break
        }
    }
    func check(_ name: String, _ value: JSONValue, in parent: String) throws(Problem) {
        let member = parent + shown(name)
        guard !name.utf8.contains(0) else { throw refusal("the name of member \(member)") }
        try check(value, at: member)
    }
    for name in members.keys.sorted() { try check(name, members[name]!, in: "") }
}

/// Whether a U+0000 is anywhere in `value`, in a member's name or a string, at any depth.
private func holdsNUL(_ value: JSONValue) -> Bool {
    switch value {
    case .string(let text): text.utf8.contains(0)
    case .array(let elements): elements.contains(where: holdsNUL)
    case .object(let members): members.contains { $0.key.utf8.contains(0) || holdsNUL($0.value) }
    default: false
    }
}

extension Request {
    /// The body as a JSON object. An empty body is `[:]` unless `isRequired`.
    func jsonObject(isRequired: Bool) throws(Problem) -> [String: BodyValue] {
        try jsonMembers(isRequired: isRequired).mapValues(BodyValue.init)
    }

    /// The members of the body's JSON object, nested values kept. An empty body is `[:]`
    /// unless `isRequired`. (A body that is not `application/json` was refused on its head:
    /// see ``JSONBodies``.)
    func jsonMembers(isRequired: Bool) throws(Problem) -> [String: JSONValue] {
        try bodyMembers(try jsonBody(), isRequired: isRequired)
    }

    /// The members of the body's JSON object; `nil` for an empty body.
    func jsonBody() throws(Problem) -> [String: JSONValue]? {
        if body.isEmpty { return nil }
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(body)
        } catch {
            throw .badRequest("the body is not valid JSON: \(error)")
        }
        guard case .object(let members) = parsed else { throw .badRequest("the body must be a JSON object") }
        return members
    }

    /// Refuses query arguments other than `names`, and any but `repeatable` given twice, so
    /// that neither a typo nor a second value is silently ignored.
    func checkQuery(allowing names: [String], repeatable: Set<String> = []) throws(Problem) {
        var seen: Set<String> = []
        for (name, _) in query {
            guard names.contains(name) else {
                throw .badRequest("unknown query parameter \"\(name)\"; use \(names.joined(separator: ", "))")
            }
            guard seen.insert(name).inserted || repeatable.contains(name) else {
                throw .badRequest("query parameter \"\(name)\" is given more than once")
            }
        }
    }

    /// A query argument as an integer within bounds, or the default when absent.
    func integerQuery(_ name: String, default value: Int64, in range: ClosedRange<Int64>) throws(Problem) -> Int64 {
        guard let text = query(name) else { return value }
        // Digits only (with a leading minus where the range allows it): `Int64("+5")` would pass.
        let digits = text.hasPrefix("-") ? text.utf8.dropFirst() : text.utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let number = Int64(text), range.contains(number) else {
            throw .badRequest("query parameter \"\(name)\" must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// A flag that narrows a list: `true` when the parameter is `true`, `false` when it is
    /// absent. `false` is refused rather than read as "only those without", which the lists
    /// do not offer.
    func flagQuery(_ name: String) throws(Problem) -> Bool {
        guard let text = query(name) else { return false }
        guard text == "true" else {
            throw .badRequest("query parameter \"\(name)\" takes only true; leave it out not to filter on it")
        }
        return true
    }

    /// The tags an `If-Match` header accepts (RFC 9110 §13.1.1): `nil` when it is absent or
    /// `*`, else the instance tags its entity tags name: an instance's ETag (`"3-1764650000123"`:
    /// version 3 of the instance created then), or a version alone (`"3"`, or a bare `3`), which
    /// any instance at it matches. Comparison is strong, so a weak tag (`W/"3"`) names none,
    /// and nor does a tag that is no instance's.
    func expectedTags() throws(Problem) -> [InstanceRegistry.InstanceTag]? {
        guard let value = header("if-match") else { return nil }
        let invalid = Problem.badRequest("If-Match must be * or a list of quoted ETags or versions, such as \"3-1764650000123\" or \"3\", \"4\"")
        var rest = Substring(value)
        func skipSpace() { rest = rest.drop { $0 == " " || $0 == "\t" } }
        skipSpace()
        // A bare version (`3`), as the API has always accepted, is one tag.
        if let version = Int64(rest.trimmingCharacters(in: .whitespaces)), version >= 0 { return [InstanceRegistry.InstanceTag(version: version)] }
        if rest.hasPrefix("*") {
            rest = rest.dropFirst()
            skipSpace()
            guard rest.isEmpty else { throw invalid }
            return nil
        }
        var tags: [InstanceRegistry.InstanceTag] = []
        var count = 0
        while true {
            skipSpace()
            if rest.hasPrefix(",") {
                rest = rest.dropFirst()
                continue
            }
            if rest.isEmpty { break }
            let isWeak = rest.hasPrefix("W/")
            if isWeak { rest = rest.dropFirst(2) }
            guard rest.hasPrefix("\""), let close = rest.dropFirst().firstIndex(of: "\"") else { throw invalid }
            let tag = rest[rest.index(after: rest.startIndex)..<close]
            rest = rest[rest.index(after: close)...]
            skipSpace()
            guard rest.isEmpty || rest.hasPrefix(",") else { throw invalid }
            count += 1
            if !isWeak, let named = InstanceRegistry.InstanceTag(tag) { tags.append(named) }
        }
        guard count > 0 else { throw invalid }
        return tags
    }

    /// The `Idempotency-Key`, bound to the write (`endpoint`: the method and path that name
    /// it, as a batch item's kind does) and its `body`, and kept apart by who sent it: a key
    /// is stored under its scope (`tokenScope`, the token's, when the service has a token;
    /// else the client's address), so the same key from elsewhere is a new key there, never a
    /// replay of another's response.
    func idempotencyKey(endpoint: WriteEndpoint, body: [String: JSONValue]?, tokenScope: String?) throws(Problem) -> IdempotencyKey? {
        guard let key = header("idempotency-key") else { return nil }
        return try IdempotencyKey(
            key, named: "Idempotency-Key", endpoint: endpoint, body: body, scope: IdempotencyKey.scope(tokenScope: tokenScope, clientAddress: clientAddress),
            formerFingerprint: Array("\(method) \(path)\n".utf8) + self.body
        )
    }
}

/// A write's single endpoint as an idempotency key's fingerprint names it, its method and
/// path (`POST /v1/instances/{id}/events`), kept in parts and written into the fingerprint:
/// made as a string, it cost every keyed batch item an interpolation.
struct WriteEndpoint {
    /// The method and the path up to the instance's id; all of it for an endpoint that names none.
    let head: StaticString
    let id: String
    /// The path after the id.
    let tail: StaticString

    init(_ head: StaticString, _ id: String = "", _ tail: StaticString = "") {
        (self.head, self.id, self.tail) = (head, id, tail)
    }

    func write(to json: inout JSONBuffer) {
        json.raw(head)
        json.bytes += id.utf8
        json.raw(tail)
    }
}

extension IdempotencyKey {
    /// A key the client sent (`Idempotency-Key`, or a batch item's member: `name`), checked,
    /// bound to its request (``fingerprint(endpoint:body:)``) and stored under `scope`
    /// (``scope(tokenScope:clientAddress:)``).
    init(
        _ key: String, named name: String, endpoint: WriteEndpoint, body: [String: JSONValue]?, scope: String, formerFingerprint: [UInt8]? = nil
    ) throws(Problem) {
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw .badRequest("\(name) must be 1 to 255 visible ASCII characters")
        }
        self.init(
            key: "\(scope) \(key)", fingerprint: Self.fingerprint(endpoint: endpoint, body: body), unscopedKey: key,
            formerFingerprint: formerFingerprint
        )
    }

    /// Whose keys a client's are: its token's, when the service has a token; else its
    /// address's. The same key from elsewhere is a new key there, never a replay of another's response.
    static func scope(tokenScope: String?, clientAddress: String) -> String {
        tokenScope ?? "client:\(clientAddress)"
    }

    /// What a key is bound to: the write's method and path, then its body in one form for
    /// every spelling of it (``JSONBuffer/canonical(_:)``). A request sent alone and the same
    /// request as a batch item are one request, however their JSON is spaced or ordered.
    /// (A batch item's fingerprint was always this, so keys stored for items still match.)
    static func fingerprint(endpoint: WriteEndpoint, body: [String: JSONValue]?) -> [UInt8] {
        var fingerprint = JSONBuffer(capacity: 128)
        endpoint.write(to: &fingerprint)
        fingerprint.byte(JSON.newline)
        if let body { fingerprint.canonical(.object(body)) }
        return fingerprint.bytes
    }

    /// The key as the client sent it, without its scope (which holds no space: the key
    /// starts after the first one).
    var clientKey: Substring {
        guard let space = key.firstIndex(of: " ") else { return key[...] }
        return key[key.index(after: space)...]
    }
}

let invalidInstanceID = "instance id must be 1 to 128 characters from A-Z a-z 0-9 . _ -, and not . or .."

/// Instance ids: 1 to 128 characters from `[A-Za-z0-9._-]`, but not `.` or `..`, which
/// a path cannot name.
func isValidInstanceID(_ id: String) -> Bool {
    (1...128).contains(id.utf8.count) && id != "." && id != ".." && id.utf8.allSatisfy { byte in
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2E || byte == 0x5F || byte == 0x2D
    }
}

extension ReportedInput {
    /// The most the device's clock may run ahead of the server's: a later `occurredAt` is a
    /// clock set wrong, or a value made up, and is refused.
    static let maxClockLead: TimeInterval = 24 * 3600

    /// `input` with what a body's reserved members (``AppReport/reservedNames``) report of it.
    /// A member of the wrong shape, a time that is not RFC 3339 with an offset, or one more
    /// than ``maxClockLead`` after `now` is refused with 422, as a bad parameter is.
    init(_ input: Input, members body: [String: JSONValue], now: Date) throws(Problem) {
        var report = AppReport()
        switch body["believedState"] {
        case nil, .null?: break
        case .string(let state)?: report.believedState = state
        default: throw .unprocessable("\"believedState\" must be the name of a state")
        }
        switch body["ranHooks"] {
        case nil, .null?: break
        case .array(let items)?:
            var hooks: [String] = []
            for item in items {
                guard case .string(let hook) = item else { throw .unprocessable("\"ranHooks\" must be an array of hook names") }
                hooks.append(hook)
            }
            report.ranHooks = hooks
        default: throw .unprocessable("\"ranHooks\" must be an array of hook names")
        }
        var occurredAt: DeviceTime?
        switch body["occurredAt"] {
        case nil, .null?: break
        case .string(let text)?:
            guard let time = DeviceTime(rfc3339: text) else {
                throw .unprocessable("\"occurredAt\" must be an RFC 3339 date-time with an offset, such as 2026-12-02T05:00:00.123+01:00")
            }
            guard time.date.timeIntervalSince(now) <= Self.maxClockLead else {
                throw .unprocessable("\"occurredAt\" \(text) is more than 24 hours ahead of the server's clock (\(JSON.formatTime(now)))")
            }
            occurredAt = time
        default: throw .unprocessable("\"occurredAt\" must be an RFC 3339 date-time string")
        }
        self.init(input, report: report, occurredAt: occurredAt)
    }
}
