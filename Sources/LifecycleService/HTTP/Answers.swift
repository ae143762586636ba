import LifecycleHTTP

// The registry answers in outcomes and refusals; these turn them into HTTP.

extension Response {
    /// The answer to a write: what it did, or the problem its refusal makes.
    init(_ answer: Result<InstanceRegistry.WriteOutcome, InstanceRegistry.Refusal>) {
        switch answer {
        case .success(.created(let id, let json)):
            self.init(status: 201, headers: [("Content-Type", "application/json"), ("Location", "/v1/instances/\(id)")], body: JSON.terminated(json))
        case .success(.found(let id, let json)):
            self.init(status: 200, headers: [("Content-Type", "application/json"), ("Location", "/v1/instances/\(id)")], body: JSON.terminated(json))
        case .success(.deleted):
            self.init(status: 204)
        case .success(.applied(let json, unexpected: nil)):
            self.init(status: 200, headers: [("Content-Type", "application/json")], body: JSON.terminated(json))
        case .success(.applied(let json, unexpected: let input?)):
            self = .unexpected(json, input)
        case .failure(let refusal):
            self = .refusal(Problem(refusal))
        }
    }

    /// Seconds a client is asked to wait after a 503: about as long as the store takes to try
    /// its database again (its backoff ends at 2 s) or a stopping replica to be replaced.
    static let retryAfterSeconds = 2

    /// A refused request's problem. A 503 (storage failing, the service stopping) passes
    /// with time, and says when to try again in `Retry-After`.
    static func refusal(_ problem: Problem) -> Response {
        .problem(problem, headers: problem.status == 503 ? [("Retry-After", String(retryAfterSeconds))] : [])
    }

    /// 409 with a problem that carries the record: the input was recorded and counted.
    private static func unexpected(_ record: [UInt8], _ input: InstanceRegistry.UnexpectedInput) -> Response {
        let problem = Problem(
            status: 409, title: "Unexpected Event",
            detail: "\"\(input.input)\" is not expected in state \"\(input.state)\"; it was recorded and counted",
            type: ProblemKind.unexpectedEvent.type
        )
        // The record goes in as it is stored, unparsed; as the one extension it follows `detail`.
        return Response(status: 409, headers: [("Content-Type", "application/problem+json")], body: problem.json(adding: "record", json: record))
    }
}

extension Problem {
    /// The problem a refusal is answered with.
    init(_ refusal: InstanceRegistry.Refusal) {
        self = switch refusal {
        case .unknownModel(let name, let suggestion): .unprocessable("unknown model \"\(name)\"; \(suggestion)")
        case .exists(let id, let model, isPut: true): .conflict("instance \"\(id)\" exists with model \"\(model)\"")
        case .exists(let id, _, isPut: false): .conflict("instance \"\(id)\" exists; PUT it to fetch it idempotently")
        case .unknownInstance(let id): .unknownInstance(id)
        case .versionMismatch(let id, let current):
            .preconditionFailed("instance \"\(id)\" is at version \(current.version) (ETag \(current.etag)), which If-Match does not name")
        case .invalidInput(let error): .unprocessable(error.description)
        case .keyReused(let key): .unprocessable("Idempotency-Key \"\(key)\" was used for a different request")
        case .createdInstanceDeleted(let id, let key):
            Problem(
                status: 409, title: "Conflict",
                detail: "instance \"\(id)\", created by the first request with Idempotency-Key \"\(key)\", has since been deleted; nothing was created",
                type: ProblemKind.createdInstanceDeleted.type,
                extensions: ["instance": JSONFragment(id)]
            )
        case .replayedInstanceDeleted(let id, let key):
            Problem(
                status: 409, title: "Conflict",
                detail: "the input first sent with Idempotency-Key \"\(key)\" went to an instance \"\(id)\" since deleted; nothing was applied to the one made again under its id",
                type: ProblemKind.replayedInstanceDeleted.type,
                extensions: ["instance": JSONFragment(id)]
            )
        case .storageFailed(.diskFull, _): .unavailable("the disk is full; nothing was changed")
        case .storageFailed(_, isOutcomeUnknown: true):
            .unavailable(
                "storage failed during the commit, which may yet take effect; sent again with the same Idempotency-Key, the write is answered as it was if it did"
            )
        case .storageFailed: .unavailable("storage failed; nothing was changed")
        case .storageUnreadable(let what): .unavailable("storage failed; \(what) could not be read")
        case .stopping: .unavailable("lifecycled is stopping; nothing was changed")
        case .unrenderable(let id): .internalError("instance \"\(id)\" could not be written as JSON; see the service log")
        case .instanceLimit(let limit):
            Problem(
                status: 507, title: "Insufficient Storage",
                detail: "lifecycled holds its limit of \(limit) instances; delete some, or start it with a higher --max-instances. Nothing was created",
                type: ProblemKind.instanceLimit.type,
                extensions: ["limit": JSONFragment(limit)]
            )
        }
    }
}

/// Runs a registry read, turning its refusal into the problem it is answered with.
func answering<T>(_ read: @autoclosure () throws(InstanceRegistry.Refusal) -> T) throws(Problem) -> T {
    do {
        return try read()
    } catch {
        throw Problem(error)
    }
}
