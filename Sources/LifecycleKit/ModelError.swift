/// Why a model definition was refused. Each message names the exact problem.
public enum ModelError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    case emptyName
    case duplicateState(String)
    case duplicateEvent(String)
    case duplicateAction(String)
    case duplicateParameter(owner: String, parameter: String)
    case tooManyParameters(owner: String, count: Int, limit: Int)
    case noInitialState
    case multipleInitialStates([String])
    case badParameterType(parameter: String, type: String)
    case badCondition(parameter: String)
    case unknownEffect(String)
    case unknownState(row: Int, state: String)
    case unknownEvent(row: Int, event: String)
    case unknownGuardParameter(row: Int, event: String, parameter: String)
    case guardTypeMismatch(row: Int, parameter: String, expected: ParameterType, value: Value)
    case duplicateRow(row: Int, duplicateOf: Int)
    case ambiguousRows(row: Int, otherRow: Int)
    case unreachableState(String)
    case missingActionHook(row: Int, state: String)
    case missingWindowParameter(event: String)
    case badMinLength(owner: String, parameter: String)
    /// A parameter named as a member every input body may carry (``AppReport/reservedNames``).
    case reservedParameter(owner: String, parameter: String)
    /// A name or string of the model holds U+0000, which no store keeps: its names go into
    /// every instance and record, as an input's strings do, whose NUL is refused too.
    case holdsNUL

    public var description: String {
        switch self {
        case .malformed(let why):
            "model is not valid JSON of the model shape: \(why)"
        case .emptyName:
            "model has no name"
        case .duplicateState(let s):
            "state \"\(s)\" is declared more than once"
        case .duplicateEvent(let e):
            "event \"\(e)\" is declared more than once"
        case .duplicateAction(let a):
            "action \"\(a)\" is declared more than once"
        case .duplicateParameter(let owner, let p):
            "\"\(owner)\" declares parameter \"\(p)\" more than once"
        case .tooManyParameters(let owner, let count, let limit):
            "\"\(owner)\" declares \(count) parameters; an event or action may declare at most \(limit)"
        case .noInitialState:
            "no state has kind \"initial\""
        case .multipleInitialStates(let names):
            "more than one initial state: \(names.joined(separator: ", "))"
        case .badParameterType(let p, let t):
            "parameter \"\(p)\" has unknown type \"\(t)\" (expected one of \(ParameterType.allCases.map(\.rawValue).joined(separator: ", ")))"
        case .badCondition(let p):
            "condition on \"\(p)\" needs one of \"equals\", \"notEquals\" or \"present\""
        case .unknownEffect(let e):
            "unknown effect \"\(e)\""
        case .unknownState(let row, let s):
            "row \(row): unknown state \"\(s)\""
        case .unknownEvent(let row, let e):
            "row \(row): unknown event \"\(e)\""
        case .unknownGuardParameter(let row, let e, let p):
            "row \(row): event \"\(e)\" has no parameter \"\(p)\" to guard on"
        case .guardTypeMismatch(let row, let p, let expected, let value):
            "row \(row): guard on \"\(p)\" compares with \(value), but the parameter is \(expected.rawValue)"
        case .duplicateRow(let row, let other):
            "row \(row) duplicates row \(other): same state, event and guard"
        case .ambiguousRows(let row, let other):
            "row \(row) and row \(other) can both match the same event: make their guards exclusive"
        case .unreachableState(let s):
            "state \"\(s)\" is unreachable: no row leads to it from the initial state"
        case .missingActionHook(let row, let s):
            "row \(row): deliverAction targets state \"\(s)\", which has no actionHook"
        case .missingWindowParameter(let e):
            "event \"\(e)\" uses rememberWindow but declares no string parameter \"window\""
        case .holdsNUL:
            "a name or string of the model holds U+0000 (NUL), which no stored string may"
        case .reservedParameter(let owner, let p):
            "\"\(owner)\" declares parameter \"\(p)\", a name reserved for what every input may carry (\(AppReport.reservedNames.sorted().joined(separator: ", ")))"
        case .badMinLength(let owner, let p):
            "parameter \"\(p)\" of \"\(owner)\" has a minLength, which must be a count of at least 0 on a string parameter"
        }
    }
}

/// Why an input was refused before it touched the machine. Nothing changes.
public enum InputError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `known` lists the model's events, to suggest the one meant.
    case unknownEvent(String, model: String, known: [String])
    /// `known` lists the model's actions, to suggest the one meant.
    case unknownAction(String, model: String, known: [String])
    case unknownParameter(input: String, parameter: String)
    case missingParameter(input: String, parameter: String)
    case wrongParameterType(input: String, parameter: String, expected: ParameterType, got: String)
    /// A string value longer than ``ParameterType/maxStringLength``.
    case parameterTooLong(input: String, parameter: String, length: Int, limit: Int)
    /// A string shorter than the parameter's `minLength` (an empty window name, say).
    case parameterTooShort(input: String, parameter: String, minLength: Int)
    /// A reported `believedState` that names no state of the model (a typo would diverge every time).
    case unknownBelievedState(String, model: String, known: [String])
    /// A reported `ranHooks` longer than ``AppReport/maxHooks``, or with a name that is empty or
    /// longer than ``AppReport/maxHookLength``.
    case badRanHooks(String)

    public var description: String {
        switch self {
        case .unknownBelievedState(let s, let m, let known):
            "believedState \"\(s)\" is not a state of model \"\(m)\"; \(suggestion(for: s, among: known, kind: "state"))"
        case .badRanHooks(let why):
            "ranHooks \(why)"
        case .unknownEvent(let e, let m, let known):
            "model \"\(m)\" has no event \"\(e)\"; \(suggestion(for: e, among: known, kind: "event"))"
        case .unknownAction(let a, let m, let known):
            "model \"\(m)\" has no action \"\(a)\"; \(suggestion(for: a, among: known, kind: "action"))"
        case .unknownParameter(let i, let p):
            "\"\(i)\" has no parameter \"\(p)\""
        case .missingParameter(let i, let p):
            "\"\(i)\" requires parameter \"\(p)\""
        case .wrongParameterType(let i, let p, let expected, let got):
            "parameter \"\(p)\" of \"\(i)\" must be \(expected.rawValue), got \(got)"
        case .parameterTooLong(let i, let p, let length, let limit):
            "parameter \"\(p)\" of \"\(i)\" is \(length) characters long; a string parameter holds at most \(limit)"
        case .parameterTooShort(let i, let p, let minLength):
            minLength == 1
                ? "parameter \"\(p)\" of \"\(i)\" must not be empty"
                : "parameter \"\(p)\" of \"\(i)\" must have at least \(minLength) characters"
        }
    }
}
