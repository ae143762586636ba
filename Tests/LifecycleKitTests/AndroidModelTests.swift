import Foundation
import Testing
@testable import LifecycleKit

let androidTable: [(from: String, event: String, to: String)] = [
    ("initialized", "onCreate", "created"),
    ("created", "onStart", "started"),
    ("started", "onResume", "resumed"),
    ("resumed", "onPause", "started"),
    ("started", "onStop", "created"),
    ("created", "onDestroy", "destroyed"),
]

@Suite("android-activity model")
struct AndroidModelTests {
    @Test("every row, with its Activity hook")
    func rows() throws {
        for row in androidTable {
            var m = try machine(.androidActivity, after: androidPaths[row.from]!)
            let record = try m.apply(event: row.event, at: t0)
            #expect(record.outcome == .transitioned)
            #expect(record.to == row.to)
            #expect(record.hooks == ["Activity.\(row.event)"])
        }
    }

    @Test("every other pair is unexpected")
    func otherPairs() throws {
        let listed = Set(androidTable.map { "\($0.from)/\($0.event)" })
        var checked = 0
        for state in androidPaths.keys {
            for event in ["onCreate", "onStart", "onResume", "onPause", "onStop", "onDestroy"] where !listed.contains("\(state)/\(event)") {
                var m = try machine(.androidActivity, after: androidPaths[state]!)
                let record = try m.apply(event: event, at: t0)
                #expect(record.outcome == .unexpected, "\(state) + \(event)")
                #expect(m.stateName == state)
                checked += 1
            }
        }
        #expect(checked == 5 * 6 - 6)
    }

    @Test("the model lists Jetpack's states with kinds and has no actions")
    func shape() {
        let d = Model.androidActivity.definition
        #expect(d.states.map(\.name) == ["initialized", "created", "started", "resumed", "destroyed"])
        #expect(d.states.first?.kind == .initial && d.states.last?.kind == .terminal)
        #expect(d.actions.isEmpty)
    }
}
