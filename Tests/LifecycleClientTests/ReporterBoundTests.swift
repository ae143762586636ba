import Foundation
import LifecycleKit
import TestSupport
import Testing
@testable import LifecycleClient

/// The bound keeps what the kept items need (issue 31, point 5): past `maxItems` the oldest
/// items are dropped, but never the `create` of an instance whose items remain, and its gap
/// reaches the service after the create and before the kept items.
@Suite struct ReporterBoundTests {
    typealias Events = ReporterTests.Events

    static let launch = ReporterTests.launch
    static let toggles = ["willResignActive", "didBecomeActive", "willResignActive", "didBecomeActive", "willResignActive", "didBecomeActive"]

    /// Queues `events` for `id` at minutes `from`, `from + 1`, …
    static func report(_ reporter: LifecycleReporter, _ id: String, _ events: [String], from minute: Int) throws {
        for (offset, event) in events.enumerated() {
            let parameters: [String: Value] = event == "willConnectToWindow" ? ["window": .string("main")] : [:]
            try reporter.report(event: event, parameters: parameters, instance: id, occurredAt: ReporterTests.time(minute + offset))
        }
    }

    /// What the history of `id` holds, one word a record: the event's name, `gap N`, or `relaunch`.
    static func words(_ server: ClientTestServer, _ id: String) throws -> [String] {
        try ReporterTests.history(server, id).map { record in
            switch record["kind"] as? String {
            case "gap": "gap \(record["dropped"] as? Int ?? -1)"
            case "event": record["event"] as? String ?? "?"
            case let kind: kind ?? "?"
            }
        }
    }

    @Test func anInstancesCreateOutlivesTheBoundAndItsGapFollowsIt() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(),
            configuration: .init(directory: URL(fileURLWithPath: temporary.path), maxItems: 5, deliversAutomatically: false),
            onEvent: events.record
        )
        // Offline: the create, a launch, toggles, a relaunch and a launch again; five kept.
        try reporter.create(instance: "outlived", model: "ios-app")
        try Self.report(reporter, "outlived", Self.launch + Self.toggles, from: 0)
        try reporter.reportRelaunch(instance: "outlived", occurredAt: ReporterTests.time(20))
        try Self.report(reporter, "outlived", Self.launch, from: 21)
        #expect(events.dropped == ["outlived": 9], "the launch and the toggles, never the create")
        #expect(reporter.status.pendingItems == 5, "the kept create counts: four more are kept beside it")
        #expect(reporter.status.unreportedDrops == ["outlived": 9])

        #expect(try await reporter.flush() == 6, "the create, the gap, the four kept")
        #expect(events.delivered.count == 5 && events.delivered.allSatisfy { $0.1 < 300 }, "\(events.delivered)")
        #expect(try Self.words(server, "outlived") == ["gap 9", "relaunch"] + Self.launch)
        let times = try ReporterTests.history(server, "outlived").dropFirst().map { $0["occurredAt"] as? String }
        #expect(times == (20...23).map { ReporterTests.time($0).description })
        #expect(try await server.client().instance("outlived").model == "ios-app")
    }

    /// Two instances interleaved, batches of two: each create is kept, each gap goes after its
    /// create and before its kept items, across batches and a reopened journal (whose drops are
    /// several entries around the kept creates).
    @Test func interleavedInstancesKeepTheirCreatesAcrossBatchesAndAReopen() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let configuration = LifecycleReporter.Configuration(
            directory: URL(fileURLWithPath: temporary.path), batchSize: 2, maxItems: 6, deliversAutomatically: false
        )
        let events = Events()
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration, onEvent: events.record)
            try reporter.create(instance: "left")
            try reporter.create(instance: "right")
            for (offset, event) in (Self.launch + Self.toggles).enumerated() {
                try Self.report(reporter, "left", [event], from: offset)
                try Self.report(reporter, "right", [event], from: offset)
            }
            #expect(reporter.status.pendingItems == 6)
        }
        #expect(events.dropped == ["left": 7, "right": 7])
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
        #expect(reporter.status.pendingItems == 6, "the journal replays to the same queue")
        #expect(reporter.status.unreportedDrops == ["left": 7, "right": 7])
        #expect(try await reporter.flush() == 8)
        for id in ["left", "right"] {
            #expect(try Self.words(server, id) == ["gap 7"] + Self.toggles.suffix(2))
        }
        #expect(try await reporter.flush() == 0)
    }

    /// A create with nothing of its instance after it is dropped like any item; a bound of one
    /// keeps the create its kept item needs, past the bound.
    @Test func aCreateIsKeptOnlyWhileItsInstanceHasItemsQueued() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(),
            configuration: .init(directory: URL(fileURLWithPath: temporary.path), maxItems: 1, deliversAutomatically: false),
            onEvent: events.record
        )
        try reporter.create(instance: "gone")
        try reporter.create(instance: "alone")
        #expect(events.dropped == ["gone": 1])
        try reporter.report(event: "didFinishLaunching", instance: "alone", occurredAt: ReporterTests.time(0))
        #expect(reporter.status.pendingItems == 2, "the create the event needs, past a bound of one")
        #expect(try await reporter.flush() == 3, "the gap of gone, alone's create and its event")
        #expect(try Self.words(server, "alone") == ["didFinishLaunching"])
        await #expect(throws: LifecycleClientError.self) { try await server.client().instance("gone") }
    }
}
