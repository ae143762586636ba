import Foundation
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// The offline reporter against a real service on loopback: outages, the bound, torn journal
/// tails, `Retry-After`, and a resend after a kill.
@Suite struct ReporterTests {
    /// The records of `id`, oldest first, as JSON objects.
    static func history(_ server: ClientTestServer, _ id: String) throws -> [[String: Any]] {
        let response = try WireClient(port: server.port).request("GET", "/v1/instances/\(id)/history?limit=1000")
        #expect(response.status == 200)
        let page = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return page?["items"] as? [[String: Any]] ?? []
    }

    /// A device time `minute` minutes into a fixed day, in UTC+02:00.
    static func time(_ minute: Int) -> DeviceTime { DeviceTime(milliseconds: 1_796_000_000_000 + Int64(minute) * 60_000, offsetMinutes: 120) }

    /// Whether `condition` holds within `seconds`, asked every 10 ms; async, so that waiting
    /// holds no thread of the pool the reporter's sender runs on.
    static func soon(within seconds: Double = 10, _ condition: () throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            do { try await Task.sleep(for: .milliseconds(10)) } catch { break }
        }
        return try condition()
    }

    static let launch = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"]

    /// What a reporter told the app.
    final class Events: Sendable {
        let all = LockedValue<[LifecycleReporter.Event]>([])
        /// When the first `.retrying` was handed over: a wait is measured from it, not from when
        /// the test saw it (the whole client suite can keep a test's task waiting for a thread).
        private let firstRetry = LockedValue<ContinuousClock.Instant?>(nil)
        var firstRetryAt: ContinuousClock.Instant? { firstRetry.withLock { $0 } }
        func record(_ event: LifecycleReporter.Event) {
            if case .retrying = event { firstRetry.withLock { $0 = $0 ?? .now } }
            all.withLock { $0.append(event) }
        }
        var damagedTail: [Int] { all.withLock { $0.compactMap { if case .damagedTail(let bytes) = $0 { bytes } else { nil } } } }
        var damage: [LifecycleReporter.Damage] { all.withLock { $0.compactMap { if case .damaged(let damage) = $0 { damage } else { nil } } } }
        var dropped: [String: Int] {
            all.withLock { $0.reduce(into: [:]) { if case .dropped(let instance, let count) = $1 { $0[instance, default: 0] += count } } }
        }
        var delivered: [(QueuedItem.Kind, Int)] {
            all.withLock { $0.compactMap { if case .delivered(let item, let result) = $0 { (item.kind, result.status) } else { nil } } }
        }
        var retries: [TimeInterval] { all.withLock { $0.compactMap { if case .retrying(_, let delay) = $0 { delay } else { nil } } } }
    }

    func report(_ reporter: LifecycleReporter, _ id: String, events: [String], from minute: Int = 0) throws {
        for (offset, event) in events.enumerated() {
            let parameters: [String: Value] = event == "willConnectToWindow" ? ["window": .string("main")] : [:]
            try reporter.report(event: event, parameters: parameters, instance: id, occurredAt: Self.time(minute + offset))
        }
    }

    @Test func itemsQueuedWhileTheServiceIsDownAreStoredOnceInOrderWithTheirTimes() async throws {
        let server = try ClientTestServer()
        server.stop()
        let folder = TemporaryDirectory()
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(timeout: 2),
            configuration: .init(directory: URL(fileURLWithPath: folder.path), batchSize: 2, initialBackoff: 0.02, maxBackoff: 0.1),
            onEvent: events.record
        )
        try reporter.create(instance: "down-up")
        let sequence = Self.launch + ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]
        try report(reporter, "down-up", events: sequence)
        #expect(await Self.soon(within: 30) { events.retries.count >= 2 }, "the sender retries while the service is down")
        #expect(reporter.status.pendingItems == sequence.count + 1)

        try server.start()
        reporter.retryNow()
        #expect(await Self.soon(within: 10) { reporter.status.pendingItems == 0 })
        let records = try Self.history(server, "down-up")
        #expect(records.map { $0["event"] as? String } == sequence)
        #expect(records.map { $0["occurredAt"] as? String } == sequence.indices.map { Self.time($0).description })
        #expect(records.map { $0["version"] as? Int } == Array(1...sequence.count))

        // A reporter opened again on the folder sends nothing again.
        let again = try LifecycleReporter(client: server.client(), configuration: .init(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false))
        #expect(again.status.pendingItems == 0)
        #expect(try await again.flush() == 0)
        #expect(try Self.history(server, "down-up").count == sequence.count)
    }

    /// A kill after a batch was sent and before its answer was journaled: the next reporter on
    /// the folder sends it again with the same keys, and the service stores each item once.
    @Test func aBatchSentButNotAcknowledgedIsResentWithItsKeysAndStoredOnce() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            try reporter.create(instance: "resent")
            try report(reporter, "resent", events: Self.launch)
        }
        // What the killed process had sent: the journal's items, keys and all.
        let opened = Journal.parse(try Data(contentsOf: folder.appendingPathComponent("journal")))
        let sent = opened.entries.compactMap(\.item)
        #expect(sent.count == 4)
        #expect(Set(sent.map(\.key)).count == 4, "every item has a key of its own")
        _ = try await server.client().batch(sent.map(\.batchItem))

        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
        #expect(try await reporter.flush() == 4)
        let records = try Self.history(server, "resent")
        #expect(records.map { $0["event"] as? String } == Self.launch)
        #expect(try await reporter.flush() == 0)
    }

    @Test func pastTheBoundTheOldestAreDroppedAndTheGapIsInHistory() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: folder, maxItems: 3, deliversAutomatically: false), onEvent: events.record
        )
        try reporter.create(instance: "bounded")
        try report(reporter, "bounded", events: ["didFinishLaunching"])
        #expect(try await reporter.flush() == 2)
        // In foreground, each of these stays there: five queued, three kept.
        let toggles = ["willConnectToWindow", "didBecomeActive", "willResignActive", "didBecomeActive", "willResignActive"]
        try report(reporter, "bounded", events: toggles, from: 10)
        #expect(events.dropped == ["bounded": 2])
        #expect(reporter.status.pendingItems == 3)
        #expect(reporter.status.unreportedDrops == ["bounded": 2])
        #expect(try await reporter.flush() == 4, "one gap, then the three kept")
        #expect(reporter.status.unreportedDrops == [:])

        let records = try Self.history(server, "bounded")
        #expect(records.map { $0["kind"] as? String } == ["event", "gap", "event", "event", "event"])
        #expect(records[1]["dropped"] as? Int == 2)
        #expect(records.suffix(3).map { $0["occurredAt"] as? String } == (12...14).map { Self.time($0).description })
        let instance = try await server.client().instance("bounded")
        #expect(instance.version == 5)
    }

    @Test func aTornJournalTailIsCutReportedAndTheRestDelivered() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            try reporter.create(instance: "torn")
            try report(reporter, "torn", events: Self.launch)
        }
        // A write cut short by a kill: a frame header promising 200 bytes, and 10 of them.
        let journal = try FileHandle(forWritingTo: folder.appendingPathComponent("journal"))
        try journal.seekToEnd()
        try journal.write(contentsOf: [0, 0, 0, 200, 1, 2, 3, 4] + Array(#"{"t":"item"#.utf8))
        try journal.close()
        let before = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("journal").path)[.size] as? Int

        do {
            let events = Events()
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration, onEvent: events.record)
            #expect(events.damagedTail == [18])
            #expect(reporter.status.damagedTailBytes == 18)
            let after = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("journal").path)[.size] as? Int
            #expect(after == before.map { $0 - 18 })
            try report(reporter, "torn", events: ["willResignActive"], from: 3)
        }
        // What was queued after the cut is whole when the journal opens again.
        let events = Events()
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration, onEvent: events.record)
        #expect(events.damagedTail == [])
        #expect(try await reporter.flush() == 5)
        #expect(try Self.history(server, "torn").map { $0["event"] as? String } == Self.launch + ["willResignActive"])
    }

    @Test func a429sRetryAfterIsHonouredEvenByRetryNow() async throws {
        // One request each 20 s: the event's batch is refused however slowly the sender follows
        // the create's (in the whole client suite it took 6 s: at 1 a second, a token was back).
        let server = try ClientTestServer { $0.rateLimit = 0.05; $0.rateBurst = 1 }
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: folder, batchSize: 1, initialBackoff: 0.01, maxBackoff: 0.01),
            onEvent: events.record
        )
        try reporter.create(instance: "limited")
        try report(reporter, "limited", events: ["didFinishLaunching"])
        #expect(await Self.soon(within: 30) { !events.retries.isEmpty })
        let refused = try #require(events.firstRetryAt)
        #expect(events.retries.first.map { $0 >= 1 } == true, "the wait is the Retry-After, not the 10 ms backoff")
        reporter.retryNow()
        #expect(await Self.soon(within: 60) { reporter.status.pendingItems == 0 })
        #expect(ContinuousClock.now - refused >= .milliseconds(900))
        // Read from the reporter: the service's history is rate-limited too.
        #expect(events.delivered.map(\.0) == [.create, .event])
        #expect(events.delivered.map(\.1) == [201, 200])
    }
}
