import Foundation
import LifecycleKit
import LifecycleTestSupport
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

    /// The command line's `post --queue`: a process a report, so each drop makes a gap of its own
    /// (another process's may have been sent, and none grows); every one goes before the first
    /// item kept, where what it counts was.
    @Test func gapsOfSeveralProcessesAllGoBeforeTheFirstItemKept() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let configuration = LifecycleReporter.Configuration(directory: URL(fileURLWithPath: temporary.path), maxItems: 3, deliversAutomatically: false)
        try LifecycleReporter(client: server.client(), configuration: configuration).create(instance: "cli", model: "ios-app")
        for (minute, event) in (Self.launch + ["willResignActive"]).enumerated() {
            try Self.report(try LifecycleReporter(client: server.client(), configuration: configuration), "cli", [event], from: minute)
        }
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
        #expect(reporter.status.unreportedDrops == ["cli": 2])
        #expect(try await reporter.flush() == 5, "the create, two gaps, the two kept")
        #expect(try Self.words(server, "cli") == ["gap 1", "gap 1", "didBecomeActive", "willResignActive"])
    }

    /// An instance's last create stays past the bound even with nothing of its instance queued
    /// yet: an event queued later needs it. One that a later create of its instance stands for
    /// is dropped, and counted in no gap (it is no input).
    @Test func anInstancesLastCreateStaysAndOnlyASupersededOneIsDropped() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(),
            configuration: .init(directory: URL(fileURLWithPath: temporary.path), maxItems: 1, deliversAutomatically: false),
            onEvent: events.record
        )
        try reporter.create(instance: "first")
        try reporter.create(instance: "second")
        try reporter.create(instance: "second")
        #expect(reporter.status.pendingItems == 2, "first's create, and second's later one, past a bound of one")
        try reporter.report(event: "didFinishLaunching", instance: "first", occurredAt: ReporterTests.time(0))
        try reporter.report(event: "didFinishLaunching", instance: "second", occurredAt: ReporterTests.time(1))
        #expect(reporter.status.pendingItems == 3, "the two creates and second's event: first's event dropped")
        #expect(events.dropped == ["first": 1])
        #expect(try await reporter.flush() == 4, "two creates, first's gap after its create, second's event")
        #expect(try Self.words(server, "first") == ["gap 1"])
        #expect(try Self.words(server, "second") == ["didFinishLaunching"])
    }

    /// The bound's rule as a property, on the queue itself, over 300 seeded runs: three
    /// instances, each created first, then events, with bounds of 1 to 6 items and 1 to 8
    /// items' bytes, and batches of 1 to 3 taken and answered (or not) at random points,
    /// reports landing while one is in flight. Answered as the service would (an item or gap
    /// of an instance not created is lost), nothing is lost: every event is stored, in order,
    /// or counted by a gap stored before it.
    @Test func noItemIsLostUncountedWhateverTheBoundAndTheBatches() throws {
        for run in 0..<300 {
            var state = UInt64(run) &+ 1
            func next(_ n: Int) -> Int {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return Int(state >> 33) % n
            }
            // Items of 100 bytes: the byte bound binds as often as the item bound.
            let bound = ReportQueue.Bound(items: 1 + next(6), bytes: 100 * (1 + next(8)))
            var queue = ReportQueue(bound: bound, replaying: [], sizes: [])
            var reported: [String: [String]] = [:]
            var exists: Set<String> = []
            var stored: [String: [String]] = [:]
            var lost: [String] = []
            var inFlight: ReportQueue.Batch?

            func enqueue(_ instance: String, _ kind: QueuedItem.Kind, _ name: String?) {
                let item = QueuedItem(sequence: queue.nextSequence, key: UUID().uuidString, instance: instance, kind: kind, name: name, parameters: [:],
                                      model: nil, believedState: nil, ranHooks: nil, occurredAt: nil)
                let entries = queue.entries(queueing: item, size: 100, makeKey: { UUID().uuidString })
                for entry in entries { queue.apply(entry, size: 100) }
                queue.noteMergeable(entries)
                // Past the bound by kept creates only, one an instance (and what is in flight).
                let limit = min(bound.items, bound.bytes / 100) + 3 + (inFlight?.count ?? 0)
                #expect(queue.items.count <= limit, "run \(run): \(queue.items.count) items queued, bound \(bound)")
            }
            func answer(_ batch: ReportQueue.Batch) {
                for member in batch.members {
                    switch member {
                    case .gap(let gap) where exists.contains(gap.instance): stored[gap.instance, default: []].append("gap \(gap.dropped)")
                    case .gap(let gap): lost.append("\(gap.instance)'s gap")
                    case .item(let item) where item.kind == .create: exists.insert(item.instance)
                    case .item(let item) where exists.contains(item.instance): stored[item.instance, default: []].append(item.name ?? "?")
                    case .item(let item): lost.append(item.name ?? "?")
                    }
                }
                if let ack = queue.acknowledgement(of: batch, answered: batch.count) { queue.apply(ack, size: 0) }
            }

            for _ in 0..<24 {
                switch next(6) {
                case 0 where inFlight == nil: inFlight = queue.takeBatch(limit: 1 + next(3))
                case 1:
                    if let batch = inFlight { answer(batch) }
                    inFlight = nil
                case 2:
                    // Not answered: sent again later.
                    queue.release()
                    inFlight = nil
                default:
                    let instance = ["a", "b", "c"][next(3)]
                    if reported[instance] == nil {
                        reported[instance] = []
                        enqueue(instance, .create, nil)
                    } else {
                        let tag = "\(instance)\(reported[instance]!.count)"
                        reported[instance]!.append(tag)
                        enqueue(instance, next(4) == 0 ? .launch : .event, tag)
                    }
                }
            }
            if let batch = inFlight { answer(batch) }
            while let batch = queue.takeBatch(limit: 1 + next(3)) { answer(batch) }

            #expect(lost.isEmpty, "run \(run): lost \(lost)")
            for (instance, tags) in reported {
                let history = stored[instance] ?? []
                let kept = history.filter { !$0.hasPrefix("gap ") }
                let dropped = history.compactMap { $0.hasPrefix("gap ") ? Int($0.dropFirst(4)) : nil }.reduce(0, +)
                #expect(kept == tags.filter(kept.contains), "run \(run): \(instance) stored out of order: \(history)")
                #expect(kept.count + dropped == tags.count, "run \(run): \(instance) reported \(tags), stored \(history)")
                // Every event older than one stored is stored before it or counted by a gap before it.
                var before = 0
                for record in history {
                    if let count = record.hasPrefix("gap ") ? Int(record.dropFirst(4)) : nil {
                        before += count
                    } else {
                        #expect(tags.firstIndex(of: record)! <= before, "run \(run): \(record) with an uncounted loss before it: \(history)")
                        before += 1
                    }
                }
            }
        }
    }
}
