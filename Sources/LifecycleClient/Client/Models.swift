import Foundation
import LifecycleKit

/// A loaded model as the service describes it (openapi `Model`): its definition, where
/// instances start, and the stable id of each transition row.
public struct ModelDescription: Sendable, Equatable, Decodable {
    /// States, events, actions and rows, as a model file holds them.
    public var definition: ModelDefinition
    /// The state every instance starts in, and a relaunch returns to.
    public var initialState: String
    /// The id of each row of `definition.transitions`, in order (`r1`, `r2`, …): what records'
    /// `row` and coverage name.
    public var rowIDs: [String]

    /// The model's name.
    public var name: String { definition.name }

    private struct Row: Decodable { var id: String }
    private enum CodingKeys: String, CodingKey { case initialState, transitions }

    public init(from decoder: any Decoder) throws {
        definition = try ModelDefinition(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        initialState = try c.decode(String.self, forKey: .initialState)
        rowIDs = try c.decode([Row].self, forKey: .transitions).map(\.id)
    }
}

/// How much of a model the recorded traffic has exercised (openapi `Coverage`).
public struct Coverage: Sendable, Equatable, Decodable {
    /// One transition row and the records that took it.
    public struct Row: Sendable, Equatable, Decodable {
        /// The row's stable id.
        public var row: String
        public var from: String
        public var event: String
        /// Where the row lands (its `from` for a row that stays).
        public var to: String
        /// Records that took the row.
        public var taken: Int64
        /// Records that took it with a `divergence`.
        public var divergent: Int64
    }

    /// One state and what was counted in it.
    public struct State: Sendable, Equatable, Decodable {
        public var state: String
        /// Instances in the state now.
        public var instances: Int
        /// Unexpected events recorded in the state.
        public var unexpected: Int64
        /// Divergent records whose `to` is the state.
        public var divergences: Int64
        /// Instances in the state now whose counters show an incomplete launch.
        public var incompleteLaunches: Int
    }

    public var model: String
    /// Every row, in table order.
    public var rows: [Row]
    /// Every state, in the model's order.
    public var states: [State]
    /// Ids of the rows no record took.
    public var neverTaken: [String]
}

extension Conformance.Step {
    /// The step as the API takes it: `{"event": name, ...parameters, "believedState"?, "ranHooks"?}`.
    var apiJSON: JSONValue {
        var step: [String: JSONValue] = [:]
        switch input {
        case .event(let name, let parameters):
            step = parameters.mapValues(JSONValue.init)
            step["event"] = .string(name)
        case .action(let name, let parameters):
            step = parameters.mapValues(JSONValue.init)
            step["action"] = .string(name)
        case .relaunch:
            step["relaunch"] = .bool(true)
        case .gap(let dropped):
            // A trace is what the app's code did; the check refuses a gap in one with 400 naming the step.
            step["dropped"] = .integer(dropped)
        }
        if let believedState { step["believedState"] = .string(believedState) }
        if let ranHooks { step["ranHooks"] = .array(ranHooks.map(JSONValue.string)) }
        return .object(step)
    }
}

extension Input {
    /// Reads a step as the API writes it (`{"event": name, ...parameters}`, `{"action": …}`,
    /// `{"relaunch": true}`), the app's report members left out.
    init(apiStep members: [String: JSONValue]) throws {
        var parameters: [String: Value] = [:]
        for (name, value) in members where !["event", "action", "relaunch", "believedState", "ranHooks", "occurredAt"].contains(name) {
            switch value {
            case .string(let text): parameters[name] = .string(text)
            case .bool(let flag): parameters[name] = .bool(flag)
            case .integer(let number): parameters[name] = .integer(number)
            case .number(let number): parameters[name] = .number(number)
            default: throw LifecycleClientError.badResponse("step parameter \(name) is not a string, boolean or number")
            }
        }
        if let name = members["event"]?.stringValue {
            self = .event(name, parameters)
        } else if let name = members["action"]?.stringValue {
            self = .action(name, parameters)
        } else if members["relaunch"] == .bool(true) {
            self = .relaunch
        } else {
            throw LifecycleClientError.badResponse("a step with no event, action or relaunch")
        }
    }
}

/// What a conformance check found (openapi `ConformanceReport`).
public struct ConformanceReport: Sendable, Equatable, Decodable {
    /// The first step where the trace departs from the model.
    public struct Problem: Sendable, Equatable, Decodable {
        /// `unexpectedEvent`, `beliefMismatch`, `hookDivergence` or `invalidInput`.
        public var kind: String
        /// The 0-based index of the step.
        public var step: Int
        public var detail: String
    }

    /// One step of the replay: its record (the model applied it) or its error (refused).
    public struct Step: Sendable, Equatable, Decodable {
        /// The record the step made, with its `ranHooks` and `divergence` when it reported hooks.
        public var record: Record?
        /// Why the model refused the step's input; it changed nothing.
        public var error: String?
        /// The belief the step stated.
        public var believedState: String?
        /// Whether that belief matched the model (`nil` when it stated none).
        public var beliefCorrect: Bool?
    }

    /// True when no step had a problem.
    public var conforming: Bool
    public var firstProblem: Problem?
    /// Where the replay ended.
    public var finalState: String
    /// Ids of the rows the replay took, in table order.
    public var exercisedRows: [String]
    /// One entry per step, in order.
    public var steps: [Step]
}

/// A scenario a model ships with (openapi `Scenario`): a setup, a flow and what it must do.
public struct ScenarioDescription: Sendable, Equatable, Decodable {
    public var name: String
    public var title: String
    /// Brings a fresh instance to where the flow begins.
    public var setup: [Input]
    /// The flow, whose hooks are compared with `expectedHooks`.
    public var steps: [Input]
    public var expectedHooks: [String]
    public var expectedState: String

    private enum CodingKeys: String, CodingKey { case name, title, setup, steps, expectedHooks, expectedState }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        title = try c.decode(String.self, forKey: .title)
        setup = try c.decode([[String: JSONValue]].self, forKey: .setup).map(Input.init(apiStep:))
        steps = try c.decode([[String: JSONValue]].self, forKey: .steps).map(Input.init(apiStep:))
        expectedHooks = try c.decode([String].self, forKey: .expectedHooks)
        expectedState = try c.decode(String.self, forKey: .expectedState)
    }
}

/// What running a scenario produced (openapi `ScenarioRun`).
public struct ScenarioRun: Sendable, Equatable, Decodable {
    public var name: String
    /// Whether the hooks and final state were those expected.
    public var passing: Bool
    /// The hooks the steps ran, in order.
    public var hooks: [String]
    public var finalState: String
    /// The records of the steps (not of the setup).
    public var records: [Record]
}

private struct Items<Item: Decodable>: Decodable { var items: [Item] }

extension LifecycleClient {
    /// Whether the service answers, and whether it wants the token (`GET /healthz`). A
    /// service whose storage fails answers a 503 problem.
    public func health() async throws -> Health {
        try await send(APIRequest("GET", "/healthz"), as: Health.self)
    }

    /// The Prometheus text exposition (`GET /metrics`).
    public func metrics() async throws -> String {
        String(decoding: try await send(APIRequest("GET", "/metrics"), accept: "text/plain").body, as: UTF8.self)
    }

    /// The page explaining a problem kind (`GET /problems/{kind}`), as the service sends it.
    public func problemPage(_ kind: String) async throws -> String {
        String(decoding: try await send(APIRequest("GET", "/problems/\(Self.segment(kind))"), accept: "text/html").body, as: UTF8.self)
    }

    /// Every loaded model (`GET /v1/models`).
    public func models() async throws -> [ModelDescription] {
        try await send(APIRequest("GET", "/v1/models"), as: Items<ModelDescription>.self).items
    }

    /// The model `name` (`GET /v1/models/{model}`).
    public func model(_ name: String) async throws -> ModelDescription {
        try await send(APIRequest("GET", "/v1/models/\(Self.segment(name))"), as: ModelDescription.self)
    }

    /// The model's state graph in Graphviz DOT (`GET /v1/models/{model}/graph.dot`).
    public func graphDOT(of model: String) async throws -> String {
        let request = APIRequest("GET", "/v1/models/\(Self.segment(model))/graph.dot")
        return String(decoding: try await send(request, accept: "text/vnd.graphviz").body, as: UTF8.self)
    }

    /// The model's state graph drawn as SVG (`GET /v1/models/{model}/graph.svg`).
    public func graphSVG(of model: String) async throws -> String {
        let request = APIRequest("GET", "/v1/models/\(Self.segment(model))/graph.svg")
        return String(decoding: try await send(request, accept: "image/svg+xml").body, as: UTF8.self)
    }

    /// Which rows and states the recorded traffic exercised (`GET /v1/models/{model}/coverage`).
    public func coverage(of model: String) async throws -> Coverage {
        try await send(APIRequest("GET", "/v1/models/\(Self.segment(model))/coverage"), as: Coverage.self)
    }

    /// Replays a recorded trace against the model and says where it departed
    /// (`POST /v1/models/{model}/conformance`); stores nothing.
    public func checkConformance(of model: String, steps: [Conformance.Step]) async throws -> ConformanceReport {
        let request = try APIRequest(write: "POST", "/v1/models/\(Self.segment(model))/conformance", json: ["steps": .array(steps.map(\.apiJSON))], idempotencyKey: nil)
        return try await send(request, as: ConformanceReport.self)
    }

    /// The model's scenarios (`GET /v1/models/{model}/scenarios`).
    public func scenarios(of model: String) async throws -> [ScenarioDescription] {
        try await send(APIRequest("GET", "/v1/models/\(Self.segment(model))/scenarios"), as: Items<ScenarioDescription>.self).items
    }

    /// Runs one scenario on a fresh machine (`POST /v1/models/{model}/scenarios/{name}`); stores nothing.
    public func runScenario(_ name: String, of model: String) async throws -> ScenarioRun {
        let request = try APIRequest(write: "POST", "/v1/models/\(Self.segment(model))/scenarios/\(Self.segment(name))", json: nil, idempotencyKey: nil)
        return try await send(request, as: ScenarioRun.self)
    }
}
