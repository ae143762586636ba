/// The raw, unvalidated shape of a model as it appears in a JSON file.
///
/// Turn it into a usable ``Model`` with ``Model/init(definition:)``, which
/// validates every reference and builds the lookup tables the engine runs on.
public struct ModelDefinition: Sendable, Codable, Equatable {
    public var name: String
    public var title: String?
    public var states: [StateDefinition]
    public var events: [EventDefinition]
    public var actions: [ActionDefinition]
    public var transitions: [TransitionRow]

    public init(
        name: String, title: String? = nil, states: [StateDefinition], events: [EventDefinition],
        actions: [ActionDefinition] = [], transitions: [TransitionRow]
    ) {
        self.name = name
        self.title = title
        self.states = states
        self.events = events
        self.actions = actions
        self.transitions = transitions
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        states = try c.decode([StateDefinition].self, forKey: .states)
        events = try c.decode([EventDefinition].self, forKey: .events)
        actions = try c.decodeIfPresent([ActionDefinition].self, forKey: .actions) ?? []
        transitions = try c.decode([TransitionRow].self, forKey: .transitions)
    }
}

/// How long an app stays in a state.
public enum StateKind: String, Sendable, Codable, CaseIterable {
    /// Where every instance starts, and where a relaunch returns to.
    case initial
    /// Passed through on the way somewhere else.
    case transient
    /// Where an app rests between events.
    case permanent
    /// Nothing leaves it but a relaunch.
    case terminal
}

/// What happens to an event that no row of the current state matches.
public enum UnmatchedPolicy: String, Sendable, Codable {
    /// Rejected (409), but recorded and counted.
    case unexpected
    /// Accepted as a no-op, recorded and counted.
    case ignored
}

/// One state of a model.
public struct StateDefinition: Sendable, Codable, Equatable {
    public var name: String
    public var kind: StateKind
    /// Events with no row here are `unexpected` unless this says `ignored`.
    public var otherEvents: UnmatchedPolicy
    /// When set, actions are handled at once in this state with the hook
    /// `<actionHook>(<action>)`; elsewhere they are buffered.
    public var actionHook: String?

    public init(name: String, kind: StateKind, otherEvents: UnmatchedPolicy = .unexpected, actionHook: String? = nil) {
        self.name = name
        self.kind = kind
        self.otherEvents = otherEvents
        self.actionHook = actionHook
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        kind = try c.decode(StateKind.self, forKey: .kind)
        otherEvents = try c.decodeIfPresent(UnmatchedPolicy.self, forKey: .otherEvents) ?? .unexpected
        actionHook = try c.decodeIfPresent(String.self, forKey: .actionHook)
    }
}

/// A declared parameter of an event or action.
///
/// In JSON: `{"name": "window", "type": "string", "required": true, "minLength": 1}`.
/// A string parameter may be empty unless its `minLength` says otherwise.
public struct ParameterDefinition: Sendable, Codable, Equatable {
    public var name: String
    public var type: ParameterType
    public var isRequired: Bool
    /// The fewest characters (Unicode code points, as in JSON Schema) a string value may
    /// have; `nil` when any string will do. Only string parameters have one.
    public var minLength: Int?

    public init(name: String, type: ParameterType, isRequired: Bool = false, minLength: Int? = nil) {
        self.name = name
        self.type = type
        self.isRequired = isRequired
        self.minLength = minLength
    }

    enum CodingKeys: String, CodingKey { case name, type, isRequired = "required", minLength }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        let rawType = try c.decode(String.self, forKey: .type)
        guard let type = ParameterType(rawValue: rawType) else {
            throw ModelError.badParameterType(parameter: name, type: rawType)
        }
        self.type = type
        isRequired = try c.decodeIfPresent(Bool.self, forKey: .isRequired) ?? false
        minLength = try c.decodeIfPresent(Int.self, forKey: .minLength)
    }
}

/// An input that may change state.
public struct EventDefinition: Sendable, Codable, Equatable {
    public var name: String
    public var parameters: [ParameterDefinition]
    /// Effects that run whenever this event arrives, in any state, before its row.
    public var effects: [Effect]

    public init(name: String, parameters: [ParameterDefinition] = [], effects: [Effect] = []) {
        self.name = name
        self.parameters = parameters
        self.effects = effects
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        parameters = try c.decodeIfPresent([ParameterDefinition].self, forKey: .parameters) ?? []
        effects = try c.decodeIfPresent([Effect].self, forKey: .effects) ?? []
    }
}

/// An input that never changes state: handled at once or buffered.
public struct ActionDefinition: Sendable, Codable, Equatable {
    public var name: String
    public var parameters: [ParameterDefinition]

    public init(name: String, parameters: [ParameterDefinition] = []) {
        self.name = name
        self.parameters = parameters
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        parameters = try c.decodeIfPresent([ParameterDefinition].self, forKey: .parameters) ?? []
    }
}

/// One row of the transition table.
public struct TransitionRow: Sendable, Codable, Equatable {
    public var from: String
    public var event: String
    /// All conditions must hold for the row to match.
    public var when: [Condition]
    /// The target state; `nil` means stay.
    public var to: String?
    public var hooks: [String]
    public var effects: [Effect]
    /// Overrides the outcome a matching row produces (for example `ignored`).
    public var outcome: Outcome?

    public init(
        from: String, event: String, when: [Condition] = [], to: String? = nil, hooks: [String] = [],
        effects: [Effect] = [], outcome: Outcome? = nil
    ) {
        self.from = from
        self.event = event
        self.when = when
        self.to = to
        self.hooks = hooks
        self.effects = effects
        self.outcome = outcome
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        from = try c.decode(String.self, forKey: .from)
        event = try c.decode(String.self, forKey: .event)
        when = try c.decodeIfPresent([Condition].self, forKey: .when) ?? []
        to = try c.decodeIfPresent(String.self, forKey: .to)
        hooks = try c.decodeIfPresent([String].self, forKey: .hooks) ?? []
        effects = try c.decodeIfPresent([Effect].self, forKey: .effects) ?? []
        outcome = try c.decodeIfPresent(Outcome.self, forKey: .outcome)
    }
}

/// A guard on one event parameter.
///
/// In JSON: `{"parameter": "isTesting", "equals": true}`, `{"parameter": "isTesting", "notEquals": true}`
/// or `{"parameter": "setupError", "present": false}`.
public struct Condition: Sendable, Codable, Hashable, CustomStringConvertible {
    public enum Test: Sendable, Hashable {
        case equals(Value)
        case notEquals(Value)
        case isPresent(Bool)
    }

    public var parameter: String
    public var test: Test

    public init(parameter: String, _ test: Test) {
        self.parameter = parameter
        self.test = test
    }

    enum CodingKeys: String, CodingKey { case parameter, equals, notEquals, present }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        parameter = try c.decode(String.self, forKey: .parameter)
        if let v = try c.decodeIfPresent(Value.self, forKey: .equals) {
            test = .equals(v)
        } else if let v = try c.decodeIfPresent(Value.self, forKey: .notEquals) {
            test = .notEquals(v)
        } else if let p = try c.decodeIfPresent(Bool.self, forKey: .present) {
            test = .isPresent(p)
        } else {
            throw ModelError.badCondition(parameter: parameter)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(parameter, forKey: .parameter)
        switch test {
        case .equals(let v): try c.encode(v, forKey: .equals)
        case .notEquals(let v): try c.encode(v, forKey: .notEquals)
        case .isPresent(let p): try c.encode(p, forKey: .present)
        }
    }

    /// Whether the condition holds for these parameters.
    func holds(in parameters: [String: Value]) -> Bool {
        switch test {
        case .equals(let v): parameters[parameter] == v
        case .notEquals(let v): parameters[parameter] != v
        case .isPresent(let p): (parameters[parameter] != nil) == p
        }
    }

    /// Whether no parameters can satisfy both conditions.
    func excludes(_ other: Condition) -> Bool {
        guard parameter == other.parameter else { return false }
        switch (test, other.test) {
        case (.isPresent(let a), .isPresent(let b)): return a != b
        case (.equals(let a), .equals(let b)): return a != b
        case (.equals(let a), .notEquals(let b)), (.notEquals(let b), .equals(let a)): return a == b
        case (.equals, .isPresent(let p)), (.isPresent(let p), .equals): return !p
        default: return false
        }
    }

    public var description: String {
        switch test {
        case .equals(let v): "\(parameter) == \(v)"
        case .notEquals(let v): "\(parameter) != \(v)"
        case .isPresent(let p): p ? "\(parameter) present" : "\(parameter) absent"
        }
    }
}

/// Bookkeeping a row performs besides changing state.
///
/// Written in JSON as a string: `startLaunch`, `breadcrumb:<step>`, `clearBreadcrumb`,
/// `markSceneConnected`, `rememberWindow`, `deliverAction`, `clearAction`.
public enum Effect: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Report a left-over breadcrumb as an incomplete launch, then mark `launching-started`.
    case startLaunch
    /// Advance the launch breadcrumb to a step.
    case breadcrumb(String)
    /// Forget the breadcrumb: the launch finished.
    case clearBreadcrumb
    /// Note that a scene connected during this launch.
    case markSceneConnected
    /// Remember the event's `window` parameter and record whether it changed.
    case rememberWindow
    /// Hand the buffered action to the target state's action hook.
    case deliverAction
    /// Drop the buffered action.
    case clearAction

    public init(parsing text: String) throws(ModelError) {
        switch text {
        case "startLaunch": self = .startLaunch
        case "clearBreadcrumb": self = .clearBreadcrumb
        case "markSceneConnected": self = .markSceneConnected
        case "rememberWindow": self = .rememberWindow
        case "deliverAction": self = .deliverAction
        case "clearAction": self = .clearAction
        default:
            let prefix = "breadcrumb:"
            guard text.hasPrefix(prefix), text.count > prefix.count else { throw .unknownEffect(text) }
            self = .breadcrumb(String(text.dropFirst(prefix.count)))
        }
    }

    public init(from decoder: any Decoder) throws {
        self = try Effect(parsing: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    public var description: String {
        switch self {
        case .startLaunch: "startLaunch"
        case .breadcrumb(let step): "breadcrumb:\(step)"
        case .clearBreadcrumb: "clearBreadcrumb"
        case .markSceneConnected: "markSceneConnected"
        case .rememberWindow: "rememberWindow"
        case .deliverAction: "deliverAction"
        case .clearAction: "clearAction"
        }
    }
}

/// What applying an input did.
public enum Outcome: String, Sendable, Codable, CaseIterable {
    /// The state changed.
    case transitioned
    /// A row matched and the state stayed (hooks may still run).
    case stayed
    /// Expected, but nothing to do.
    case ignored
    /// Not valid in this state: rejected, but recorded and counted.
    case unexpected
}
