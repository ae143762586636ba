import Foundation
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// A full disk when a batch's answer must be journaled (issue 31, point 6), on a real tmpfs:
/// the sender backs off, `flush` stops at once naming the disk, and once there is room every
/// item is stored exactly once, in order.
@Suite(.serialized) struct ReporterFullDiskTests {
    typealias Events = ReporterTests.Events

    static let events = ReporterTests.launch + ["willResignActive", "didBecomeActive", "willResignActive"]

    /// Queues `create` and `events` for `id` so that the journal ends on a page boundary: tmpfs
    /// gives a file its space a page at a time, and an `ack` that fits the last page's slack
    /// would be written on a full disk. The events carry hooks; the last one's pad its entry,
    /// sized by the growth of the one before.
    static func queueToAPageEnd(_ reporter: LifecycleReporter, _ id: String, journal: String) throws {
        try reporter.create(instance: id)
        var growth = 0
        for (index, event) in events.enumerated() {
            let before = try SmallDisk.size(of: journal)
            var hooks = ["p"]
            if index == events.count - 1 {
                // The entry before, but for the name's length and the hooks'.
                let plain = growth + event.utf8.count - events[index - 1].utf8.count
                hooks = SmallDisk.hooks(endingAPage: before + plain)
            }
            let parameters: [String: Value] = event == "willConnectToWindow" ? ["window": .string("main")] : [:]
            try reporter.report(event: event, parameters: parameters, instance: id, ranHooks: hooks, occurredAt: ReporterTests.time(index))
            growth = try SmallDisk.size(of: journal) - before
        }
    }

    /// Attempts at delivery so far: each one whose answer could not be journaled is told as
    /// `.retrying`, and none of its items as delivered.
    static func attempts(_ events: Events) -> Int {
        events.retries.count
    }

    @Test func flushStopsAtOnceNamingTheDiskAndDeliversOnceThereIsRoom() async throws {
        let server = try ClientTestServer()
        let disk = try SmallDisk(kilobytes: 256)
        let folder = disk.path + "/queue"
        let events = Events()
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: URL(fileURLWithPath: folder), deliversAutomatically: false), onEvent: events.record
        )
        try Self.queueToAPageEnd(reporter, "flushed", journal: folder + "/journal")
        try #require(try SmallDisk.size(of: folder + "/journal") % SmallDisk.pageSize == 0)
        try disk.fill()

        let finished = LockedValue(false)
        let flushing = Task { () -> (any Error)? in
            defer { finished.withLock { $0 = true } }
            do {
                try await reporter.flush()
                return nil
            } catch {
                return error
            }
        }
        // Before the fix it sent the batch again at once, for ever: end it after a few.
        _ = await ReporterTests.soon(within: 20) { finished.withLock { $0 } || Self.attempts(events) > 10 }
        flushing.cancel()
        let error = await flushing.value
        #expect(Self.attempts(events) == 1, "one batch, then the flush stops")
        let reason = error.map { String(describing: $0) } ?? "none"
        #expect(reason.contains("No space left on device") && reason.contains(folder), "the disk named: \(reason)")
        #expect(reporter.status.pendingItems == Self.events.count + 1, "nothing answered is durable: all kept")
        #expect(events.delivered.isEmpty, "an item kept is not told as delivered")

        try disk.free()
        #expect(try await reporter.flush() == Self.events.count + 1)
        #expect(events.delivered.count == Self.events.count + 1, "each told once, when its answer is journaled")
        #expect(try ReporterTests.history(server, "flushed").map { $0["event"] as? String } == Self.events, "each stored once, in order")
        #expect(reporter.status.pendingItems == 0)
        withExtendedLifetime(disk) {}  // mounted to the end
    }

    @Test func theSenderBacksOffNamingTheDiskAndDeliversOnceThereIsRoom() async throws {
        let server = try ClientTestServer()
        let disk = try SmallDisk(kilobytes: 256)
        let folder = disk.path + "/queue"
        let configuration = LifecycleReporter.Configuration(directory: URL(fileURLWithPath: folder), deliversAutomatically: false)
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            try Self.queueToAPageEnd(reporter, "sent", journal: folder + "/journal")
        }
        try #require(try SmallDisk.size(of: folder + "/journal") % SmallDisk.pageSize == 0)
        try disk.fill()

        var automatic = configuration
        automatic.deliversAutomatically = true
        automatic.initialBackoff = 0.5
        let events = Events()
        let reporter = try LifecycleReporter(client: server.client(), configuration: automatic, onEvent: events.record)
        #expect(await ReporterTests.soon(within: 20) { !events.retries.isEmpty }, "the failure is told")
        let reasons = events.all.withLock { $0.compactMap { if case .retrying(let error, _) = $0 { error } else { nil } } }
        #expect(reasons.first.map { $0.contains("No space left on device") && $0.contains(folder) } == true, "the disk named: \(reasons)")
        // An upper bound after a while: a slow machine makes fewer attempts, never more. A
        // resend at once, without a backoff, makes hundreds a second.
        try await Task.sleep(for: .seconds(1))
        #expect(Self.attempts(events) <= 6, "backed off: \(Self.attempts(events)) batches in about a second")
        #expect(events.delivered.isEmpty, "an item kept is not told as delivered")

        try disk.free()
        reporter.retryNow()
        #expect(await ReporterTests.soon(within: 20) { reporter.status.pendingItems == 0 })
        let sent = try ReporterTests.history(server, "sent").map { $0["event"] as? String }
        #expect(sent == Self.events, "each stored once, in order")
        #expect(events.delivered.count == Self.events.count + 1, "each told once, when its answer is journaled")
        withExtendedLifetime(disk) {}  // mounted to the end
    }
}
