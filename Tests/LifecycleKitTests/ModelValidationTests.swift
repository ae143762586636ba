import Foundation
import Testing
@testable import LifecycleKit

/// A small valid model that each test breaks in one way.
func sampleDefinition() -> ModelDefinition {
    ModelDefinition(
        name: "door",
        states: [
            StateDefinition(name: "closed", kind: .initial),
            StateDefinition(name: "open", kind: .permanent),
            StateDefinition(name: "broken", kind: .terminal),
        ],
        events: [
            EventDefinition(name: "push", parameters: [ParameterDefinition(name: "force", type: .integer)]),
            EventDefinition(name: "pull"),
        ],
        transitions: [
            TransitionRow(from: "closed", event: "push", when: [Condition(parameter: "force", .notEquals(.integer(9)))], to: "open", hooks: ["Door.open"]),
            TransitionRow(from: "closed", event: "push", when: [Condition(parameter: "force", .equals(.integer(9)))], to: "broken", hooks: ["Door.break"]),
            TransitionRow(from: "open", event: "pull", to: "closed", hooks: ["Door.close"]),
        ]
    )
}

func validationError(_ change: (inout ModelDefinition) -> Void) -> ModelError? {
    var d = sampleDefinition()
    change(&d)
    do {
        _ = try Model(definition: d)
        return nil
    } catch {
        return error
    }
}

func validationError(json: String) -> ModelError? {
    do {
        _ = try Model(json: Data(json.utf8))
        return nil
    } catch {
        return error
    }
}

@Suite("model validation")
struct ModelValidationTests {
    @Test("the sample model is valid and runs")
    func sampleIsValid() throws {
        var m = Machine(model: try Model(definition: sampleDefinition()))
        #expect(try m.apply(event: "push", parameters: ["force": .integer(9)], at: t0).to == "broken")
    }

    @Test("minLength: on string parameters only, at least 0; read from and written to JSON")
    func minLength() throws {
        let text = ParameterDefinition(name: "label", type: .string, minLength: 2)
        #expect(validationError { $0.events[1].parameters = [text] } == nil)
        let number = ParameterDefinition(name: "force", type: .integer, minLength: 1)
        #expect(validationError { $0.events[0].parameters = [number] } == .badMinLength(owner: "push", parameter: "force"))
        let negative = ParameterDefinition(name: "label", type: .string, minLength: -1)
        #expect(validationError { $0.events[1].parameters = [negative] } == .badMinLength(owner: "pull", parameter: "label"))
        let decoded = try JSONDecoder().decode(ParameterDefinition.self, from: Data(#"{"name": "label", "type": "string", "minLength": 2}"#.utf8))
        #expect(decoded == text)
        #expect(String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self).contains(#""minLength":2"#))
        var d = sampleDefinition()
        d.events[1].parameters = [text]
        var m = Machine(model: try Model(definition: d))
        #expect(throws: InputError.parameterTooShort(input: "pull", parameter: "label", minLength: 2)) {
            try m.apply(event: "pull", parameters: ["label": .string("é")], at: t0)
        }
    }

    @Test("unknown state in a row")
    func unknownState() {
        let error = validationError { $0.transitions[2].to = "ajar" }
        #expect(error == .unknownState(row: 3, state: "ajar"))
        #expect(error?.description == "row 3: unknown state \"ajar\"")
        #expect(validationError { $0.transitions[0].from = "shut" } == .unknownState(row: 1, state: "shut"))
    }

    @Test("unknown event in a row")
    func unknownEvent() {
        let error = validationError { $0.transitions[2].event = "kick" }
        #expect(error == .unknownEvent(row: 3, event: "kick"))
        #expect(error?.description == "row 3: unknown event \"kick\"")
    }

    @Test("duplicate rows")
    func duplicateRow() {
        let error = validationError { $0.transitions.append($0.transitions[2]) }
        #expect(error == .duplicateRow(row: 4, duplicateOf: 3))
        #expect(error?.description == "row 4 duplicates row 3: same state, event and guard")
    }

    @Test("ambiguous rows: guards that can both hold")
    func ambiguousRows() {
        let error = validationError { $0.transitions[1].when = [Condition(parameter: "force", .isPresent(true))] }
        #expect(error == .ambiguousRows(row: 2, otherRow: 1))
        #expect(error?.description == "row 2 and row 1 can both match the same event: make their guards exclusive")
        // An unguarded row beside a guarded one is ambiguous too.
        #expect(validationError { $0.transitions[1].when = [] } == .ambiguousRows(row: 2, otherRow: 1))
    }

    @Test("unreachable state")
    func unreachable() {
        let error = validationError { $0.states.append(StateDefinition(name: "painted", kind: .permanent)) }
        #expect(error == .unreachableState("painted"))
        #expect(error?.description == "state \"painted\" is unreachable: no row leads to it from the initial state")
    }

    @Test("no initial state, or two")
    func initialState() {
        #expect(validationError { $0.states[0].kind = .permanent } == .noInitialState)
        #expect(ModelError.noInitialState.description == "no state has kind \"initial\"")
        #expect(validationError { $0.states[1].kind = .initial } == .multipleInitialStates(["closed", "open"]))
    }

    @Test("bad parameter type")
    func badParameterType() {
        let json = """
        {"name": "x", "states": [{"name": "a", "kind": "initial"}],
         "events": [{"name": "e", "parameters": [{"name": "p", "type": "color"}]}], "transitions": []}
        """
        let error = validationError(json: json)
        #expect(error == .badParameterType(parameter: "p", type: "color"))
        #expect(error?.description == "parameter \"p\" has unknown type \"color\" (expected one of string, boolean, integer, number)")
    }

    @Test("guard on an undeclared parameter, or of the wrong type")
    func badGuards() {
        #expect(validationError { $0.transitions[0].when = [Condition(parameter: "speed", .isPresent(true))] }
            == .unknownGuardParameter(row: 1, event: "push", parameter: "speed"))
        let mismatch = validationError { $0.transitions[0].when = [Condition(parameter: "force", .equals(.string("hard")))] }
        #expect(mismatch == .guardTypeMismatch(row: 1, parameter: "force", expected: .integer, value: .string("hard")))
        #expect(mismatch?.description == "row 1: guard on \"force\" compares with \"hard\", but the parameter is integer")
    }

    @Test("duplicate declarations")
    func duplicates() {
        #expect(validationError { $0.states.append($0.states[1]) } == .duplicateState("open"))
        #expect(validationError { $0.events.append($0.events[1]) } == .duplicateEvent("pull"))
        #expect(validationError { $0.events[0].parameters.append($0.events[0].parameters[0]) } == .duplicateParameter(owner: "push", parameter: "force"))
    }

    @Test("an event or action declares at most 32 parameters, and a string parameter holds at most 8192 characters")
    func parameterBounds() throws {
        let many = (1...33).map { ParameterDefinition(name: "p\($0)", type: .string) }
        let error = validationError { $0.events[1].parameters = many }
        #expect(error == .tooManyParameters(owner: "pull", count: 33, limit: 32))
        #expect(error?.description == "\"pull\" declares 33 parameters; an event or action may declare at most 32")
        #expect(validationError { $0.events[1].parameters = Array(many.prefix(32)) } == nil)

        var definition = sampleDefinition()
        definition.events[1].parameters = [ParameterDefinition(name: "note", type: .string)]
        var machine = Machine(model: try Model(definition: definition))
        // Characters, as JSON Schema's maxLength counts them: "é" as e and a combining accent is two.
        let tooLong = String(repeating: "e\u{301}", count: 4096) + "x"
        #expect(throws: InputError.parameterTooLong(input: "pull", parameter: "note", length: 8193, limit: 8192)) {
            try machine.apply(event: "pull", parameters: ["note": .string(tooLong)], at: t0)
        }
        #expect(try machine.apply(event: "pull", parameters: ["note": .string(String(repeating: "€", count: 8192))], at: t0).version == 1)
    }

    @Test("unknown effect and malformed files")
    func malformed() {
        let effect = """
        {"name": "x", "states": [{"name": "a", "kind": "initial"}], "events": [{"name": "e"}],
         "transitions": [{"from": "a", "event": "e", "effects": ["explode"]}]}
        """
        #expect(validationError(json: effect) == .unknownEffect("explode"))
        #expect(ModelError.unknownEffect("explode").description == "unknown effect \"explode\"")
        let missing = validationError(json: #"{"name": "x", "states": []}"#)
        #expect(missing == .malformed("missing \"events\" at the top level"))
        #expect(validationError(json: "{nope") != nil)
    }

    @Test("a NUL in any name or string of a model is refused: no store keeps it")
    func nul() {
        for edit in [
            { (d: inout ModelDefinition) in d.name += "\u{0}" },
            { (d: inout ModelDefinition) in d.states[1].name = "open\u{0}" },
            { (d: inout ModelDefinition) in d.events[0].name += "\u{0}x" },
            { (d: inout ModelDefinition) in d.transitions[0].hooks = ["a\u{0}"] },
        ] {
            #expect(validationError(edit) == .holdsNUL)
        }
        let json = #"{"name": "x\u0000", "states": [{"name": "a", "kind": "initial"}], "events": [], "transitions": []}"#
        #expect(validationError(json: json) == .holdsNUL)
        #expect(validationError { $0.name += "\u{1}\u{7F}\u{85}" } == nil, "other control characters are kept")
    }

    @Test("deliverAction needs a state with an action hook")
    func deliverNeedsHook() {
        #expect(validationError { $0.transitions[2].effects = [.deliverAction] } == .missingActionHook(row: 3, state: "closed"))
    }

    @Test("the built-in models survive a JSON round trip through the same loader")
    func roundTrip() throws {
        for model in [Model.iosApp, Model.androidActivity] {
            let data = try JSONEncoder().encode(model.definition)
            let reloaded = try Model(json: data)
            #expect(reloaded.definition == model.definition)
        }
        #expect(Model.iosApp.definition.transitions.count == 18)
        #expect(Model.builtins.keys.sorted() == ["android-activity", "ios-app"])
    }
}
