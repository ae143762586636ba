import LifecycleHTTP
import LifecycleKit
import LifecycleStore

// The registry's vocabulary for writes: what a client asks for, what it did, why it was
// refused. The API turns outcomes and refusals into responses and problems (Answers.swift),
// so nothing here knows of HTTP.
extension InstanceRegistry {
    /// A change to make, in the order it arrived.
    enum Write: Sendable {
        /// `labels`: who the instance is (``InstanceLabels``), checked already.
        case create(id: String, model: String, isPut: Bool, key: IdempotencyKey?, labels: [String: String] = [:])
        /// `expected`: the tags `If-Match` names, one of which the instance must match; `nil` for any.
        case delete(id: String, expected: [InstanceTag]?)
        case apply(ReportedInput, id: String, expected: [InstanceTag]?, key: IdempotencyKey?)

        /// The instance the write names.
        var instanceID: String {
            switch self {
            case .create(let id, _, _, _, _), .delete(let id, _), .apply(_, let id, _, _): id
            }
        }

        /// What the write is, for logs.
        var summary: String {
            switch self {
            case .create(_, _, let isPut, _, _): isPut ? "put" : "create"
            case .delete: "delete"
            case .apply(let reported, _, _, _):
                switch reported.input {
                case .event(let name, _): "event \(name)"
                case .action(let name, _): "action \(name)"
                case .relaunch: "relaunch"
                case .gap(let dropped): "gap of \(dropped)"
                }
            }
        }
    }

    /// What an instance's `ETag` names (`"3-1764650000123"`): its version, and when it was created, which tells an
    /// instance made again under the same id from the one deleted before it (at the same version, another body).
    struct InstanceTag: Sendable, Equatable {
        var version: Int64
        /// Milliseconds since 1970; `nil` in a precondition that names only a version (`If-Match: "3"` or `3`, a
        /// batch item's `expectedVersion`), which any instance at that version meets.
        var createdAt: Int64?

        init(version: Int64, createdAt: Int64? = nil) {
            self.version = version
            self.createdAt = createdAt
        }

        /// The tag of `instance` as it is.
        init(_ instance: StoredInstance) {
            // The store's own rounding, so a tag from the cache and one from a read of the store agree.
            self.init(version: instance.state.version, createdAt: instance.createdAt.millisecondsSince1970)
        }

        /// The opaque part of an `ETag` (`3-1764650000123` or `3`), or `nil` for one no instance has: strong
        /// comparison is of the exact text, so `03` names none.
        init?(_ text: Substring) {
            let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard let version = Int64(parts[0]) else { return nil }
            self.init(version: version, createdAt: parts.count == 2 ? Int64(parts[1]) : nil)
            guard version >= 0, createdAt ?? 0 >= 0, etag.utf8.dropFirst().dropLast().elementsEqual(text.utf8) else { return nil }
        }

        /// The `ETag` header's value, quoted.
        var etag: String { "\"\(version)\(createdAt.map { "-\($0)" } ?? "")\"" }

        /// Whether `instance` is at this version (and, when the tag names one, of this creation).
        func matches(_ instance: StoredInstance) -> Bool {
            let current = InstanceTag(instance)
            return version == current.version && (createdAt == nil || createdAt == current.createdAt)
        }
    }

    /// What a committed write did (or, replayed for its idempotency key, did when first sent).
    enum WriteOutcome: Sendable {
        /// Created the instance `id`, whose JSON as created is `json`.
        case created(id: String, json: [UInt8])
        /// Found the instance a PUT names already there with its model.
        case found(id: String, json: [UInt8])
        case deleted
        /// Applied an input: the numbered record's JSON, and, when the input was unexpected
        /// (recorded and counted all the same), what its 409 names.
        case applied(recordJSON: [UInt8], unexpected: UnexpectedInput?)
    }

    /// An input the model did not expect in the state it came in, as its 409 names it.
    struct UnexpectedInput: Sendable, Equatable {
        /// The event's or action's name (a relaunch's or a gap's kind).
        var input: String
        /// The state the instance was in.
        var state: String

        init(input: String, state: String) {
            self.input = input
            self.state = state
        }

        /// Named by the committer, from the record it made: the answer reads nothing again.
        init(_ record: Record) {
            switch record.kind {
            case .event, .action: input = record.name
            case .relaunch, .gap: input = record.kind.rawValue
            }
            state = record.from
        }

        /// Read back from a stored record's JSON (a replay's); `nil` when it names no input or state.
        init?(recordJSON: [UInt8]) throws(JSONParseError) {
            guard case .object(let members) = try JSONParser.parse(recordJSON), case .string(let state)? = members["from"],
                  case .string(let input)? = members["event"] ?? members["action"] ?? members["kind"]
            else { return nil }
            self.input = input
            self.state = state
        }
    }

    /// Why a write or a read was refused. A refused write changed nothing.
    enum Refusal: Error, Sendable {
        /// `suggestion` names the model probably meant, or lists them.
        case unknownModel(String, suggestion: String)
        /// The instance exists, with `model`: a create may not make it again, nor a PUT
        /// with another model.
        case exists(id: String, model: String, isPut: Bool)
        case unknownInstance(String)
        /// The instance is at `current`, which no tag the write expected matches.
        case versionMismatch(id: String, current: InstanceTag)
        /// The machine refused the input.
        case invalidInput(InputError)
        /// The idempotency key came with a different request before.
        case keyReused(String)
        /// The instance `key` created has since been deleted; creating it again would undo that.
        case createdInstanceDeleted(id: String, key: String)
        /// The instance `key`'s input went to has since been deleted, and `id` made again: applying it anew would put a
        /// stale input on the new instance.
        case replayedInstanceDeleted(id: String, key: String)
        /// The store failed, for a reason of `kind`; `isOutcomeUnknown` when the connection to its
        /// server went during the commit, which may have taken effect.
        case storageFailed(StoreError.Kind, isOutcomeUnknown: Bool = false)
        /// The store failed to read what the cache does not hold: `what` names it.
        case storageUnreadable(what: String)
        case stopping
        /// The instance cannot be written as JSON (logged).
        case unrenderable(id: String)
        /// There are as many instances as allowed: a create waits for a delete.
        case instanceLimit(Int)
    }

    /// How a write is answered: on the committer thread, once it is committed or refused.
    typealias Completion = @Sendable (Result<WriteOutcome, Refusal>) -> Void
}
