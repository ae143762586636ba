import Foundation
import LifecycleKit
import LifecycleHTTP

// What a model is asked about its instances (coverage) and about traces and flows run on
// fresh machines of it (conformance, scenarios). The checks and scenario runs are
// computations: they are answered on the HTTP thread and never touch the store.

extension API {
    /// The most steps one conformance check replays: it bounds the work and the answer
    /// (a few hundred bytes a step). `--max-body` usually bounds a trace first.
    static let maxConformanceSteps = 10_000

    /// Every built-in scenario, each naming the model it runs on.
    static let scenarios: [Scenario] = Scenario.iosApp

    /// The model the path names.
    func pathModel(_ request: Request) throws(Problem) -> Model {
        let name = request.parameters["model"] ?? ""
        guard let model = registry.models[name] else { throw .notFound("no model \"\(name)\"") }
        return model
    }

    // MARK: coverage

    func coverage(_ request: Request) throws(Problem) -> Response {
        let model = try pathModel(request)
        return .json(CoverageView(model, registry.coverage(of: model)))
    }

    // MARK: conformance

    func checkConformance(_ request: Request) throws(Problem) -> Response {
        let model = try pathModel(request)
        let body = try request.jsonMembers(isRequired: true)
        for key in body.keys.sorted() where key != "steps" {
            throw .badRequest("unknown field \"\(key)\"; a conformance check takes \"steps\"")
        }
        guard case .array(let items)? = body["steps"] else {
            throw .badRequest("the body needs \"steps\": an array of steps such as {\"event\": \"didFinishLaunching\", \"believedState\": \"launching\"}")
        }
        guard items.count <= Self.maxConformanceSteps else {
            throw .badRequest("a check takes at most \(Self.maxConformanceSteps) steps; this one has \(items.count)")
        }
        let names = KnownNames(model)
        var steps: [Conformance.Step] = []
        steps.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            steps.append(try step(item, at: index, names))
        }
        return .json(ConformanceView(Conformance.check(steps, against: model)))
    }

    /// The names a step may use, looked up once per check rather than once per step.
    private struct KnownNames {
        let model: Model
        let events: Set<String>
        let actions: Set<String>
        let states: Set<String>

        init(_ model: Model) {
            self.model = model
            events = Set(model.definition.events.map(\.name))
            actions = Set(model.definition.actions.map(\.name))
            states = Set(model.definition.states.map(\.name))
        }
    }

    /// `{"event": name, ...parameters}`, `{"action": name, ...parameters}` or
    /// `{"relaunch": true}`, each with an optional `believedState` and `ranHooks`; `null` members
    /// are absent (and `occurredAt`, which a check has no use for, is passed over).
    ///
    /// A name the model does not have is refused (422, with the likely one meant), as a
    /// trace of another model or a typo in the request; parameters are left to the check,
    /// which reports a bad one as the step's problem.
    private func step(_ item: JSONValue, at index: Int, _ names: KnownNames) throws(Problem) -> Conformance.Step {
        guard case .object(let members) = item else {
            throw .badRequest("step \(index) must be an object such as {\"event\": \"didFinishLaunching\"}")
        }
        let present = members.filter { $0.value != .null }
        let kinds = ["event", "action", "relaunch"].filter { present[$0] != nil }
        guard kinds.count == 1 else {
            let has = kinds.isEmpty ? "neither" : kinds.map { "\"\($0)\"" }.joined(separator: " and ")
            throw .badRequest("step \(index) must have one of \"event\", \"action\" or \"relaunch\"; it has \(has)")
        }
        var believedState: String?
        switch present["believedState"] {
        case nil: break
        case .string(let state)?:
            guard names.states.contains(state) else {
                throw Self.unknownName(
                    "model \"\(names.model.name)\" has no state \"\(state)\"; \(suggestion(for: state, among: names.model.definition.states.map(\.name), kind: "state"))",
                    step: index
                )
            }
            believedState = state
        default:
            throw .badRequest("\"believedState\" of step \(index) must be the name of a state")
        }

        var ranHooks: [String]?
        switch present["ranHooks"] {
        case nil: break
        case .array(let items)?:
            ranHooks = []
            for case .string(let hook) in items { ranHooks?.append(hook) }
            guard ranHooks?.count == items.count else { throw .badRequest("\"ranHooks\" of step \(index) must be an array of hook names") }
        default:
            throw .badRequest("\"ranHooks\" of step \(index) must be an array of hook names")
        }

        let kind = kinds[0]
        if kind == "relaunch" {
            guard present["relaunch"] == .bool(true) else { throw .badRequest("\"relaunch\" of step \(index) must be true") }
            if let extra = members.keys.sorted().first(where: { $0 != "relaunch" && !AppReport.reservedNames.contains($0) }) {
                throw .badRequest("step \(index) is a relaunch, which takes no parameters; it has \"\(extra)\"")
            }
            return Conformance.Step(.relaunch, believedState: believedState, ranHooks: ranHooks)
        }
        guard case .string(let name)? = present[kind] else { throw .badRequest("\"\(kind)\" of step \(index) must be a string") }
        let model = names.model
        if kind == "event", !names.events.contains(name) {
            throw Self.unknownName(InputError.unknownEvent(name, model: model.name, known: model.definition.events.map(\.name)).description, step: index)
        }
        if kind == "action", !names.actions.contains(name) {
            throw Self.unknownName(InputError.unknownAction(name, model: model.name, known: model.definition.actions.map(\.name)).description, step: index)
        }
        var parameters: [String: Value] = [:]
        for key in present.keys.sorted() where key != kind && !AppReport.reservedNames.contains(key) {
            switch BodyValue(present[key]!) {
            case .value(let value): parameters[key] = value
            case .null: continue
            case .nested: throw .unprocessable("parameter \"\(key)\" of step \(index) must be a string, boolean or number")
            }
        }
        return Conformance.Step(kind == "event" ? .event(name, parameters) : .action(name, parameters), believedState: believedState, ranHooks: ranHooks)
    }

    /// 422 for a name the model lacks; `step` (0-based) says where, in `detail` and as a member.
    private static func unknownName(_ detail: String, step: Int) -> Problem {
        Problem(status: 422, title: "Unprocessable Content", detail: "\(detail) (step \(step))", extensions: ["step": JSONFragment(step)])
    }

    // MARK: scenarios

    func listScenarios(_ request: Request) throws(Problem) -> Response {
        let model = try pathModel(request)
        return .json(["items": Self.scenarios.filter { $0.model == model.name }.map(ScenarioView.init)])
    }

    func runScenario(_ request: Request) throws(Problem) -> Response {
        let model = try pathModel(request)
        let body = try request.jsonObject(isRequired: false)
        if let key = body.keys.sorted().first { throw .badRequest("unknown field \"\(key)\"; running a scenario takes no body") }
        let name = request.parameters["name"] ?? ""
        let scenarios = Self.scenarios.filter { $0.model == model.name }
        guard let scenario = scenarios.first(where: { $0.name == name }) else {
            throw .notFound("model \"\(model.name)\" has no scenario \"\(name)\"; \(suggestion(for: name, among: scenarios.map(\.name), kind: "scenario"))")
        }
        do {
            return .json(ScenarioRunView(name: scenario.name, result: try scenario.run(on: model)))
        } catch {
            throw .internalError("scenario \"\(scenario.name)\" does not run on model \"\(model.name)\": \(error)")
        }
    }
}

/// `GET /v1/models/{model}/coverage`.
struct CoverageView: Encodable {
    struct Row: Encodable {
        var row: String
        var from: String
        var event: String
        /// Where the row lands: its `to`, or `from` for a row that stays.
        var to: String
        var taken: Int64
        /// Records that took it with a divergence.
        var divergent: Int64
    }

    struct State: Encodable {
        var state: String
        var instances: Int
        var unexpected: Int64
        /// Divergent records that ended in the state.
        var divergences: Int64
        var incompleteLaunches: Int
    }

    var model: String
    var rows: [Row]
    var states: [State]
    var neverTaken: [String]

    init(_ model: Model, _ coverage: ModelCoverage) {
        self.model = model.name
        rows = zip(model.definition.transitions.indices, coverage.rows).map { index, counts in
            let row = model.definition.transitions[index]
            return Row(row: Model.rowID(index), from: row.from, event: row.event, to: row.to ?? row.from, taken: counts.taken, divergent: counts.divergent)
        }
        states = zip(model.definition.states, coverage.states).map { state, counts in
            State(
                state: state.name, instances: counts.instances, unexpected: counts.unexpected, divergences: counts.divergences,
                incompleteLaunches: counts.incompleteLaunches
            )
        }
        neverTaken = rows.filter { $0.taken == 0 }.map(\.row)
    }
}

/// An input as a conformance step: `{"event": name, ...parameters}`, `{"action": name, ...}`
/// or `{"relaunch": true}`.
struct StepView: Encodable {
    var input: Input

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        if case .gap(let dropped) = input { return try c.encode(dropped, forKey: Key("dropped")) }
        let (kind, name, parameters): (String, String?, [String: Value]) = switch input {
        case .event(let name, let parameters): ("event", name, parameters)
        case .action(let name, let parameters): ("action", name, parameters)
        case .relaunch, .gap: ("relaunch", nil, [:])
        }
        if let name { try c.encode(name, forKey: Key(kind)) } else { try c.encode(true, forKey: Key(kind)) }
        for key in parameters.keys.sorted() { try c.encode(parameters[key]!, forKey: Key(key)) }
    }
}

/// The answer to a conformance check.
struct ConformanceView: Encodable {
    struct FirstProblem: Encodable {
        var kind: String
        var step: Int
        var detail: String
    }

    struct Step: Encodable {
        var result: Conformance.StepResult

        enum CodingKeys: String, CodingKey { case record, error, believedState, beliefCorrect }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(result.record, forKey: .record)
            try c.encodeIfPresent(result.error?.description, forKey: .error)
            try c.encodeIfPresent(result.believedState, forKey: .believedState)
            try c.encodeIfPresent(result.isBeliefCorrect, forKey: .beliefCorrect)
        }
    }

    var conforming: Bool
    var firstProblem: FirstProblem?
    var finalState: String
    var exercisedRows: [String]
    var steps: [Step]

    init(_ report: Conformance.Report) {
        conforming = report.isConforming
        firstProblem = report.firstProblem.map { problem in
            switch problem {
            case .unexpectedEvent(let step, let event, let state):
                FirstProblem(kind: "unexpectedEvent", step: step, detail: "\"\(event)\" is not expected in state \"\(state)\"")
            case .beliefMismatch(let step, let believed, let actual):
                FirstProblem(kind: "beliefMismatch", step: step, detail: "the app believed it was in \"\(believed)\", but the model is in \"\(actual)\"")
            case .hookDivergence(let step, let hooks):
                FirstProblem(kind: "hookDivergence", step: step, detail: Self.describe(hooks))
            case .invalidInput(let step, let error):
                FirstProblem(kind: "invalidInput", step: step, detail: error.description)
            }
        }
        finalState = report.finalState
        exercisedRows = report.exercisedRows
        steps = report.steps.map(Step.init)
    }

    enum CodingKeys: String, CodingKey { case conforming, firstProblem, finalState, exercisedRows, steps }

    /// "ran [a, b, a], the model runs [a, b]: a is extra" and the like.
    static func describe(_ hooks: Divergence.Hooks) -> String {
        func list(_ names: [String]) -> String { "[\(names.joined(separator: ", "))]" }
        var parts: [String] = []
        if !hooks.missing.isEmpty { parts.append("missing \(list(hooks.missing))") }
        if !hooks.extra.isEmpty { parts.append("extra \(list(hooks.extra))") }
        if hooks.orderOnly { parts.append("the same hooks in another order") }
        return "the app's code ran \(list(hooks.ran)) where the model runs \(list(hooks.expected)): \(parts.joined(separator: "; "))"
    }

    /// `firstProblem` is written as `null` when there is none.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(conforming, forKey: .conforming)
        try c.encode(firstProblem, forKey: .firstProblem)
        try c.encode(finalState, forKey: .finalState)
        try c.encode(exercisedRows, forKey: .exercisedRows)
        try c.encode(steps, forKey: .steps)
    }
}

/// A scenario as listed.
struct ScenarioView: Encodable {
    var name: String
    var title: String
    var setup: [StepView]
    var steps: [StepView]
    var expectedHooks: [String]
    var expectedState: String

    init(_ scenario: Scenario) {
        name = scenario.name
        title = scenario.title
        setup = scenario.setup.map(StepView.init)
        steps = scenario.steps.map(StepView.init)
        expectedHooks = scenario.expectedHooks
        expectedState = scenario.expectedState
    }
}

/// What running a scenario produced.
struct ScenarioRunView: Encodable {
    var name: String
    var passing: Bool
    var hooks: [String]
    var finalState: String
    var records: [Record]

    init(name: String, result: Scenario.Result) {
        self.name = name
        passing = result.isPassing
        hooks = result.hooks
        finalState = result.finalState
        records = result.records
    }
}
