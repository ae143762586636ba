import Foundation
import Testing
@testable import LifecycleKit

/// One row of the ios-app model (docs/MODEL.md#the-ios-app-model), written out independently of the model file.
struct ExpectedRow: CustomStringConvertible, Sendable {
    var from: String
    var event: String
    var parameters: [String: Value] = [:]
    var to: String
    var hooks: [String]
    var outcome: Outcome
    var description: String { "\(from) + \(event)\(parameters.isEmpty ? "" : " \(parameters)")" }
}

let iosTable: [ExpectedRow] = [
    .init(from: "initializing", event: "didFinishLaunching", parameters: ["isTesting": .bool(true)], to: "simulated", hooks: ["Simulated.init"], outcome: .transitioned),
    .init(from: "initializing", event: "didFinishLaunching", to: "launching", hooks: ["Launching.init"], outcome: .transitioned),
    .init(from: "initializing", event: "didFinishLaunching", parameters: ["isTesting": .bool(false)], to: "launching", hooks: ["Launching.init"], outcome: .transitioned),
    .init(from: "initializing", event: "didFinishLaunching", parameters: ["setupError": .string("no disk")], to: "terminating", hooks: ["Launching.init", "Terminating.init"], outcome: .transitioned),
    .init(from: "launching", event: "willConnectToWindow", parameters: window, to: "connected", hooks: ["Connected.init"], outcome: .transitioned),
    .init(from: "connected", event: "didBecomeActive", to: "foreground", hooks: ["Foreground.onTransition", "Foreground.didReturn"], outcome: .transitioned),
    .init(from: "connected", event: "didEnterBackground", to: "background", hooks: ["Background.onTransition", "Background.didReturn"], outcome: .transitioned),
    .init(from: "connected", event: "willEnterForeground", to: "connected", hooks: [], outcome: .ignored),
    .init(from: "connected", event: "willConnectToWindow", parameters: window, to: "connected", hooks: [], outcome: .stayed),
    .init(from: "foreground", event: "didBecomeActive", to: "foreground", hooks: ["Foreground.didReturn"], outcome: .stayed),
    .init(from: "foreground", event: "willResignActive", to: "foreground", hooks: ["Foreground.willLeave"], outcome: .stayed),
    .init(from: "foreground", event: "didEnterBackground", to: "background", hooks: ["Background.onTransition", "Background.didReturn"], outcome: .transitioned),
    .init(from: "foreground", event: "willConnectToWindow", parameters: window, to: "connected", hooks: ["Connected.init"], outcome: .transitioned),
    .init(from: "background", event: "didBecomeActive", to: "foreground", hooks: ["Foreground.onTransition", "Foreground.didReturn"], outcome: .transitioned),
    .init(from: "background", event: "didEnterBackground", to: "background", hooks: ["Background.didReturn"], outcome: .stayed),
    .init(from: "background", event: "willEnterForeground", to: "background", hooks: ["Background.willLeave"], outcome: .stayed),
    .init(from: "background", event: "willConnectToWindow", parameters: window, to: "connected", hooks: ["Connected.init"], outcome: .transitioned),
    .init(from: "simulated", event: "willConnectToWindow", parameters: window, to: "simulated", hooks: ["Simulated.configure"], outcome: .stayed),
    .init(from: "terminating", event: "willConnectToWindow", parameters: window, to: "terminating", hooks: ["Terminating.alertAndTerminate"], outcome: .stayed),
]

let iosStates = ["initializing", "launching", "connected", "foreground", "background", "terminating", "simulated"]
let iosEvents = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "willEnterForeground", "didEnterBackground"]

@Suite("ios-app model")
struct IOSModelTests {
    @Test("every row of the table", arguments: iosTable)
    func row(_ row: ExpectedRow) throws {
        var m = try iosMachine(in: row.from)
        let before = m.snapshot
        let record = try m.apply(event: row.event, parameters: row.parameters, at: t0)
        #expect(record.from == row.from)
        #expect(record.to == row.to)
        #expect(m.stateName == row.to)
        #expect(record.hooks == row.hooks)
        #expect(record.outcome == row.outcome)
        #expect(record.version == before.version + 1)
        #expect(record.row != nil)
    }

    @Test("simulated and terminating ignore every other event", arguments: ["simulated", "terminating"])
    func terminalStatesIgnore(state: String) throws {
        for event in iosEvents where event != "willConnectToWindow" {
            var m = try iosMachine(in: state)
            let record = try m.apply(event: event, parameters: minimalParameters(for: event), at: t0)
            #expect(record.outcome == .ignored, "\(state) + \(event)")
            #expect(record.hooks.isEmpty)
            #expect(m.stateName == state)
            #expect(m.snapshot.counters.ignored == 1)
        }
    }

    @Test("every other pair is unexpected, recorded and counted, and leaves the state")
    func otherPairsAreUnexpected() throws {
        let listed = Set(iosTable.map { "\($0.from)/\($0.event)" })
        var checked = 0
        for state in iosStates where state != "simulated" && state != "terminating" {
            for event in iosEvents where !listed.contains("\(state)/\(event)") {
                var m = try iosMachine(in: state)
                let before = m.snapshot
                let record = try m.apply(event: event, parameters: minimalParameters(for: event), at: t0)
                #expect(record.outcome == .unexpected, "\(state) + \(event)")
                #expect(record.hooks.isEmpty && record.row == nil)
                #expect(m.stateName == state)
                #expect(m.snapshot.counters.unexpected == before.counters.unexpected + 1)
                #expect(m.snapshot.version == before.version + 1)
                checked += 1
            }
        }
        // 5 non-terminal states x 6 events, less the 14 (state, event) pairs the table lists.
        #expect(checked == 30 - 14)
    }

    @Test("cold start remembers the window; connected reconnect records whether it changed")
    func windowMemory() throws {
        var m = try iosMachine(in: "connected")
        #expect(m.snapshot.window == "main")
        let same = try m.apply(event: "willConnectToWindow", parameters: window, at: t0)
        #expect(same.windowChanged == false)
        let other = try m.apply(event: "willConnectToWindow", parameters: ["window": .string("second")], at: t0)
        #expect(other.windowChanged == true)
        #expect(m.snapshot.window == "second")
    }

    @Test("bad input throws and changes nothing")
    func badInput() throws {
        var m = try iosMachine(in: "launching")
        let before = m.snapshot
        #expect(throws: InputError.unknownEvent("didExplode", model: "ios-app", known: Model.iosApp.definition.events.map(\.name))) {
            try m.apply(event: "didExplode", at: t0)
        }
        #expect(throws: InputError.missingParameter(input: "willConnectToWindow", parameter: "window")) {
            try m.apply(event: "willConnectToWindow", at: t0)
        }
        #expect(throws: InputError.wrongParameterType(input: "willConnectToWindow", parameter: "window", expected: .string, got: "integer")) {
            try m.apply(event: "willConnectToWindow", parameters: ["window": .integer(3)], at: t0)
        }
        #expect(throws: InputError.unknownParameter(input: "didBecomeActive", parameter: "force")) {
            try m.apply(event: "didBecomeActive", parameters: ["force": .bool(true)], at: t0)
        }
        #expect(throws: InputError.unknownAction("openDoor", model: "ios-app", known: Model.iosApp.definition.actions.map(\.name))) {
            try m.perform(action: "openDoor", at: t0)
        }
        #expect(m.snapshot == before)
        #expect(InputError.missingParameter(input: "willConnectToWindow", parameter: "window").description
            == "\"willConnectToWindow\" requires parameter \"window\"")
    }

    @Test("names may not be empty: window, url, type and activityType; setupError may")
    func emptyParameters() throws {
        var m = try iosMachine(in: "launching")
        let before = m.snapshot
        #expect(throws: InputError.parameterTooShort(input: "willConnectToWindow", parameter: "window", minLength: 1)) {
            try m.apply(event: "willConnectToWindow", parameters: ["window": .string("")], at: t0)
        }
        for (action, parameter) in [("openURL", "url"), ("handleShortcutItem", "type"), ("handleUserActivity", "activityType")] {
            #expect(throws: InputError.parameterTooShort(input: action, parameter: parameter, minLength: 1)) {
                try m.perform(action: action, parameters: [parameter: .string("")], at: t0)
            }
        }
        #expect(m.snapshot == before)
        #expect(InputError.parameterTooShort(input: "willConnectToWindow", parameter: "window", minLength: 1).description
            == "parameter \"window\" of \"willConnectToWindow\" must not be empty")
        #expect(try m.apply(event: "willConnectToWindow", parameters: ["window": .string("w")], at: t0).to == "connected")
        var fresh = Machine(model: .iosApp)
        #expect(try fresh.apply(event: "didFinishLaunching", parameters: ["setupError": .string("")], at: t0).to == "terminating")
    }

    @Test("an unknown event or action names the closest valid one, or lists them all")
    func unknownNameSuggestions() throws {
        var m = try iosMachine(in: "connected")
        let events = Model.iosApp.definition.events.map(\.name).joined(separator: ", ")
        let typo = #expect(throws: InputError.self) { try m.apply(event: "didBecomeActiv", at: t0) }
        #expect(typo?.description == "model \"ios-app\" has no event \"didBecomeActiv\"; did you mean \"didBecomeActive\"? valid events: \(events)")
        let lowercase = #expect(throws: InputError.self) { try m.perform(action: "openurl", at: t0) }
        #expect(lowercase?.description.hasPrefix("model \"ios-app\" has no action \"openurl\"; did you mean \"openURL\"?") == true)
        let farOff = #expect(throws: InputError.self) { try m.apply(event: "didExplode", at: t0) }
        #expect(farOff?.description == "model \"ios-app\" has no event \"didExplode\"; valid events: \(events)")
        #expect(closestName(to: "willEnterBackground", among: ["willEnterForeground", "didEnterBackground"]) == "didEnterBackground")
        #expect(closestName(to: "x", among: ["didBecomeActive"]) == nil)
        var droid = Machine(model: .androidActivity)
        let noActions = #expect(throws: InputError.self) { try droid.perform(action: "openURL", at: t0) }
        #expect(noActions?.description == "model \"android-activity\" has no action \"openURL\"; there are no actions")
    }

    @Test("every scenario of the lifecycle rule", arguments: Scenario.iosApp.map(\.name))
    func scenario(name: String) throws {
        let scenario = Scenario.iosApp.first { $0.name == name }!
        let result = try scenario.run(on: .iosApp)
        #expect(result.hooks == scenario.expectedHooks)
        #expect(result.finalState == scenario.expectedState)
        #expect(result.isPassing)
    }

    @Test("the scenarios named by the issue are all there")
    func scenarioNames() {
        #expect(Scenario.iosApp.map(\.name) == [
            "cold-start", "backgrounding", "foregrounding", "alert-dismissed", "app-switcher-return",
            "app-switcher-leave", "face-id-success-cold-start", "face-id-failure-cold-start",
            "ddg-face-id-lock", "critical-setup-failure", "launch-under-tests",
        ])
    }

    @Test("a scenario with wrong expectations does not pass")
    func failingScenario() throws {
        var scenario = Scenario.iosApp[0]
        scenario.expectedHooks.removeLast()
        #expect(try scenario.run(on: .iosApp).isPassing == false)
    }
}
