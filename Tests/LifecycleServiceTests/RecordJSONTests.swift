import Foundation
import Testing
import LifecycleKit
import MicroHTTP
@testable import LifecycleService

@Suite("record JSON")
struct RecordJSONTests {
    /// Records of every shape: from real machines driven by random inputs, plus hand-made
    /// ones with every optional member and awkward strings.
    static func records() -> [Record] {
        var records: [Record] = []
        var generator = SystemRandomNumberGenerator()
        for model in [Model.iosApp, Model.androidActivity] {
            var machine = Machine(model: model)
            let d = model.definition
            for i in 0..<3000 {
                let input: Input
                switch Int.random(in: 0..<10, using: &generator) {
                case 0: input = .relaunch
                case 1, 2:
                    guard let action = d.actions.randomElement() else { continue }
                    input = .action(action.name, Dictionary(uniqueKeysWithValues: action.parameters.map { ($0.name, Value.string("v\(i) \"q\" \\ \n é")) }))
                default:
                    let event = d.events.randomElement()!
                    var parameters: [String: Value] = [:]
                    for p in event.parameters where p.isRequired || Bool.random() {
                        parameters[p.name] = p.type == .boolean ? .bool(Bool.random()) : .string("w\(i % 3)")
                    }
                    input = .event(event.name, parameters)
                }
                if var record = try? machine.apply(input, at: Date(timeIntervalSince1970: 1_800_000_000 + Double(i) * 0.0137)) {
                    record.sequence = Int64(i)
                    // Stored records carry their instance; records of no instance (a replay) do not.
                    record.instance = i % 5 == 0 ? nil : "app-\(i % 7)"
                    records.append(record)
                }
            }
        }
        records.append(Record(
            sequence: 1, instance: "i\u{1}\"é", version: 2, kind: .action, name: "a\u{1}\t\"", parameters: ["z": .number(0.5), "a": .integer(-3), "m": .bool(false), "n": .number(2)],
            from: "x", to: "y", outcome: .stayed, hooks: [], row: "r9", disposition: .buffered,
            replacedAction: PendingAction(name: "p", parameters: [:]), deliveredAction: PendingAction(name: "d", parameters: ["k": .string("v")]),
            clearedAction: PendingAction(name: "c"), incompleteLaunch: IncompleteLaunch(step: "ui-attached", isSceneConnected: true),
            windowChanged: false, time: Date(timeIntervalSince1970: -1.5)
        ))
        return records
    }

    @Test("the direct serializer writes exactly what the Codable path writes")
    func identical() throws {
        let records = Self.records()
        #expect(records.count > 4000)
        #expect(Set(records.map(\.kind)).count == 3)
        #expect(records.contains { $0.incompleteLaunch != nil } && records.contains { $0.deliveredAction != nil })
        #expect(records.contains { $0.instance == nil } && records.contains { $0.instance != nil })
        for record in records {
            let direct = record.jsonBytes()
            let reference = try JSON.encode(record)
            #expect(direct == reference, "\(String(decoding: reference, as: UTF8.self))")
            if direct != reference { break }
        }
    }
}
