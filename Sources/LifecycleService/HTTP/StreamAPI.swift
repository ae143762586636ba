import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleHTTP

/// The two event streams of `openapi.yaml`: `GET /v1/stream` (every instance, filtered) and
/// `GET /v1/instances/{id}/stream`. Each answer is a subscription of the hub, which the
/// server reads whenever the connection can take more.
extension API {
    func globalStream(_ request: Request) throws(Problem) -> Response {
        try request.checkQuery(allowing: ["model", "instance", "outcome", "divergent", "lastEventId", "token"], repeatable: ["instance", "outcome"])
        let model = request.query("model")
        try checkModelFilter(model)
        var instances: Set<String>?
        for (name, id) in request.query where name == "instance" {
            guard isValidInstanceID(id) else { throw .badRequest("\(invalidInstanceID) (instance filter \"\(id)\")") }
            instances = (instances ?? []).union([id])
        }
        var outcomes: Set<Outcome>?
        for (name, value) in request.query where name == "outcome" {
            guard let outcome = Outcome(rawValue: value) else {
                let names = Outcome.allCases.map(\.rawValue)
                throw .badRequest("no outcome \"\(value)\"; \(suggestion(for: value, among: names, kind: "outcome"))")
            }
            outcomes = (outcomes ?? []).union([outcome])
        }
        return try stream(RecordFilter(model: model, instances: instances, outcomes: outcomes, divergentOnly: try request.flagQuery("divergent")), request)
    }

    func instanceStream(_ request: Request) throws(Problem) -> Response {
        try request.checkQuery(allowing: ["divergent", "lastEventId", "token"])
        let id = request.parameters["id"] ?? ""
        _ = try answering(try registry.instance(id))
        return try stream(RecordFilter(instances: [id], divergentOnly: try request.flagQuery("divergent")), request)
    }

    private func stream(_ filter: RecordFilter, _ request: Request) throws(Problem) -> Response {
        let lastEventID = try request.lastEventID()
        let subscription: Subscription
        do {
            subscription = try registry.hub.subscribe(filter: filter, lastEventID: lastEventID, client: request.clientAddress)
        } catch {
            switch error {
            case .tooManySubscribers(let limit):
                let detail = "\(limit) streams are open, the most this server takes (--max-subscribers); retry later"
                return .problem(.unavailable(detail), headers: [("Retry-After", "5")])
            case .tooManyForClient(let limit):
                // too-many-streams-per-client
                let detail = "\(limit) streams are open for this client, the most one client may hold (--max-connections-per-client); close one or retry later"
                return .problem(Problem(status: 429, title: "Too Many Requests", detail: detail), headers: [("Retry-After", "5")])
            case .stopping:
                return .problem(.unavailable("lifecycled is stopping"), headers: [("Retry-After", "1")])
            }
        }
        return .eventStream(subscription)
    }
}

extension Request {
    /// Where a stream resumes: the `Last-Event-ID` header an EventSource sends when it
    /// reconnects, else the `lastEventId` query parameter (a first connection cannot set
    /// headers from a browser); `nil` for neither.
    func lastEventID() throws(Problem) -> Int64? {
        guard let text = header("last-event-id") ?? query("lastEventId") else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let id = Int64(text) else {
            throw .badRequest("Last-Event-ID must be a sequence number (digits), such as the last id: a stream sent")
        }
        return id
    }
}
