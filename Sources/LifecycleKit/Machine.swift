import Foundation

/// The lifecycle state machine of one app instance.
///
/// Each input (event, action, relaunch) is one mutating call that returns the
/// ``Record`` the caller must store and publish. No I/O happens here; the time
/// of a record is passed in so replays are deterministic.
public struct Machine: Sendable {
    public let model: Model
    private var stateIndex: Int
    private var version: Int64
    private var launchCount: Int64
    private var bufferedAction: PendingAction?
    private var window: String?
    private var breadcrumb: Breadcrumb
    private var counters: Counters

    /// A fresh instance in the model's initial state.
    public init(model: Model) {
        self.model = model
        stateIndex = model.initialState
        version = 0
        launchCount = 1
        bufferedAction = nil
        window = nil
        breadcrumb = Breadcrumb()
        counters = Counters()
    }

    /// Restores an instance exactly as it was saved; `nil` if its state is not in the model.
    public init?(model: Model, restoring saved: InstanceState) {
        guard let index = model.stateIndex[saved.state] else { return nil }
        self.model = model
        stateIndex = index
        version = saved.version
        launchCount = saved.launchCount
        bufferedAction = saved.bufferedAction
        window = saved.window
        breadcrumb = saved.breadcrumb
        counters = saved.counters
    }

    /// Where the instance is now.
    public var snapshot: InstanceState {
        InstanceState(
            state: stateName, version: version, launchCount: launchCount, bufferedAction: bufferedAction,
            window: window, breadcrumb: breadcrumb, counters: counters
        )
    }

    public var stateName: String { model.definition.states[stateIndex].name }

    /// Applies any input, with what the app reported of it and when it happened on the device:
    /// the record keeps both, and a ``Divergence`` where the report differs from the model,
    /// which is counted but changes nothing else. A report that names no state of the model, or
    /// hooks past the bounds, throws and changes nothing.
    public mutating func apply(reported: ReportedInput, at time: Date) throws(InputError) -> Record {
        try apply(reported.input, reported: reported.report, occurredAt: reported.occurredAt, at: time)
    }

    /// ``apply(reported:at:)`` in parts.
    public mutating func apply(_ input: Input, reported: AppReport, occurredAt: DeviceTime? = nil, at time: Date) throws(InputError) -> Record {
        if let believed = reported.believedState, model.stateIndex[believed] == nil {
            throw .unknownBelievedState(believed, model: model.name, known: model.definition.states.map(\.name))
        }
        if let hooks = reported.ranHooks {
            guard hooks.count <= AppReport.maxHooks else { throw .badRanHooks("holds \(hooks.count) names; at most \(AppReport.maxHooks)") }
            if let bad = hooks.first(where: { $0.isEmpty || $0.unicodeScalars.count > AppReport.maxHookLength }) {
                throw .badRanHooks("names must be 1 to \(AppReport.maxHookLength) characters long, not \(bad.unicodeScalars.count)")
            }
        }
        var record = try apply(input, at: time)
        record.believedState = reported.believedState
        record.ranHooks = reported.ranHooks
        record.occurredAt = occurredAt
        record.divergence = Divergence(reported, against: record)
        if record.divergence != nil { counters.divergences += 1 }
        return record
    }

    /// Applies an event. Unknown events and bad parameters throw and change nothing;
    /// an event the state does not expect is returned as an `unexpected` record.
    public mutating func apply(event name: String, parameters: [String: Value] = [:], at time: Date) throws(InputError) -> Record {
        guard let event = model.eventIndex[name] else { throw .unknownEvent(name, model: model.name, known: model.definition.events.map(\.name)) }
        let definition = model.definition.events[event]
        try Self.validate(parameters, against: definition.parameters, input: name)

        let from = stateIndex
        var record = Record(
            version: version + 1, kind: .event, name: name, parameters: parameters,
            from: model.definition.states[from].name, to: "", outcome: .stayed, time: time
        )
        for effect in definition.effects { run(effect, parameters: parameters, record: &record) }

        let candidates = model.rowTable[from * model.definition.events.count + event]
        if let row = candidates.first(where: { model.definition.transitions[$0].when.allSatisfy { $0.holds(in: parameters) } }) {
            let transition = model.definition.transitions[row]
            if let target = model.rowTargets[row] { stateIndex = target }
            record.hooks = model.rowHooks[row]
            record.row = Model.rowID(row)
            for effect in transition.effects { run(effect, parameters: parameters, record: &record) }
            if let outcome = transition.outcome {
                record.outcome = outcome
            } else {
                record.outcome = stateIndex == from ? .stayed : .transitioned
            }
        } else {
            record.outcome = model.definition.states[from].otherEvents == .ignored ? .ignored : .unexpected
        }
        switch record.outcome {
        case .ignored: counters.ignored += 1
        case .unexpected: counters.unexpected += 1
        case .transitioned, .stayed: break
        }
        return finish(&record)
    }

    /// Performs an action: handled at once where the state has an action hook, buffered elsewhere.
    /// Only the latest buffered action is kept; the record names the one it replaced.
    public mutating func perform(action name: String, parameters: [String: Value] = [:], at time: Date) throws(InputError) -> Record {
        guard let action = model.actionIndex[name] else { throw .unknownAction(name, model: model.name, known: model.definition.actions.map(\.name)) }
        try Self.validate(parameters, against: model.definition.actions[action].parameters, input: name)

        let here = stateName
        var record = Record(
            version: version + 1, kind: .action, name: name, parameters: parameters,
            from: here, to: here, outcome: .stayed, time: time
        )
        if let hook = model.definition.states[stateIndex].actionHook {
            record.hooks = ["\(hook)(\(name))"]
            record.disposition = .handled
        } else {
            record.replacedAction = bufferedAction
            bufferedAction = PendingAction(name: name, parameters: parameters)
            record.disposition = .buffered
        }
        return finish(&record)
    }

    /// A new process for the same instance: back to the initial state, forgetting the
    /// buffered action and the window, keeping the breadcrumb so an unfinished launch is seen.
    public mutating func relaunch(at time: Date) -> Record {
        var record = Record(
            version: version + 1, kind: .relaunch, name: "relaunch",
            from: stateName, to: "", outcome: .transitioned, time: time
        )
        record.clearedAction = bufferedAction
        stateIndex = model.initialState
        bufferedAction = nil
        window = nil
        launchCount += 1
        if record.from == stateName { record.outcome = .stayed }
        return finish(&record)
    }

    /// The app's reporter dropped `dropped` queued inputs before it could deliver them: the
    /// record marks the hole in the history, changing nothing of the instance but its count.
    public mutating func recordGap(dropped: Int64, at time: Date) -> Record {
        let here = stateName
        var record = Record(version: version + 1, kind: .gap, name: "gap", from: here, to: here, outcome: .stayed, time: time)
        record.dropped = dropped
        counters.dropped += dropped
        return finish(&record)
    }

    private mutating func finish(_ record: inout Record) -> Record {
        version += 1
        record.to = stateName
        return record
    }

    private mutating func run(_ effect: Effect, parameters: [String: Value], record: inout Record) {
        switch effect {
        case .startLaunch:
            if let incomplete = breadcrumb.incompleteLaunch {
                record.incompleteLaunch = incomplete
                counters.incompleteLaunches += 1
            }
            breadcrumb = breadcrumb.applying(effect)
        case .breadcrumb, .clearBreadcrumb, .markSceneConnected:
            breadcrumb = breadcrumb.applying(effect)
        case .rememberWindow:
            if case .string(let new) = parameters["window"] {
                record.windowChanged = window != new
                window = new
            }
        case .deliverAction:
            if let action = bufferedAction, let hook = model.definition.states[stateIndex].actionHook {
                record.hooks.append("\(hook)(\(action.name))")
                record.deliveredAction = action
                bufferedAction = nil
            }
        case .clearAction:
            if let action = bufferedAction {
                record.clearedAction = action
                bufferedAction = nil
            }
        }
    }

    private static func validate(_ parameters: [String: Value], against declared: [ParameterDefinition], input: String) throws(InputError) {
        for (name, value) in parameters {
            guard let definition = declared.first(where: { $0.name == name }) else {
                throw .unknownParameter(input: input, parameter: name)
            }
            guard definition.type.accepts(value) else {
                throw .wrongParameterType(input: input, parameter: name, expected: definition.type, got: value.typeName)
            }
            if case .string(let text) = value, text.unicodeScalars.count > ParameterType.maxStringLength {
                throw .parameterTooLong(input: input, parameter: name, length: text.unicodeScalars.count, limit: ParameterType.maxStringLength)
            }
            if let minLength = definition.minLength, case .string(let text) = value, text.unicodeScalars.count < minLength {
                throw .parameterTooShort(input: input, parameter: name, minLength: minLength)
            }
        }
        for definition in declared where definition.isRequired && parameters[definition.name] == nil {
            throw .missingParameter(input: input, parameter: definition.name)
        }
    }
}
