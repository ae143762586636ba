import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleLog
import LifecycleHTTP

/// The HTTP API of `openapi.yaml`: plain functions from request to response.
struct API: Sendable {
    let registry: InstanceRegistry
    let staticFiles: StaticFiles?
    /// `nil` with `--metrics off`: no `/metrics` route.
    let metrics: ServiceMetrics?
    /// The idempotency scope of the service's token; `nil` without one (keys are then
    /// scoped by client address).
    var tokenScope: String? = nil
    /// Whether reads need the token too (`--protect-reads`); writes need it whenever there is one.
    var readsNeedToken = false
    /// Where the graphs' drawing is logged.
    var logger = LineLogger()
    /// Bytes of records one history page, or of instances one list page, holds at most (`--page-bytes`).
    var pageBytes = PageLimit.defaultBytes
    /// What bounds the graphs' drawing.
    var graphLimits = ModelGraphs.Limits()

    /// Every route of the API, with static files for everything else.
    func makeRouter() -> Router {
        var router = Router()
        router.get("/healthz") { _ in health() }
        if let metrics { router.get("/metrics") { _ in metrics.response() } }
        router.get("/problems/{kind}", ProblemPages.respond)
        router.get("/v1/models") { _ in listModels() }
        router.get("/v1/models/{model}", read(model))
        let graphs = ModelGraphs(models: registry.models, limits: graphLimits, logger: logger)
        router.get("/v1/models/{model}/graph.dot", read(graphs.dot))
        // Answered when its drawing, on a queue of its own, is done or has taken too long.
        router.addDeferred(.get, "/v1/models/{model}/graph.svg", graphs.svg)
        router.get("/v1/models/{model}/coverage", read(coverage))
        // Computations on fresh machines, not writes: answered on the HTTP thread, like reads.
        router.add(.post, "/v1/models/{model}/conformance", read(checkConformance))
        router.get("/v1/models/{model}/scenarios", read(listScenarios))
        router.add(.post, "/v1/models/{model}/scenarios/{name}", read(runScenario))
        router.addDeferred(.post, "/v1/instances", write(createInstance))
        router.get("/v1/instances", read(listInstances))
        router.addDeferred(.put, "/v1/instances/{id}", write(putInstance))
        router.get("/v1/instances/{id}", read(getInstance))
        router.addDeferred(.delete, "/v1/instances/{id}", write(deleteInstance))
        router.addDeferred(.post, "/v1/instances/{id}/events", write(postEvent))
        router.addDeferred(.post, "/v1/instances/{id}/actions", write(postAction))
        router.addDeferred(.post, "/v1/instances/{id}/relaunches", write(postRelaunch))
        // The path before relaunches were named so everywhere (deprecated in openapi.yaml).
        router.addDeferred(.post, "/v1/instances/{id}/launches", write(postRelaunch))
        router.addDeferred(.post, "/v1/instances/{id}/gaps", write(postGap))
        router.addDeferred(.post, Self.batchPath, postBatch)
        router.get("/v1/instances/{id}/history", read(history))
        router.get("/v1/findings", read(listFindings))
        router.get("/v1/instances/{id}/stream", read(instanceStream))
        router.get("/v1/stream", read(globalStream))
        router.fallback = { [staticFiles] request in
            if request.path == "/v1" || request.path.hasPrefix("/v1/") { return .notFound(request) }
            guard let staticFiles else { return request.path == "/" ? .problem(Self.dashboardMissing) : .notFound(request) }
            return staticFiles.respond(to: request)
        }
        return router
    }

    /// `GET /` when the dashboard's files were not found at start (kind: dashboard-missing).
    /// Where it looked is in the log, not here: the answer may go beyond the host.
    static let dashboardMissing = Problem(
        status: 404, title: "Not Found",
        detail: "the dashboard's files were not found when lifecycled started (its log says where it looked); start it with "
            + "--public-dir PATH or LIFECYCLED_PUBLIC_DIR=PATH naming the folder that holds the dashboard's index.html "
            + "(Public in the repository; share/lifecycled/Public beside an installation's bin folder)"
    )

    /// A read (or a computation that stores nothing): answered on the HTTP thread; a thrown
    /// problem becomes its response.
    func read(_ answer: @escaping @Sendable (Request) throws(Problem) -> Response) -> Handler {
        { request in
            switch Result(catching: { () throws(Problem) in try answer(request) }) {
            case .success(let response): response
            case .failure(let problem): .refusal(problem)
            }
        }
    }

    /// A write: parsed here, on the HTTP thread, then queued for the committer, which
    /// answers once the write is durable.
    private func write(_ parse: @escaping @Sendable (Request) throws(Problem) -> InstanceRegistry.Write) -> DeferredHandler {
        { [registry] request, respond in
            let write: InstanceRegistry.Write
            switch Result(catching: { () throws(Problem) in try parse(request) }) {
            case .success(let parsed): write = parsed
            case .failure(let problem): return respond(.refusal(problem))
            }
            registry.submit(write, requestID: request.id) { respond(Response($0)) }
        }
    }

    /// 200 while the service can commit writes; 503 with the store's reason from the moment a
    /// write fails for a reason that is the store's (a full disk, an I/O error) until a write
    /// commits again. A write refused for its own data (which other writes survive) does not
    /// count. A replica on PostgreSQL also reports a database it cannot read, until it can;
    /// a PostgreSQL that does not answer fails writes and reads at their bounds
    /// (`--database-timeout`, `--database-read-timeout`), so this says 503 at most that long
    /// after it stops, and never waits on it.
    /// There is no separate readiness check: the port opens only once every instance
    /// is loaded, so a listening service is ready unless its storage fails, which this reports.
    ///
    /// Either answer also says whether writes and reads need the token, so that a client (the
    /// dashboard) knows before its first write whether to offer one; the token itself is never
    /// told, and a write without it is refused anyway.
    func health() -> Response {
        let writesNeedToken = tokenScope != nil
        guard let failure = registry.storageProblem else {
            return .json(Health(status: "ok", writesNeedToken: writesNeedToken, readsNeedToken: readsNeedToken))
        }
        return .problem(Problem(
            status: 503, title: "Service Unavailable",
            detail: "storage cannot \(failure.isReadOnly ? "be read" : "commit writes"): \(failure.reason)",
            type: ProblemKind.storageFailing.type,
            extensions: [
                "failingSince": JSONFragment(JSON.formatTime(failure.since)),
                "writesNeedToken": JSONFragment(writesNeedToken), "readsNeedToken": JSONFragment(readsNeedToken),
            ]
        ))
    }

    /// `GET /healthz`'s answer while writes can be committed.
    private struct Health: Encodable {
        var status: String
        var writesNeedToken: Bool
        var readsNeedToken: Bool
    }

    // MARK: models

    func listModels() -> Response {
        .json(["items": registry.models.values.sorted { $0.name < $1.name }.map(ModelView.init)])
    }

    func model(_ request: Request) throws(Problem) -> Response {
        .json(ModelView(try pathModel(request)))
    }

    // MARK: instances

    func createInstance(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        let members = try request.jsonMembers(isRequired: false)
        try refuseNUL(in: members)
        let labels = try InstanceLabels.parse(members["labels"])
        for key in members.keys where key != "id" && key != "model" && key != "labels" {
            throw .badRequest("unknown field \"\(key)\"; an instance takes \"id\", \"model\" and \"labels\"")
        }
        let id = try stringField(members, "id") ?? UUID().uuidString.lowercased()
        guard isValidInstanceID(id) else { throw .unprocessable(invalidInstanceID) }
        let model = try stringField(members, "model") ?? Model.iosApp.name
        let key = try request.idempotencyKey(endpoint: WriteEndpoint("POST /v1/instances"), body: request.body.isEmpty ? nil : members, tokenScope: tokenScope)
        return .create(id: id, model: model, isPut: false, key: key, labels: labels)
    }

    func putInstance(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        // PUT is idempotent by itself: it takes neither `If-Match` nor `Idempotency-Key`.
        try putWrite(WriteArguments(id: request.parameters["id"] ?? "", body: try request.jsonBody()))
    }

    /// `PUT /v1/instances/{id}`, and a batch's create item.
    func putWrite(_ arguments: WriteArguments) throws(Problem) -> InstanceRegistry.Write {
        guard isValidInstanceID(arguments.id) else { throw .badRequest(invalidInstanceID) }
        let members = try arguments.members(isRequired: false)
        let labels = try InstanceLabels.parse(members["labels"])
        for key in members.keys where key != "model" && key != "labels" {
            throw .badRequest("unknown field \"\(key)\"; PUT takes \"model\" and \"labels\"")
        }
        let model = try stringField(members, "model") ?? Model.iosApp.name
        return .create(id: arguments.id, model: model, isPut: true, key: arguments.key, labels: labels)
    }

    func getInstance(_ request: Request) throws(Problem) -> Response {
        let rendered = try answering(try registry.renderedInstance(request.parameters["id"] ?? ""))
        return Response(status: 200, headers: [("Content-Type", "application/json"), ("ETag", rendered.etag)], body: rendered.json)
    }

    func deleteInstance(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        .delete(id: request.parameters["id"] ?? "", expected: try request.expectedTags())
    }

    func listInstances(_ request: Request) throws(Problem) -> Response {
        try request.checkQuery(
            allowing: ["state", "model", "hasUnexpected", "hasIncompleteLaunch", "hasDivergence", "label", "finding", "limit", "cursor"], repeatable: ["label"]
        )
        let limit = Int(try request.integerQuery("limit", default: 100, in: 1...1000))
        let filter = ListFilter(
            model: request.query("model"), state: request.query("state"),
            hasUnexpected: try request.flagQuery("hasUnexpected"), hasIncompleteLaunch: try request.flagQuery("hasIncompleteLaunch"),
            hasDivergence: try request.flagQuery("hasDivergence"), labels: Set(try request.labelQuery()), finding: request.query("finding")
        )
        if let state = filter.state, !registry.stateNames.contains(state) {
            throw .badRequest("no loaded model has a state \"\(state)\"; \(suggestion(for: state, among: registry.stateNames, kind: "state"))")
        }
        try checkModelFilter(filter.model)
        let page = registry.list(filter, after: request.query("cursor"), limit: limit)
        // A page ends early at `pageBytes`, as a history page does, and its cursor says where to
        // continue: a buffered action's parameters can make each instance 8 KiB or more.
        var fill = PageFill(PageLimit(records: limit, bytes: pageBytes))
        var json = JSONBuffer(capacity: 64)
        json.raw("{\"items\":[")
        var last: String?
        for instance in page.items {
            let end = json.bytes.count
            if last != nil { json.byte(UInt8(ascii: ",")) }
            let start = json.bytes.count
            try answering(try registry.write(instance, to: &json))
            guard fill.admits(size: json.bytes.count - start) else {
                json.bytes.removeSubrange(end...)
                break
            }
            last = instance.id
        }
        json.raw("],\"nextCursor\":")
        if page.hasMore || fill.turnedAway, let last { json.string(last) } else { json.raw("null") }
        json.byte(UInt8(ascii: "}"))
        json.byte(JSON.newline)
        return Response(status: 200, headers: [("Content-Type", "application/json")], body: json.bytes)
    }

    /// Refuses a `model` filter that names no loaded model (a typo would match nothing).
    func checkModelFilter(_ model: String?) throws(Problem) {
        if let model, registry.models[model] == nil {
            throw .badRequest("no model \"\(model)\" is loaded; \(suggestion(for: model, among: registry.models.keys.sorted(), kind: "model"))")
        }
    }

    // MARK: inputs

    func postEvent(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        try eventWrite(try inputArguments(request, .event))
    }

    func postAction(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        try actionWrite(try inputArguments(request, .action))
    }

    func postRelaunch(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        try relaunchWrite(try inputArguments(request, .launch))
    }

    /// `POST /v1/instances/{id}/events`, and a batch's event item.
    func eventWrite(_ arguments: WriteArguments) throws(Problem) -> InstanceRegistry.Write {
        apply(try input(arguments, nameField: "event"), arguments)
    }

    /// `POST /v1/instances/{id}/actions`, and a batch's action item.
    func actionWrite(_ arguments: WriteArguments) throws(Problem) -> InstanceRegistry.Write {
        apply(try input(arguments, nameField: "action"), arguments)
    }

    /// `POST /v1/instances/{id}/relaunches`, and a batch's launch item.
    func relaunchWrite(_ arguments: WriteArguments) throws(Problem) -> InstanceRegistry.Write {
        let body = try arguments.members(isRequired: false)
        if let key = body.keys.sorted().first(where: { $0 != "occurredAt" }) {
            throw .badRequest("unknown field \"\(key)\"; a relaunch takes only \"occurredAt\"")
        }
        return apply(try ReportedInput(.relaunch, members: body, now: Date()), arguments)
    }

    func postGap(_ request: Request) throws(Problem) -> InstanceRegistry.Write {
        try gapWrite(try inputArguments(request, .gap))
    }

    /// The most inputs one gap may report dropped.
    static let maxDropped: Int64 = 1_000_000_000

    /// `POST /v1/instances/{id}/gaps`, and a batch's gap item: `{"dropped": N, "occurredAt"?}`.
    func gapWrite(_ arguments: WriteArguments) throws(Problem) -> InstanceRegistry.Write {
        let body = try arguments.members(isRequired: true)
        if let key = body.keys.sorted().first(where: { $0 != "dropped" && $0 != "occurredAt" }) {
            throw .badRequest("unknown field \"\(key)\"; a gap takes only \"dropped\" and \"occurredAt\"")
        }
        let outOfRange = Problem.unprocessable("\"dropped\" must be from 1 to \(Self.maxDropped): the inputs dropped before delivery")
        // JSON has one kind of number: 3.0 is the integer 3.
        let dropped: Int64
        switch body["dropped"] {
        case .integer(let count)? where (1...Self.maxDropped).contains(count): dropped = count
        case .number(let count)? where (1...Double(Self.maxDropped)).contains(count) && count == count.rounded(): dropped = Int64(count)
        case .integer?: throw outOfRange
        case .number(let count)? where count == count.rounded(): throw outOfRange
        default: throw .badRequest("the body needs \"dropped\": an integer from 1 to \(Self.maxDropped), the inputs dropped before delivery")
        }
        return apply(try ReportedInput(.gap(dropped: dropped), members: body, now: Date()), arguments)
    }

    /// What an input's request says besides its body: the instance, `If-Match` and
    /// `Idempotency-Key`, bound as the batch item of `kind` binds it.
    private func inputArguments(_ request: Request, _ kind: BatchKind) throws(Problem) -> WriteArguments {
        let id = request.parameters["id"] ?? ""
        let body = try request.jsonBody()
        return WriteArguments(
            id: id, body: body, expected: try request.expectedTags(),
            key: try request.idempotencyKey(endpoint: kind.endpoint(id), body: body, tokenScope: tokenScope)
        )
    }

    private func apply(_ input: ReportedInput, _ arguments: WriteArguments) -> InstanceRegistry.Write {
        .apply(input, id: arguments.id, expected: arguments.expected, key: arguments.key)
    }

    /// `{"<nameField>": name, ...parameters}`: every other member is a parameter, but for the
    /// report and the device's clock (``AppReport/reservedNames``).
    private func input(_ arguments: WriteArguments, nameField: String) throws(Problem) -> ReportedInput {
        let body = try arguments.members(isRequired: true)
        guard let name = try stringField(body, nameField) else {
            throw .badRequest("the body needs \"\(nameField)\": the name of the \(nameField)")
        }
        var parameters: [String: Value] = [:]
        for (key, member) in body where key != nameField && !AppReport.reservedNames.contains(key) {
            switch BodyValue(member) {
            case .value(let value): parameters[key] = value
            case .null: continue
            case .nested: throw .unprocessable("parameter \"\(key)\" must be a string, boolean or number")
            }
        }
        let input: Input = nameField == "event" ? .event(name, parameters) : .action(name, parameters)
        return try ReportedInput(input, members: body, now: Date())
    }

    private func stringField(_ body: [String: JSONValue], _ name: String) throws(Problem) -> String? {
        switch body[name] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw .badRequest("\"\(name)\" must be a string")
        }
    }

    // MARK: history

    func history(_ request: Request) throws(Problem) -> Response {
        try request.checkQuery(allowing: ["after", "limit", "divergent"])
        let after = try request.integerQuery("after", default: 0, in: 0...Int64.max)
        let limit = Int(try request.integerQuery("limit", default: 100, in: 1...1000))
        let divergentOnly = try request.flagQuery("divergent")
        // A page ends early at `pageBytes`, with the same continuation: what a client that does
        // not read holds on the server is one page per connection, whatever its records weigh.
        let id = request.parameters["id"] ?? ""
        let page = try answering(try registry.history(of: id, after: after, divergentOnly: divergentOnly, limit: PageLimit(records: limit, bytes: pageBytes)))
        // Records are stored as JSON; the page is assembled around them without re-encoding.
        var json = JSONBuffer(capacity: 64 + page.records.reduce(0) { $0 + $1.count + 1 })
        json.raw("{\"items\":[")
        for (index, record) in page.records.enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.bytes += record
        }
        json.raw("],\"nextAfter\":")
        if page.hasMore, let last = page.lastSequence { json.integer(last) } else { json.raw("null") }
        json.raw(",\"oldestRetainedSequence\":")
        if let oldest = page.oldestRetainedSequence { json.integer(oldest) } else { json.raw("null") }
        json.raw(",\"oldestRetainedVersion\":")
        if let oldest = page.oldestRetainedVersion { json.integer(oldest) } else { json.raw("null") }
        json.raw(",\"olderDropped\":")
        json.bool((page.oldestRetainedVersion ?? 1) > 1)
        json.byte(UInt8(ascii: "}"))
        json.byte(JSON.newline)
        return Response(status: 200, headers: [("Content-Type", "application/json")], body: json.bytes)
    }
}
