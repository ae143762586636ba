import LifecycleKit
import LifecycleStore

// The registry's vocabulary for writes: what a client asks for, what it did, why it was
// refused. The API turns outcomes and refusals into responses and problems (Answers.swift),
// so nothing here knows of HTTP.
extension InstanceRegistry {
    /// A change to make, in the order it arrived.
    enum Write: Sendable {
        case create(id: String, model: String, isPut: Bool, key: IdempotencyKey?)
        /// `expectedVersions`: from `If-Match`; `nil` for any version.
        case delete(id: String, expectedVersions: [Int64]?)
        case apply(ReportedInput, id: String, expectedVersions: [Int64]?, key: IdempotencyKey?)

        /// The instance the write names.
        var instanceID: String {
            switch self {
            case .create(let id, _, _, _), .delete(let id, _), .apply(_, let id, _, _): id
            }
        }

        /// What the write is, for logs.
        var summary: String {
            switch self {
            case .create(_, _, let isPut, _): isPut ? "put" : "create"
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

    /// What a committed write did (or, replayed for its idempotency key, did when first sent).
    enum WriteOutcome: Sendable {
        /// Created the instance `id`, whose JSON as created is `json`.
        case created(id: String, json: [UInt8])
        /// Found the instance a PUT names already there with its model.
        case found(id: String, json: [UInt8])
        case deleted
        /// Applied an input: the numbered record's JSON, and whether the input was unexpected
        /// (recorded and counted all the same).
        case applied(recordJSON: [UInt8], isUnexpected: Bool)
    }

    /// Why a write or a read was refused. A refused write changed nothing.
    enum Refusal: Error, Sendable {
        /// `suggestion` names the model probably meant, or lists them.
        case unknownModel(String, suggestion: String)
        /// The instance exists, with `model`: a create may not make it again, nor a PUT
        /// with another model.
        case exists(id: String, model: String, isPut: Bool)
        case unknownInstance(String)
        /// The instance is at version `current`, which the write did not expect.
        case versionMismatch(id: String, current: Int64)
        /// The machine refused the input.
        case invalidInput(InputError)
        /// The idempotency key came with a different request before.
        case keyReused(String)
        /// The instance `key` created has since been deleted; creating it again would undo that.
        case createdInstanceDeleted(id: String, key: String)
        /// The store failed; `isDiskFull` when it failed for want of space, `isOutcomeUnknown`
        /// when the connection to its server went during the commit, which may have taken effect.
        case storageFailed(isDiskFull: Bool, isOutcomeUnknown: Bool = false)
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
