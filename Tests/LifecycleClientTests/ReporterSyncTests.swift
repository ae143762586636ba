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
    /// and fails with EIO while `failing`; with `only`, just the syncs of files whose name starts
    /// so are held and counted (others go through).
    final class GatedSync: Sendable {
        private let only: String?

        init(only: String? = nil) { self.only = only }

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
                if let only = self.only, !Self.name(of: descriptor).hasPrefix(only) { return fsync(descriptor) }
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

        /// The name of the file `descriptor` has open (Linux's /proc).
        private static func name(of descriptor: Int32) -> String {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
            guard count > 0 else { return "" }
            return URL(fileURLWithPath: String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)).lastPathComponent
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
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("journal.new-\(getpid())"), withIntermediateDirectories: true)
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: folder, compactionThreshold: 100, deliversAutomatically: false)
        )
        for n in 1...10 { try reporter.report(event: "e\(n)", instance: "compact") }
        #expect(try await reporter.flush() == 10)
        #expect(await ReporterTests.soon(within: 10) { reporter.status.compactionError != nil })
        let error = try #require(reporter.status.compactionError)
        #expect(ReporterReachTests.isShortLine(error), "\(error)")
    }

    /// Issue 32: a compaction writes and syncs its new file outside the lock every report takes:
    /// a report made while that sync is held returns at once, and is in the compacted journal
    /// (framed anew after the live state) once the compaction puts it in place.
    @Test func reportReturnsWhileACompactionSyncsItsNewFile() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "compacting")
        let folder = TemporaryDirectory()
        let sync = GatedSync(only: "journal.new")
        var configuration = Self.configuration(folder, sync.io)
        configuration.compactionThreshold = 100
        let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
        let events = (1...13).map { $0 % 2 == 1 ? "didBecomeActive" : "willResignActive" }
        for event in events.prefix(10) { try reporter.report(event: event, instance: "compacting") }
        #expect(try await reporter.flush() == 10)
        // The acks made the compaction due: its new file's sync is held at the gate.
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 1 })
        let journal = URL(fileURLWithPath: folder.path).appendingPathComponent("journal").path
        let before = try FileManager.default.attributesOfItem(atPath: journal)[.systemFileNumber] as? Int
        let start = ContinuousClock.now
        for event in events.suffix(3) { try reporter.report(event: event, instance: "compacting") }
        #expect(ContinuousClock.now - start < .seconds(2), "report waited for the compaction's sync")
        sync.open()
        #expect(await ReporterTests.soon(within: 10) { sync.finished == 1 && !Self.hasReplacement(folder) && reporter.status.compactionError == nil })
        #expect(try FileManager.default.attributesOfItem(atPath: journal)[.systemFileNumber] as? Int != before, "the compacted file is in place")
        // Read back by another reporter, the compacted file holds the three, in order, once each.
        let reopened = try LifecycleReporter(client: server.client(), configuration: .init(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false))
        #expect(reopened.status.pendingItems == 3)
        #expect(try await reopened.flush() == 3)
        let history = try await server.client().historyPage(of: "compacting", limit: 100)
        #expect(history.items.map(\.name) == events)
    }

    /// Issue 32, two processes on one folder (an app and its extension): what the other wrote
    /// while the compaction's new file was being synced is carried into it, and synced before
    /// the rename, since that process's reports returned durable.
    @Test func whatAnotherProcessWroteDuringACompactionIsCarriedAndSyncedFirst() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "shared")
        let folder = TemporaryDirectory()
        let sync = GatedSync(only: "journal.new")
        var configuration = Self.configuration(folder, sync.io)
        configuration.compactionThreshold = 100
        let app = try LifecycleReporter(client: server.client(), configuration: configuration)
        let extensionProcess = try LifecycleReporter(client: server.client(), configuration: Self.configuration(folder, .system))
        for _ in 1...5 {
            try app.report(event: "didBecomeActive", instance: "shared")
            try app.report(event: "willResignActive", instance: "shared")
        }
        #expect(try await app.flush() == 10)
        #expect(await ReporterTests.soon(within: 10) { sync.calls == 1 }, "the compaction's new file is being synced")
        try extensionProcess.report(event: "didBecomeActive", instance: "shared")
        try extensionProcess.report(event: "willResignActive", instance: "shared")
        sync.open()
        #expect(await ReporterTests.soon(within: 10) { !Self.hasReplacement(folder) && app.status.compactionError == nil && sync.finished == 2 })
        #expect(sync.calls == 2, "the new file is synced again before the rename, with the other process's entries")
        let reopened = try LifecycleReporter(client: server.client(), configuration: Self.configuration(folder, .system))
        #expect(reopened.status.pendingItems == 2)
        #expect(try await reopened.flush() == 2)
        #expect(try await server.client().instance("shared").version == 12)
    }

    static func hasReplacement(_ folder: TemporaryDirectory) -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).contains { $0.hasPrefix("journal.new") }
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
