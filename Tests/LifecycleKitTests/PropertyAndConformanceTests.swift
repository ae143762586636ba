import Foundation
import Testing
@testable import LifecycleKit

/// SplitMix64: a seeded generator so a failing sequence can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("properties")
struct PropertyTests {
    static let values: [Value] = [.bool(true), .bool(false), .string("w1"), .string("w2"), .integer(1), .number(0.5)]

    func randomInput(_ model: Model, _ rng: inout SeededGenerator) -> Input {
        let d = model.definition
        func parameters(_ declared: [ParameterDefinition]) -> [String: Value] {
            var p: [String: Value] = [:]
            for parameter in declared where Bool.random(using: &rng) || parameter.isRequired {
                p[parameter.name] = Self.values.randomElement(using: &rng)!
            }
            if Int.random(in: 0..<20, using: &rng) == 0 { p["bogus"] = .bool(true) }
            return p
        }
        switch Int.random(in: 0..<20, using: &rng) {
        case 0: return .relaunch
        case 1, 2:
            let action = d.actions.randomElement(using: &rng)
            return .action(action?.name ?? "none", parameters(action?.parameters ?? []))
        case 3: return .event("noSuchEvent")
        default:
            let event = d.events.randomElement(using: &rng)!
            return .event(event.name, parameters(event.parameters))
        }
    }

    @Test("long random sequences never crash, stay in the model, and version by one per record", arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func randomSequences(seed: UInt64) throws {
        for model in [Model.iosApp, Model.androidActivity] {
            var rng = SeededGenerator(state: seed)
            var m = Machine(model: model)
            let states = Set(model.definition.states.map(\.name))
            var records = 0
            for _ in 0..<20_000 {
                let before = m.snapshot
                do {
                    let record = try m.apply(randomInput(model, &rng), at: t0)
                    records += 1
                    #expect(record.version == before.version + 1)
                    #expect(m.snapshot.version == before.version + 1)
                    #expect(record.from == before.state && record.to == m.stateName)
                    if record.outcome == .unexpected || record.outcome == .ignored { #expect(record.to == record.from) }
                } catch {
                    #expect(m.snapshot == before, "a refused input changed the machine")
                }
                #expect(states.contains(m.stateName))
            }
            #expect(m.snapshot.version == Int64(records))
            #expect(records > 10_000)
        }
    }
}

@Suite("conformance")
struct ConformanceTests {
    @Test("a conforming recording: every step, final state, exercised rows")
    func conforming() {
        let steps: [Conformance.Step] = [
            .init(.event("didFinishLaunching"), believedState: "launching"),
            .init(.event("willConnectToWindow", window), believedState: "connected"),
            .init(.event("didBecomeActive"), believedState: "foreground"),
            .init(.event("willResignActive")),
        ]
        let report = Conformance.check(steps, against: .iosApp)
        #expect(report.isConforming)
        #expect(report.steps.count == 4)
        #expect(report.steps.map(\.isBeliefCorrect) == [true, true, true, nil])
        #expect(report.finalState == "foreground")
        #expect(report.exercisedRows == ["r2", "r4", "r5", "r10"])
    }

    @Test("the first unexpected event is named, and replay goes on")
    func unexpected() {
        let steps: [Conformance.Step] = [
            .init(.event("didFinishLaunching")),
            .init(.event("didBecomeActive")),
            .init(.event("willConnectToWindow", window), believedState: "launching"),
        ]
        let report = Conformance.check(steps, against: .iosApp)
        #expect(report.firstProblem == .unexpectedEvent(step: 1, event: "didBecomeActive", state: "launching"))
        #expect(report.steps[2].isBeliefCorrect == false)
        #expect(report.finalState == "connected")
    }

    @Test("a belief mismatch is reported")
    func beliefMismatch() {
        let steps: [Conformance.Step] = [
            .init(.event("didFinishLaunching", ["setupError": .string("x")]), believedState: "launching"),
        ]
        let report = Conformance.check(steps, against: .iosApp)
        #expect(report.firstProblem == .beliefMismatch(step: 0, believed: "launching", actual: "terminating"))
        #expect(!report.isConforming)
    }

    @Test("invalid input is a problem, not a crash")
    func invalidInput() {
        let report = Conformance.check([.init(.event("onCreate"))], against: .iosApp)
        #expect(report.firstProblem == .invalidInput(step: 0, error: .unknownEvent("onCreate", model: "ios-app", known: Model.iosApp.definition.events.map(\.name))))
        #expect(report.finalState == "initializing")
    }
}
