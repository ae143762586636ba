import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LifecycleKit

/// One request of a batch (`POST /v1/batch`): what ``kind`` names, on ``instance``, with the
/// body its typed fields make.
///
/// Each item is answered exactly as its own request would be, so a queue of a device's events
/// can go in one round trip and still get one answer per event. The constructors fill in what
/// each kind takes; the fields a kind does not take are left `nil` (and refused by the service
/// if set, as its single request would refuse them).
public struct BatchItem: Sendable, Equatable {
    /// Which single request an item stands for.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// `PUT /v1/instances/{id}`: 201 created, 200 found, 409 another model.
        case create
        /// `POST /v1/instances/{id}/events`.
        case event
        /// `POST /v1/instances/{id}/actions`.
        case action
        /// `POST /v1/instances/{id}/relaunches`.
        case launch
        /// `POST /v1/instances/{id}/gaps`: a reporter had to drop ``BatchItem/dropped`` queued items.
        case gap
    }

    public var instance: String
    public var kind: Kind
    /// The event or action name (`event` and `action` only).
    public var name: String?
    /// The input's parameters (`event` and `action` only).
    public var parameters: [String: Value]
    /// The model of a `create` (`nil`: the service's default, `ios-app`).
    public var model: String?
    /// The labels of a `create`: who the instance is.
    public var labels: [String: String]
    /// The state the app's own machine is in after the input, as its code says.
    public var believedState: String?
    /// The hooks the app's code ran for the input, in order.
    public var ranHooks: [String]?
    /// When it happened on the device's clock.
    public var occurredAt: DeviceTime?
    /// How many queued items a `gap` stands for.
    public var dropped: Int?
    /// The item's `Idempotency-Key`: a fresh UUID unless given; `nil` sends none.
    public var idempotencyKey: String?
    /// The item's `If-Match`: apply only at this version (412 otherwise). A create takes none.
    public var expectedVersion: Int64?

    public init(
        instance: String, kind: Kind, name: String? = nil, parameters: [String: Value] = [:], model: String? = nil,
        believedState: String? = nil, ranHooks: [String]? = nil, occurredAt: DeviceTime? = nil, dropped: Int? = nil,
        idempotencyKey: String? = LifecycleClient.makeIdempotencyKey(), expectedVersion: Int64? = nil, labels: [String: String] = [:]
    ) {
        self.instance = instance
        self.kind = kind
        self.name = name
        self.parameters = parameters
        self.model = model
        self.labels = labels
        self.believedState = believedState
        self.ranHooks = ranHooks
        self.occurredAt = occurredAt
        self.dropped = dropped
        self.idempotencyKey = idempotencyKey
        self.expectedVersion = expectedVersion
    }

    /// Creates `instance` if absent (`PUT`).
    public static func create(
        _ instance: String, model: String? = nil, labels: [String: String] = [:], idempotencyKey: String? = LifecycleClient.makeIdempotencyKey()
    ) -> BatchItem {
        BatchItem(instance: instance, kind: .create, model: model, idempotencyKey: idempotencyKey, labels: labels)
    }

    /// An event, with what the app reports of it.
    public static func event(
        _ name: String, to instance: String, parameters: [String: Value] = [:], believedState: String? = nil, ranHooks: [String]? = nil,
        occurredAt: DeviceTime? = nil, expectedVersion: Int64? = nil, idempotencyKey: String? = LifecycleClient.makeIdempotencyKey()
    ) -> BatchItem {
        BatchItem(
            instance: instance, kind: .event, name: name, parameters: parameters, believedState: believedState, ranHooks: ranHooks,
            occurredAt: occurredAt, idempotencyKey: idempotencyKey, expectedVersion: expectedVersion
        )
    }

    /// An action, with what the app reports of it.
    public static func action(
        _ name: String, to instance: String, parameters: [String: Value] = [:], believedState: String? = nil, ranHooks: [String]? = nil,
        occurredAt: DeviceTime? = nil, expectedVersion: Int64? = nil, idempotencyKey: String? = LifecycleClient.makeIdempotencyKey()
    ) -> BatchItem {
        BatchItem(
            instance: instance, kind: .action, name: name, parameters: parameters, believedState: believedState, ranHooks: ranHooks,
            occurredAt: occurredAt, idempotencyKey: idempotencyKey, expectedVersion: expectedVersion
        )
    }

    /// A relaunch: a new process for `instance`.
    public static func launch(
        _ instance: String, occurredAt: DeviceTime? = nil, expectedVersion: Int64? = nil, idempotencyKey: String? = LifecycleClient.makeIdempotencyKey()
    ) -> BatchItem {
        BatchItem(instance: instance, kind: .launch, occurredAt: occurredAt, idempotencyKey: idempotencyKey, expectedVersion: expectedVersion)
    }

    /// `dropped` queued items of `instance` were lost before they could be sent.
    public static func gap(
        _ instance: String, dropped: Int, occurredAt: DeviceTime? = nil, expectedVersion: Int64? = nil,
        idempotencyKey: String? = LifecycleClient.makeIdempotencyKey()
    ) -> BatchItem {
        BatchItem(instance: instance, kind: .gap, occurredAt: occurredAt, dropped: dropped, idempotencyKey: idempotencyKey, expectedVersion: expectedVersion)
    }

    /// The body of the item's single request; `nil` for a create or launch with nothing to say.
    var body: [String: JSONValue]? {
        var body: [String: JSONValue] = [:]
        switch kind {
        case .create:
            if let model { body["model"] = .string(model) }
            if !labels.isEmpty { body["labels"] = .object(labels.mapValues(JSONValue.string)) }
        case .event, .action:
            body = parameters.mapValues(JSONValue.init)
            body[kind.rawValue] = .string(name ?? "")
        case .launch:
            break
        case .gap:
            if let dropped { body["dropped"] = .integer(Int64(dropped)) }
        }
        if let believedState { body["believedState"] = .string(believedState) }
        if let ranHooks { body["ranHooks"] = .array(ranHooks.map(JSONValue.string)) }
        if let occurredAt { body["occurredAt"] = .string(occurredAt.description) }
        return body.isEmpty && (kind == .create || kind == .launch) ? nil : body
    }

    /// The item as the batch body holds it.
    var json: JSONValue {
        var item: [String: JSONValue] = ["instance": .string(instance), "kind": .string(kind.rawValue)]
        if let body { item["body"] = .object(body) }
        if let idempotencyKey { item["idempotencyKey"] = .string(idempotencyKey) }
        if let expectedVersion { item["expectedVersion"] = .integer(expectedVersion) }
        return .object(item)
    }
}

/// What one batch item was answered: exactly what its own request would have answered.
public enum BatchResult: Sendable, Equatable {
    /// An input applied (status 200): its record.
    case record(status: Int, Record)
    /// A create (201 created, 200 found): the instance.
    case instance(status: Int, Instance)
    /// A refusal (404, 409, 412, 422, 503, 507, …). An unexpected event's 409 is here too, and
    /// its ``LifecycleProblem/record`` is what was recorded.
    case problem(status: Int, LifecycleProblem)

    /// The item's status.
    public var status: Int {
        switch self {
        case .record(let status, _), .instance(let status, _), .problem(let status, _): status
        }
    }

    /// The record the item stored, if any: an applied input's, or an unexpected event's.
    public var record: Record? {
        switch self {
        case .record(_, let record): record
        case .instance: nil
        case .problem(_, let problem): problem.record
        }
    }
}

extension LifecycleClient {
    /// Sends up to 1,000 creates and inputs in one request (`POST /v1/batch`); one result per
    /// item, in order.
    ///
    /// The items are applied in order, each against what the ones before it left, and
    /// committed together. An item refused on its own merits does not stop the ones after it:
    /// its result is a ``BatchResult/problem(status:_:)``. A batch refused whole (malformed,
    /// too large, unauthorized, rate-limited) throws ``LifecycleClientError/problem(_:)`` and
    /// stored nothing. When an item was answered 503, its problem's ``LifecycleProblem/retryAfter``
    /// says when to send the batch again, with the same keys, so that what was applied replays.
    public func batch(_ items: [BatchItem]) async throws -> [BatchResult] {
        let request = try APIRequest(write: "POST", "/v1/batch", json: ["items": .array(items.map(\.json))], idempotencyKey: nil)
        let response = try await send(request)
        let results = try Self.decode(BatchResults.self, from: response).results
        guard results.count == items.count else {
            throw LifecycleClientError.badResponse("\(results.count) results for \(items.count) items")
        }
        return try results.map { try $0.result(retryAfter: response.retryAfter) }
    }
}

/// The batch answer's shape, before its results are typed.
private struct BatchResults: Decodable {
    struct Result: Decodable {
        var status: Int
        var record: Record?
        var instance: Instance?
        var problem: [String: JSONValue]?

        func result(retryAfter: TimeInterval?) throws -> BatchResult {
            if let record { return .record(status: status, record) }
            if let instance { return .instance(status: status, instance) }
            if let problem {
                let body = try LifecycleClient.encoder.encode(problem)
                return .problem(status: status, LifecycleProblem(status: status, document: problem, body: body, retryAfter: status == 503 ? retryAfter : nil))
            }
            throw LifecycleClientError.badResponse("a batch result with no record, instance or problem")
        }
    }

    var results: [Result]
}
