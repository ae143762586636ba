import Dispatch
import LifecycleStore
import LifecycleHTTP
import LifecycleLocks

// `POST /v1/batch`: inputs queued on a device, sent in one request. Each item is the single
// endpoint its kind names, parsed by that endpoint's own parser and answered as it would have
// been, in order; the items go to the committer as one group, so they commit together.

extension API {
    /// The batch endpoint's path: its body has a limit of its own (`--max-batch-body`).
    static let batchPath = "/v1/batch"
    /// The most items one batch holds.
    static let maxBatchItems = 1000

    /// What a batch item may be, and the single endpoint each is.
    enum BatchKind: String {
        case create, event, action, launch, gap

        /// The single endpoint's method and path for `id`: an idempotency key's fingerprint starts with them.
        func endpoint(_ id: String) -> WriteEndpoint {
            switch self {
            case .create: WriteEndpoint("PUT /v1/instances/", id)
            case .event: WriteEndpoint("POST /v1/instances/", id, "/events")
            case .action: WriteEndpoint("POST /v1/instances/", id, "/actions")
            case .launch: WriteEndpoint("POST /v1/instances/", id, "/relaunches")
            case .gap: WriteEndpoint("POST /v1/instances/", id, "/gaps")
            }
        }
    }

    /// A parsed item: a write for the committer, or what its single endpoint answers at once
    /// (a refusal other than 400 that needs no store, such as a nested parameter's 422).
    private enum BatchItem {
        case write(InstanceRegistry.Write)
        case answered(Response, as: StaticString)
    }

    /// `POST /v1/batch`. A malformed batch, or one holding an item its single endpoint would
    /// answer 400, is refused whole (400, naming the item) and nothing is stored; otherwise
    /// every item is answered in order, 200, each as its single endpoint would have answered.
    func postBatch(_ request: Request, respond: @escaping @Sendable (Response) -> Void) {
        let items: [BatchItem]
        switch Result(catching: { () throws(Problem) in try batchItems(request) }) {
        case .success(let parsed): items = parsed
        case .failure(let problem): return respond(.refusal(problem))
        }
        let answers = BatchAnswers(count: items.count, respond: respond)
        var group: [CommitJob] = []
        for (index, item) in items.enumerated() {
            switch item {
            case .answered(let response, let member): answers.answer(index, response, as: member)
            case .write(let write):
                group.append(CommitJob(write: write, requestID: request.id) { answers.answer(index, $0) })
            }
        }
        // An empty batch has no last item to answer it; every other is answered with its last item.
        if items.isEmpty { return answers.finish() }
        if !group.isEmpty { registry.submit(group: group) }
    }

    /// The member of an item's result that holds its single answer's body.
    fileprivate static func member(_ answer: Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>) -> StaticString {
        switch answer {
        case .success(.applied(_, unexpected: nil)): "record"
        case .success(.created), .success(.found): "instance"
        // An unexpected event's answer is its 409 problem, which carries the record.
        case .success(.applied(_, unexpected: _?)), .success(.deleted), .failure: "problem"
        }
    }

    private func batchItems(_ request: Request) throws(Problem) -> [BatchItem] {
        let body = try request.jsonMembers(isRequired: true)
        for key in body.keys where key != "items" {
            throw .badRequest("unknown member \"\(key)\"; a batch takes \"items\"")
        }
        guard case .array(let items)? = body["items"] else {
            throw .badRequest("the body needs \"items\": an array of up to \(Self.maxBatchItems) items")
        }
        guard items.count <= Self.maxBatchItems else {
            throw .badRequest("a batch holds at most \(Self.maxBatchItems) items; this one has \(items.count); nothing was stored")
        }
        var parsed: [BatchItem] = []
        parsed.reserveCapacity(items.count)
        // The same for every item: made once, not once a key.
        let keyScope = IdempotencyKey.scope(tokenScope: tokenScope, clientAddress: request.clientAddress)
        for (index, item) in items.enumerated() {
            do throws(Problem) {
                parsed.append(try batchItem(item, keyScope: keyScope))
            } catch {
                throw .badRequest("items[\(index)]: \(error.detail); nothing was stored")
            }
        }
        return parsed
    }

    /// The largest `expectedVersion`: 18 digits, as `If-Match` takes.
    static let maxVersion: Int64 = 999_999_999_999_999_999

    /// One item, by its single endpoint's parser. Throws the problem of an item that endpoint
    /// would answer 400, which refuses the batch.
    private func batchItem(_ item: JSONValue, keyScope: String) throws(Problem) -> BatchItem {
        guard case .object(let members) = item else { throw .badRequest("an item must be a JSON object") }
        // A switch, not a set: each name is compared in place, where a set would hash every
        // member of a thousand items again.
        for key in members.keys {
            switch key {
            case "instance", "kind", "body", "idempotencyKey", "expectedVersion": continue
            default: throw .badRequest("unknown member \"\(key)\"; an item takes instance, kind, body, idempotencyKey and expectedVersion")
            }
        }
        guard case .string(let id)? = members["instance"] else { throw .badRequest("\"instance\" must be a string: the instance's id") }
        guard case .string(let name)? = members["kind"], let kind = BatchKind(rawValue: name) else {
            throw .badRequest("\"kind\" must be create, event, action, launch or gap")
        }
        var body: [String: JSONValue]?
        switch members["body"] {
        case nil: body = nil
        case .object(let object)?: body = object
        default: throw .badRequest("\"body\" must be a JSON object")
        }
        // A batch's instance is a value, not a path segment: one no path could name is malformed.
        guard isValidInstanceID(id) else { throw .badRequest(invalidInstanceID) }
        var expected: [InstanceRegistry.InstanceTag]?
        if let member = members["expectedVersion"] {
            // JSON has one kind of number: 3.0 is the integer 3.
            let version: Int64? = switch member {
            case .integer(let version): version
            case .number(let number) where number == number.rounded() && abs(number) < 1e18: Int64(number)
            default: nil
            }
            guard let version, (0...Self.maxVersion).contains(version) else {
                throw .badRequest("\"expectedVersion\" must be an integer from 0 to \(Self.maxVersion): the version the instance must be at")
            }
            // PUT takes no If-Match: a create's precondition would be ignored, so it is refused.
            guard kind != .create else { throw .badRequest("a create takes no \"expectedVersion\"") }
            expected = [InstanceRegistry.InstanceTag(version: version)]
        }
        var key: IdempotencyKey?
        switch members["idempotencyKey"] {
        case nil: key = nil
        case .string(let text)?:
            key = try IdempotencyKey(text, named: "\"idempotencyKey\"", endpoint: kind.endpoint(id), body: body, scope: keyScope)
        default: throw .badRequest("\"idempotencyKey\" must be a string")
        }
        let arguments = WriteArguments(id: id, body: body, expected: expected, key: key)
        do throws(Problem) {
            switch kind {
            case .create: return .write(try putWrite(arguments))
            case .event: return .write(try eventWrite(arguments))
            case .action: return .write(try actionWrite(arguments))
            case .launch: return .write(try relaunchWrite(arguments))
            case .gap: return .write(try gapWrite(arguments))
            }
        } catch where error.status == 400 {
            throw error
        } catch {
            return .answered(.refusal(error), as: "problem")
        }
    }
}

/// A batch's answers as they arrive (on the committer thread, one per item, in any order
/// against the items answered at once); the batch is answered once the last has arrived.
///
/// The committer only files each outcome: the items' answers are made, and the batch's body
/// written, on another thread, so that a thousand items' bodies do not hold up the one thread
/// that commits.
private final class BatchAnswers: Sendable {
    private enum Answer {
        case waiting
        case committed(Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>)
        case answered(Response, as: StaticString)
    }

    private struct State {
        var answers: [Answer]
        var waiting: Int
    }

    private let state: LockedValue<State>
    private let respond: @Sendable (Response) -> Void

    init(count: Int, respond: @escaping @Sendable (Response) -> Void) {
        state = LockedValue(State(answers: Array(repeating: .waiting, count: count), waiting: count))
        self.respond = respond
    }

    /// Item `index` was answered at once with `response`, whose body goes in the result's `member`.
    func answer(_ index: Int, _ response: Response, as member: StaticString) {
        file(index, .answered(response, as: member))
    }

    /// Item `index`'s write was decided and, unless refused, committed.
    func answer(_ index: Int, _ result: Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>) {
        file(index, .committed(result))
    }

    private func file(_ index: Int, _ answer: Answer) {
        let isLast = state.withLock { state in
            state.answers[index] = answer
            state.waiting -= 1
            return state.waiting == 0
        }
        if isLast { DispatchQueue.global().async { [self] in finish() } }
    }

    /// Answers the batch: every item is answered.
    func finish() {
        let answers = state.withLock { $0.answers }
        var isUnavailable = false
        let results = answers.map { answer -> [UInt8] in
            let response: Response, member: StaticString
            switch answer {
            case .waiting: (response, member) = (.problem(.internalError("a batch item was never answered")), "problem")
            case .committed(let result): (response, member) = (Response(result), API.member(result))
            case .answered(let answered, let answeredMember): (response, member) = (answered, answeredMember)
            }
            if response.status == 503 { isUnavailable = true }
            return Self.result(response, member)
        }
        var json = JSONBuffer(capacity: 16 + results.reduce(0) { $0 + $1.count + 1 })
        json.raw("{\"results\":[")
        for (index, result) in results.enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.bytes += result
        }
        json.raw("]}")
        json.byte(JSON.newline)
        // An item refused for a while (storage failing, the service stopping) says when to retry, as its single answer would.
        let retry = isUnavailable ? [("Retry-After", String(Response.retryAfterSeconds))] : []
        respond(Response(status: 200, headers: [("Content-Type", "application/json")] + retry, body: json.bytes))
    }

    /// `{"status": N, "<member>": body}`: a record applied, an instance created or found, or
    /// the problem (an unexpected event's with its record): the single answer's body as it is.
    private static func result(_ response: Response, _ member: StaticString) -> [UInt8] {
        var json = JSONBuffer(capacity: 32)
        json.raw("{\"status\":")
        json.integer(response.status)
        json.raw(",\"")
        json.raw(member)
        json.raw("\":")
        var body = response.body.bytes ?? []
        if body.last == JSON.newline { body.removeLast() }
        json.bytes += body
        json.byte(UInt8(ascii: "}"))
        return json.bytes
    }
}

extension JSONBuffer {
    /// `value` in one form for every spelling of it: object members sorted by name, no
    /// whitespace. (A number is written as parsed: `1.0` and `1` differ, as they do in a body.)
    mutating func canonical(_ value: JSONValue) {
        switch value {
        case .string(let text): string(text)
        case .integer(let number): integer(number)
        case .number(let number): bytes += Array(number.description.utf8)
        case .bool(let flag): bool(flag)
        case .null: raw("null")
        case .array(let elements):
            byte(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                canonical(element)
            }
            byte(UInt8(ascii: "]"))
        case .object(let members):
            byte(UInt8(ascii: "{"))
            for (index, name) in members.keys.sorted().enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                string(name)
                byte(UInt8(ascii: ":"))
                canonical(members[name]!)
            }
            byte(UInt8(ascii: "}"))
        }
    }
}
