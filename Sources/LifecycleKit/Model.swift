import Foundation

/// A validated model, compiled into the lookup tables the engine runs on.
///
/// Immutable and shared by every machine of the model.
public final class Model: Sendable {
    /// The definition it was built from, for serving and saving.
    public let definition: ModelDefinition
    public var name: String { definition.name }

    let initialState: Int
    let stateIndex: [String: Int]
    let eventIndex: [String: Int]
    let actionIndex: [String: Int]
    /// Row indices for each (state, event) pair, at `state * eventCount + event`.
    let rowTable: [[Int]]
    /// Target state index of each row, or `nil` to stay.
    let rowTargets: [Int?]
    /// Hook lists of each row, shared by every record that uses them.
    let rowHooks: [[String]]

    /// Validates a definition; throws the first problem found.
    public init(definition: ModelDefinition) throws(ModelError) {
        self.definition = definition
        guard !definition.name.isEmpty else { throw .emptyName }
        guard !Self.holdsNUL(definition) else { throw .holdsNUL }

        var stateIndex: [String: Int] = [:]
        for (i, state) in definition.states.enumerated() {
            guard stateIndex.updateValue(i, forKey: state.name) == nil else { throw .duplicateState(state.name) }
        }
        let initials = definition.states.filter { $0.kind == .initial }.map(\.name)
        guard let initialName = initials.first else { throw .noInitialState }
        guard initials.count == 1 else { throw .multipleInitialStates(initials) }

        var eventIndex: [String: Int] = [:]
        for (i, event) in definition.events.enumerated() {
            guard eventIndex.updateValue(i, forKey: event.name) == nil else { throw .duplicateEvent(event.name) }
            try Self.checkParameters(event.parameters, owner: event.name)
            if event.effects.contains(.rememberWindow) { try Self.checkWindowParameter(event) }
        }
        var actionIndex: [String: Int] = [:]
        for (i, action) in definition.actions.enumerated() {
            guard actionIndex.updateValue(i, forKey: action.name) == nil else { throw .duplicateAction(action.name) }
            try Self.checkParameters(action.parameters, owner: action.name)
        }

        let eventCount = definition.events.count
        var rowTable = [[Int]](repeating: [], count: definition.states.count * eventCount)
        var rowTargets: [Int?] = []
        for (i, row) in definition.transitions.enumerated() {
            let number = i + 1
            guard let from = stateIndex[row.from] else { throw .unknownState(row: number, state: row.from) }
            guard let event = eventIndex[row.event] else { throw .unknownEvent(row: number, event: row.event) }
            var target: Int?
            if let to = row.to {
                guard let t = stateIndex[to] else { throw .unknownState(row: number, state: to) }
                target = t
            }
            let eventDefinition = definition.events[event]
            for condition in row.when {
                guard let parameter = eventDefinition.parameters.first(where: { $0.name == condition.parameter }) else {
                    throw .unknownGuardParameter(row: number, event: row.event, parameter: condition.parameter)
                }
                switch condition.test {
                case .equals(let v), .notEquals(let v):
                    guard parameter.type.accepts(v) else {
                        throw .guardTypeMismatch(row: number, parameter: parameter.name, expected: parameter.type, value: v)
                    }
                case .isPresent: break
                }
            }
            let landing = definition.states[target ?? from]
            if row.effects.contains(.deliverAction), landing.actionHook == nil {
                throw .missingActionHook(row: number, state: landing.name)
            }
            if row.effects.contains(.rememberWindow) { try Self.checkWindowParameter(eventDefinition) }

            let slot = from * eventCount + event
            for other in rowTable[slot] {
                let otherRow = definition.transitions[other]
                if Set(otherRow.when) == Set(row.when) { throw .duplicateRow(row: number, duplicateOf: other + 1) }
                let exclusive = row.when.contains { mine in otherRow.when.contains { mine.excludes($0) } }
                if !exclusive { throw .ambiguousRows(row: number, otherRow: other + 1) }
            }
            rowTable[slot].append(i)
            rowTargets.append(target)
        }

        let initial = stateIndex[initialName]!
        var reached: Set<Int> = [initial]
        var frontier = [initial]
        while let state = frontier.popLast() {
            for event in 0..<eventCount {
                for row in rowTable[state * eventCount + event] {
                    if let t = rowTargets[row], reached.insert(t).inserted { frontier.append(t) }
                }
            }
        }
        if let unreachable = definition.states.indices.first(where: { !reached.contains($0) }) {
            throw .unreachableState(definition.states[unreachable].name)
        }

        self.initialState = initial
        self.stateIndex = stateIndex
        self.eventIndex = eventIndex
        self.actionIndex = actionIndex
        self.rowTable = rowTable
        self.rowTargets = rowTargets
        self.rowHooks = definition.transitions.map(\.hooks)
    }

    /// Decodes and validates a model from JSON.
    public convenience init(json: Data) throws(ModelError) {
        let definition: ModelDefinition
        do {
            definition = try JSONDecoder().decode(ModelDefinition.self, from: json)
        } catch let error as ModelError {
            throw error
        } catch {
            throw .malformed(Self.describe(error))
        }
        try self.init(definition: definition)
    }

    /// The name of the state every instance starts in.
    public var initialStateName: String { definition.states[initialState].name }

    /// Stable id of a transition row, used by the graph and in records.
    public static func rowID(_ index: Int) -> String { "r\(index + 1)" }

    /// Whether a string anywhere in `value` (a definition: structs, arrays, enums' payloads)
    /// holds U+0000; reflection reaches every string without a list of them to keep up.
    private static func holdsNUL(_ value: Any) -> Bool {
        if let text = value as? String { return text.utf8.contains(0) }
        return Mirror(reflecting: value).children.contains { holdsNUL($0.value) }
    }

    private static func checkParameters(_ parameters: [ParameterDefinition], owner: String) throws(ModelError) {
        guard parameters.count <= ParameterType.maxParametersPerInput else {
            throw .tooManyParameters(owner: owner, count: parameters.count, limit: ParameterType.maxParametersPerInput)
        }
        var seen: Set<String> = []
        for p in parameters {
            guard seen.insert(p.name).inserted else { throw .duplicateParameter(owner: owner, parameter: p.name) }
            guard !AppReport.reservedNames.contains(p.name) else { throw .reservedParameter(owner: owner, parameter: p.name) }
            if let minLength = p.minLength, p.type != .string || minLength < 0 {
                throw .badMinLength(owner: owner, parameter: p.name)
            }
        }
    }

    private static func checkWindowParameter(_ event: EventDefinition) throws(ModelError) {
        guard event.parameters.contains(where: { $0.name == "window" && $0.type == .string }) else {
            throw .missingWindowParameter(event: event.name)
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\" at \(path(context))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "\(context.debugDescription) at \(path(context))"
        case DecodingError.dataCorrupted(let context):
            return "\(context.debugDescription) at \(path(context))"
        default:
            return String(describing: error)
        }
    }

    private static func path(_ context: DecodingError.Context) -> String {
        let parts = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }
        return parts.isEmpty ? "the top level" : "$" + parts.joined()
    }
}

extension Model {
    /// The built-in models, by name.
    public static let builtins: [String: Model] = [iosApp.name: iosApp, androidActivity.name: androidActivity]

    /// The iOS app lifecycle as DuckDuckGo's browser models it.
    public static let iosApp: Model = builtin(BuiltinModels.iosApp)

    /// Android's Activity lifecycle, following Jetpack Lifecycle.
    public static let androidActivity: Model = builtin(BuiltinModels.androidActivity)

    private static func builtin(_ json: String) -> Model {
        do {
            return try Model(json: Data(json.utf8))
        } catch {
            fatalError("built-in model is invalid: \(error)")
        }
    }
}
