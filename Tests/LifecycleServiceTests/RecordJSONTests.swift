import Foundation
import LifecycleTestSupport
import Testing
import LifecycleKit
import LifecycleStore
import LifecycleHTTP
@testable import LifecycleService

@Suite("record JSON", .sqliteOnly("encodes records; opens no store"))
struct RecordJSONTests {
    /// Records of every shape: from real machines driven by seeded random inputs (the same on
    /// every run, so that every shape the test requires is there every time), plus hand-made
    /// ones with every optional member and awkward strings.
    static func records() -> [Record] {
        var records: [Record] = []
        var generator = SeededGenerator(state: 20_261_202)
        for model in [Model.iosApp, Model.androidActivity] {
            var machine = Machine(model: model)
            let d = model.definition
            for i in 0..<3000 {
                let input: Input
                switch Int.random(in: 0..<10, using: &generator) {
                case 0: input = i % 2 == 0 ? .relaunch : .gap(dropped: Int64(i) * 333_667 % 1_000_000_000 + 1)
                case 1, 2:
                    guard let action = d.actions.randomElement(using: &generator) else { continue }
                    input = .action(action.name, Dictionary(uniqueKeysWithValues: action.parameters.map { ($0.name, Value.string("v\(i) \"q\" \\ \n é")) }))
                default:
                    let event = d.events.randomElement(using: &generator)!
                    var parameters: [String: Value] = [:]
                    for p in event.parameters where p.isRequired || Bool.random(using: &generator) {
                        parameters[p.name] = p.type == .boolean ? .bool(Bool.random(using: &generator)) : .string("w\(i % 3)")
                    }
                    input = .event(event.name, parameters)
                }
                // Every kind of report: none, a belief, hooks (right, short, doubled, reordered), a device time.
                var trial = machine
                let hooks = (try? trial.apply(input, at: Date()))?.hooks ?? []
                let report = AppReport(
                    believedState: i % 3 == 0 ? d.states.randomElement(using: &generator)!.name : nil,
                    ranHooks: i % 4 == 0 ? [hooks, hooks.reversed(), hooks + hooks.prefix(1), Array(hooks.dropFirst())][i / 4 % 4] : nil
                )
                let occurredAt = i % 5 == 1 ? DeviceTime(milliseconds: 1_800_000_000_000 - Int64(i) * 7_919, offsetMinutes: [0, 60, -330, 840][i % 4]) : nil
                let time = Date(timeIntervalSince1970: 1_800_000_000 + Double(i) * 0.0137)
                if var record = try? machine.apply(input, reported: report, occurredAt: occurredAt, at: time) {
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
        #expect(Set(records.map(\.kind)).count == 4)
        #expect(records.contains { $0.kind == .gap && $0.dropped != nil && $0.occurredAt != nil })
        #expect(records.contains { $0.incompleteLaunch != nil } && records.contains { $0.deliveredAction != nil })
        #expect(records.contains { $0.instance == nil } && records.contains { $0.instance != nil })
        #expect(records.contains { $0.divergence?.state != nil && $0.divergence?.hooks != nil })
        #expect(records.contains { $0.divergence?.state == nil && $0.divergence?.hooks?.orderOnly == true })
        #expect(records.contains { $0.occurredAt != nil } && records.contains { $0.ranHooks != nil && $0.divergence == nil })
        for record in records {
            let direct = record.jsonBytes()
            let reference = try JSON.encode(record)
            // The Codable path writes a body, which ends with a newline; a record has none.
            #expect(direct + [JSON.newline] == reference, "\(String(decoding: reference, as: UTF8.self))")
            if direct + [JSON.newline] != reference { break }
            if record.kind == .gap {
                #expect(try JSONDecoder().decode(Record.self, from: JSONEncoder().encode(record)) == record, "a gap decodes as it was")
            }
        }
    }
}

@Suite("instance JSON", .sqliteOnly("encodes instances; opens no store"))
struct InstanceJSONTests {
    /// Instances of every shape: each state a machine passes through under seeded random events
    /// (buffered actions, windows, breadcrumbs and counters as they come), and hand-made ones with
    /// every optional member, every kind of parameter and awkward strings.
    static func instances() -> [StoredInstance] {
        var instances: [StoredInstance] = []
        var generator = SeededGenerator(state: 20_261_205)
        for model in [Model.iosApp, Model.androidActivity] {
            var machine = Machine(model: model)
            let d = model.definition
            for i in 0..<600 {
                let input: Input
                if i % 7 == 0, let action = d.actions.randomElement(using: &generator) {
                    input = .action(action.name, Dictionary(uniqueKeysWithValues: action.parameters.map { ($0.name, Value.string("v\(i) \"q\" \\ \n é")) }))
                } else {
                    let event = d.events.randomElement(using: &generator)!
                    var parameters: [String: Value] = [:]
                    for p in event.parameters where p.isRequired || Bool.random(using: &generator) {
                        parameters[p.name] = p.type == .boolean ? .bool(Bool.random(using: &generator)) : .string("w\(i % 3)")
                    }
                    input = .event(event.name, parameters)
                }
                _ = try? machine.apply(input, at: Date())
                let time = Date(timeIntervalSince1970: 1_800_000_000 + Double(i) * 0.0137)
                instances.append(StoredInstance(
                    id: "app-\(i)", model: model.name, createdAt: time, updatedAt: time.addingTimeInterval(Double(i)), state: machine.snapshot,
                    labels: i % 3 == 0 ? [:] : ["appVersion": "1.\(i)", "a\"b": "\u{1}é\n"]
                ))
            }
        }
        var state = InstanceState(
            state: "s\u{1}\"", version: 9, launchCount: 3,
            bufferedAction: PendingAction(name: "a\t\"", parameters: ["z": .number(0.5), "a": .integer(-3), "m": .bool(false), "n": .number(2), "s": .string("\\")]),
            window: "w\u{7f}é", breadcrumb: Breadcrumb(step: "ui-attached", isSceneConnected: true),
            counters: Counters(unexpected: 1, ignored: 2, incompleteLaunches: 3, divergences: 4, dropped: 5_000_000_000)
        )
        instances.append(StoredInstance(id: "i\u{1}\"é", model: "m", createdAt: Date(timeIntervalSince1970: -1.5), updatedAt: Date(timeIntervalSince1970: 0), state: state))
        state.bufferedAction = PendingAction(name: "p")
        instances.append(StoredInstance(id: "", model: "", createdAt: Date(timeIntervalSince1970: 1e9), updatedAt: Date(timeIntervalSince1970: 1e9), state: state, labels: ["": ""]))
        return instances
    }

    @Test("the direct serializer writes exactly what InstanceView's Codable path writes, and refuses what it refuses")
    func identical() throws {
        let instances = Self.instances()
        #expect(instances.contains { $0.state.bufferedAction != nil } && instances.contains { $0.state.bufferedAction == nil })
        #expect(instances.contains { $0.state.window != nil } && instances.contains { $0.state.window == nil })
        #expect(instances.contains { $0.state.breadcrumb.step != nil } && instances.contains { $0.state.breadcrumb.step == nil })
        #expect(instances.contains { $0.state.breadcrumb.isSceneConnected } && instances.contains { $0.state.counters.unexpected > 0 })
        for instance in instances {
            let direct = try instance.jsonBytes()
            let reference = try JSON.encode(InstanceView(instance))
            #expect(direct == reference, "\(String(decoding: reference, as: UTF8.self))")
            if direct != reference { break }
        }
        var unrenderable = instances[instances.count - 1]
        unrenderable.state.bufferedAction = PendingAction(name: "p", parameters: ["x": .number(.infinity)])
        #expect(throws: (any Error).self) { try JSON.encode(InstanceView(unrenderable)) }
        #expect(throws: (any Error).self) { try unrenderable.jsonBytes() }
    }
}

@Suite("records name their instance")
struct RecordInstanceTests {
    @Test("event, action, launch and 409 answers, and history, name the instance right after the sequence number")
    func answersAndHistory() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("my-iphone")
        let event = try c.event("my-iphone", #"{"event": "didFinishLaunching"}"#)
        #expect(event.text.hasPrefix(#"{"sequence":2,"instance":"my-iphone","version":1,"kind":"event","#), "\(event.text)")
        let action = try c.request("POST", "/v1/instances/my-iphone/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#)
        #expect(action.status == 200 && action.json["instance"] as? String == "my-iphone")
        let unexpected = try c.event("my-iphone", #"{"event": "didFinishLaunching"}"#)
        #expect(unexpected.status == 409)
        #expect((unexpected.json["record"] as? [String: Any])?["instance"] as? String == "my-iphone")
        let launch = try c.request("POST", "/v1/instances/my-iphone/relaunches")
        #expect(launch.status == 200 && launch.json["instance"] as? String == "my-iphone")
        let history = try c.fullHistory("my-iphone")
        #expect(history.count == 4 && history.allSatisfy { $0["instance"] as? String == "my-iphone" })
        #expect(history.map { $0["version"] as? Int } == [1, 2, 3, 4], "the creation record is not history")
    }

    @Test("creation and deletion records: sequence, instance, version, kind, model, state, time")
    func changes() throws {
        let instance = StoredInstance(
            id: "i\"d", model: "ios-app", createdAt: Date(timeIntervalSince1970: 1_800_000_000.5), updatedAt: Date(timeIntervalSince1970: 1_800_000_000.5),
            state: InstanceState(state: "background", version: 7)
        )
        let created = InstanceChange(sequence: 41, kind: .created, instance: instance, time: Date(timeIntervalSince1970: 1_800_000_000.5))
        #expect(String(decoding: created.jsonBytes(), as: UTF8.self)
            == #"{"sequence":41,"instance":"i\"d","version":7,"kind":"created","model":"ios-app","state":"background","time":"2027-01-15T08:00:00.500Z"}"#)
        let deleted = InstanceChange(sequence: 42, kind: .deleted, instance: instance, time: Date(timeIntervalSince1970: 1_800_000_001))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(deleted.jsonBytes())) as? [String: Any])
        #expect(json["kind"] as? String == "deleted" && json["instance"] as? String == "i\"d" && json["sequence"] as? Int == 42)
        #expect(json.keys.sorted() == ["instance", "kind", "model", "sequence", "state", "time", "version"])
    }
}
