import Foundation
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// What the reporter says when it cannot reach the service or its folder: one short line each,
/// and a folder that cannot be opened yet holds reports until it can.
@Suite struct ReporterReachTests {
    final class Events: Sendable {
        let all = LockedValue<[LifecycleReporter.Event]>([])
        func record(_ event: LifecycleReporter.Event) { all.withLock { $0.append(event) } }
        var retrying: [String] { all.withLock { $0.compactMap { if case .retrying(let error, _) = $0 { error } else { nil } } } }
        var unavailable: [String] { all.withLock { $0.compactMap { if case .journalUnavailable(let reason) = $0 { reason } else { nil } } } }
        var caughtUp: [Int] { all.withLock { $0.compactMap { if case .journalCaughtUp(let items) = $0 { items } else { nil } } } }
    }

    static func isShortLine(_ text: String) -> Bool { text.count <= 120 && !text.contains(where: \.isNewline) }

    @Test func theLongestWaitIs30SecondsByDefault() {
        #expect(LifecycleReporter.Configuration(directory: URL(fileURLWithPath: "/tmp")).maxBackoff == 30)
    }

    @Test(arguments: [false, true])
    func anUnreachableServiceIsNamedInOneShortLine(unresolvable: Bool) async throws {
        let refused = try ClientTestServer()
        refused.stop()
        let url = unresolvable ? URL(string: "http://lifecycled.invalid:8080")! : refused.url
        let target = unresolvable ? "lifecycled.invalid:8080" : "127.0.0.1:\(refused.port)"
        let client = LifecycleClient(configuration: .init(server: url, timeout: 5))

        let error = await #expect(throws: LifecycleClientError.self) { _ = try await client.instance("x") }
        let description = error?.description ?? ""
        #expect(Self.isShortLine(description) && description.contains(target), "\(description)")
        if !unresolvable { #expect(description.contains("cannot connect to \(target): connection refused"), "\(description)") }

        let folder = TemporaryDirectory()
        let events = Events()
        let reporter = try LifecycleReporter(
            client: client, configuration: .init(directory: URL(fileURLWithPath: folder.path), initialBackoff: 0.01, maxBackoff: 0.05),
            onEvent: events.record)
        try reporter.create(instance: "x")
        #expect(await ReporterTests.soon(within: 20) { !events.retrying.isEmpty })
        for reason in events.retrying { #expect(Self.isShortLine(reason) && reason.contains(target), "\(reason)") }
    }

    @Test func aLongReasonKeepsItsStartAndEnd() {
        let long = "cannot write the queue's journal in /" + String(repeating: "x/", count: 100) + "queue: No space left on device (ENOSPC)"
        let line = long.oneLine()
        #expect(line.count == 120 && line.hasPrefix("cannot write") && line.hasSuffix("(ENOSPC)"))
        #expect("a\nb".oneLine() == "a b")
    }

    /// The queue folder is moved away and a regular file put at its path: opening fails as an
    /// unreadable folder would (tests run as root, where permissions do not stop it).
    @Test func aFolderThatCannotBeOpenedHoldsReportsAndCatchesUpInOrder() async throws {
        let server = try ClientTestServer()
        let root = TemporaryDirectory()
        let folder = URL(fileURLWithPath: root.path).appendingPathComponent("queue")
        let aside = URL(fileURLWithPath: root.path).appendingPathComponent("aside")
        let client = server.client()
        // Queued earlier, never delivered: in the journal before the held reports.
        do {
            let earlier = try LifecycleReporter(client: client, configuration: .init(directory: folder, deliversAutomatically: false))
            try earlier.create(instance: "held")
            try earlier.report(event: "didFinishLaunching", instance: "held")
        }
        try FileManager.default.moveItem(at: folder, to: aside)
        #expect(FileManager.default.createFile(atPath: folder.path, contents: Data("not a folder".utf8)))

        let events = Events()
        let reporter = try LifecycleReporter(
            client: client, configuration: .init(directory: folder, initialBackoff: 0.01, maxBackoff: 0.05), onEvent: events.record)
        #expect(events.unavailable.count == 1)
        #expect(events.unavailable.allSatisfy(Self.isShortLine))
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("main")], instance: "held")
        try reporter.report(event: "didBecomeActive", instance: "held")
        #expect(reporter.status.heldItems == 2)
        #expect(reporter.status.journalUnavailable != nil)
        #expect(events.unavailable.count == 1, "said once, not on every report")
        try reporter.report(event: "willResignActive", instance: "held")

        try FileManager.default.removeItem(at: folder)
        try FileManager.default.moveItem(at: aside, to: folder)
        reporter.retryNow()
        #expect(events.caughtUp == [3])
        #expect(reporter.status.heldItems == 0 && reporter.status.journalUnavailable == nil)
        #expect(await ReporterTests.soon(within: 10) { reporter.status.pendingItems == 0 })
        let records = try ReporterTests.history(server, "held")
        #expect(records.map { $0["event"] as? String } == ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive"])
        #expect(records.compactMap { $0["outcome"] as? String }.allSatisfy { $0 != "unexpected" })
    }

    @Test func reportsHeldInMemoryStayWithinTheBound() throws {
        let root = TemporaryDirectory()
        let folder = URL(fileURLWithPath: root.path).appendingPathComponent("queue")
        #expect(FileManager.default.createFile(atPath: folder.path, contents: Data()))
        let reporter = try LifecycleReporter(client: ReporterSyncTests.unused, configuration: .init(directory: folder, maxItems: 2, deliversAutomatically: false))
        try reporter.create(instance: "bound")
        try reporter.report(event: "didFinishLaunching", instance: "bound")
        let error = #expect(throws: LifecycleReporter.ReportError.self) { try reporter.report(event: "didBecomeActive", instance: "bound") }
        #expect(error.map { Self.isShortLine($0.description) } == true)
        #expect(reporter.status.heldItems == 2)
    }

    /// Review point 6: once the journal opens, a report is journaled or refused: held in memory
    /// behind a catch-up that failed (a full disk), it would be lost on a kill after success.
    @Test func withTheJournalOpenAndItsCatchUpFailingAReportThrows() throws {
        let root = TemporaryDirectory()
        let folder = URL(fileURLWithPath: root.path).appendingPathComponent("queue")
        #expect(FileManager.default.createFile(atPath: folder.path, contents: Data()))
        let disk = ReporterWriteFailureTests.FullDisk { _, _ in true }
        var configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        configuration.journalIO = disk.io
        let reporter = try LifecycleReporter(client: ReporterSyncTests.unused, configuration: configuration)
        try reporter.create(instance: "full")
        try reporter.report(event: "didFinishLaunching", instance: "full")
        #expect(reporter.status.heldItems == 2)

        try FileManager.default.removeItem(at: folder)
        let error = #expect(throws: LifecycleReporter.ReportError.self) { try reporter.report(event: "didBecomeActive", instance: "full") }
        #expect(error?.description.contains("No space left on device") == true)
        #expect(reporter.status.heldItems == 2 && reporter.status.pendingItems == 0, "the refused report is neither held nor queued")
        #expect(reporter.status.journalUnavailable != nil)
    }
}
