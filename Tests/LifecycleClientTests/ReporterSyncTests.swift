import Foundation
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

#if canImport(Glibc)
import Glibc
#endif

/// `report` writes on the caller's thread and returns; the journal is synced off it, in groups
/// (Journal's invariant 2).
@Suite struct ReporterSyncTests {
    /// A sync that waits for a gate the test opens (a slow disk, held still), counting calls,
    /// and fails with EIO while `failing`.
    final class GatedSync: Sendable {
        private struct State {
            var open = false
            var failing = false
            var calls = 0
            var finished = 0
        }

        private let state = LockedValue(State())

        var calls: Int { state.withLock { $0.calls } }
        /// Syncs that returned.
        var finished: Int { state.withLock { $0.finished } }
        func open() { state.withLock { $0.open = true } }
        func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

        var io: Journal.IO {
            var io = Journal.IO.system
            io.sync = { descriptor, _ in
                let failing = self.state.withLock { (s: inout State) -> Bool in
                    s.calls += 1
                    return s.failing
                }
                // Held still until opened; a deadline, so that a report blocked here (the
                // synchronous path) shows as slow rather than hanging the run.
                let deadline = ContinuousClock.now + .seconds(5)
                while !self.state.withLock({ $0.open }), ContinuousClock.now < deadline { usleep(1000) }
                defer { self.state.withLock { $0.finished += 1 } }
                if failing {
                    errno = EIO
                    return -1
                }
                return fsync(descriptor)
            }
            return io
        }
    }

    static func configuration(_ folder: TemporaryDirectory, _ io: Journal.IO) -> LifecycleReporter.Configuration {
        var configuration = LifecycleReporter.Configuration(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false)
        configuration.journalIO = io
        return configuration
    }

    static let unused = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:9")!))

    @Test func reportReturnsWithoutWaitingForTheSyncAndOneSyncCoversWhatWasWrittenMeanwhile() async throws {
        let folder = TemporaryDirectory()
        let sync = GatedSync()
        let reporter = try LifecycleReporter(client: Self.unused, configuration: Self.configuration(folder, sync.io))
        let start = ContinuousClock.now
        try reporter.create(instance: "sync")
        #expect(ContinuousClock.now - start < .seconds(2), "report waited for a sync")
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 1 }, "a group sync follows the write")
        // That sync is held at the gate: every report returns regardless.
        let held = ContinuousClock.now
        for n in 0..<20 { try reporter.report(event: "e\(n)", instance: "sync") }
        #expect(ContinuousClock.now - held < .seconds(2), "report waited for a sync")
        sync.open()
        // One more sync covers all 20 written while the first was held.
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 2 })
        #expect(sync.calls == 2 && reporter.status.pendingItems == 21)

        let reopened = try LifecycleReporter(client: Self.unused, configuration: Self.configuration(folder, .system))
        #expect(reopened.status.pendingItems == 21)
    }

    /// A command line's process ends after its flush: the flush syncs what was written itself,
    /// not behind a group sync that may not run before the exit.
    @Test func flushSyncsWhatWasWrittenBeforeItSends() async throws {
        let folder = TemporaryDirectory()
        let sync = GatedSync()
        let reporter = try LifecycleReporter(client: Self.unused, configuration: Self.configuration(folder, sync.io))
        try reporter.create(instance: "flush")
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 1 })
        // Written while the group sync is held: the next group sync waits behind it.
        try reporter.report(event: "didFinishLaunching", instance: "flush")
        let flush = Task { try await reporter.flush() }
        #expect(await ReporterTests.soon(within: 2) { sync.calls == 2 }, "flush synced on its own thread")
        sync.open()
        // Nothing answers at port 9: the flush ends unreachable, its items kept.
        await #expect(throws: LifecycleClientError.self) { try await flush.value }
        #expect(reporter.status.pendingItems == 2)
    }

    /// Review point 11: a group sync that took what was written before `flush` is still running:
    /// the flush waits for it rather than sending what is not yet durable.
    @Test func flushWaitsForAGroupSyncUnderWay() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "behind")
        let folder = TemporaryDirectory()
        let sync = GatedSync()
        let sentBeforeSynced = LockedValue(false)
        let reporter = try LifecycleReporter(client: server.client(), configuration: Self.configuration(folder, sync.io)) { event in
            if case .delivered = event, sync.finished == 0 { sentBeforeSynced.withLock { $0 = true } }
        }
        try reporter.report(event: "didBecomeActive", instance: "behind")
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 1 }, "the group sync took the write")
        let flush = Task { try await reporter.flush() }
        // Time for a flush that does not wait to send; the gate's opening lets one that waits go on.
        try await Task.sleep(for: .milliseconds(500))
        sync.open()
        #expect(try await flush.value == 1)
        #expect(!sentBeforeSynced.withLock { $0 }, "the flush sent before the sync finished")
    }

    /// Review point 11: a failed compaction is said in one line of at most 120 characters, even
    /// when the folder's path alone is longer.
    @Test func aFailedCompactionIsSaidInOneShortLine() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "compact")
        let root = TemporaryDirectory()
        let folder = URL(fileURLWithPath: root.path).appendingPathComponent(String(repeating: "deep", count: 40))
        // The compaction's new file cannot be made where a folder stands.
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("journal.new"), withIntermediateDirectories: true)
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: folder, compactionThreshold: 100, deliversAutomatically: false)
        )
        for n in 1...10 { try reporter.report(event: "e\(n)", instance: "compact") }
        #expect(try await reporter.flush() == 10)
        #expect(await ReporterTests.soon(within: 10) { reporter.status.compactionError != nil })
        let error = try #require(reporter.status.compactionError)
        #expect(ReporterReachTests.isShortLine(error), "\(error)")
    }

    /// The sender syncs a batch's ack before it sends again (invariant 4), but outside the lock
    /// every report takes: a report made meanwhile does not wait for that disk sync.
    @Test func reportReturnsWhileTheSendersAckIsBeingSynced() async throws {
        let server = try ClientTestServer()
        let folder = TemporaryDirectory()
        let sync = GatedSync()
        var configuration = Self.configuration(folder, sync.io)
        configuration.deliversAutomatically = true
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
        try reporter.create(instance: "acked")
        // Delivered, then two syncs held at the gate: the create's group sync and the ack's.
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 2 })
        _ = try await server.client().instance("acked")
        let start = ContinuousClock.now
        try reporter.report(event: "didFinishLaunching", instance: "acked")
        #expect(ContinuousClock.now - start < .seconds(2), "report waited for the ack's sync")
        sync.open()
        // Once the ack is synced, the sender goes on and delivers the event.
        #expect(await ReporterTests.soon(within: 10) { reporter.status.pendingItems == 0 })
        #expect(try await server.client().instance("acked").version == 1)
    }

    @Test func afterAFailedGroupSyncTheNextReportSyncsAndThrowsIfThatFailsToo() async throws {
        let folder = TemporaryDirectory()
        let sync = GatedSync()
        sync.open()
        sync.fail(true)
        let reporter = try LifecycleReporter(client: Self.unused, configuration: Self.configuration(folder, sync.io))
        try reporter.create(instance: "eio")
        #expect(await ReporterTests.soon(within: 10) { reporter.syncFailure != nil })
        let error = #expect(throws: LifecycleReporter.ReportError.self) { try reporter.report(event: "e1", instance: "eio") }
        #expect(error?.description.contains("Input/output error") == true)
        // Its cut back could not be synced either: the journal refuses writes until opened again.
        sync.fail(false)
        #expect(throws: LifecycleReporter.ReportError.self) { try reporter.report(event: "e2", instance: "eio") }
        let reopened = try LifecycleReporter(client: Self.unused, configuration: Self.configuration(folder, .system))
        #expect(reopened.status.pendingItems == 1, "the create stays; e1, cut back, was never acknowledged")
    }
}
