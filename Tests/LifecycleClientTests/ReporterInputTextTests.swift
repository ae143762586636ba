import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// A NUL in a queued item cannot stall the queue (issue 31, point 1): the service refuses it
/// with 422 on either store, the item leaves the queue, and the items after it are delivered.
@Suite struct ReporterInputTextTests {
    @Test func aQueuedItemWithANulIsRefusedAndTheItemsAfterItAreDelivered() async throws {
        let server = try ClientTestServer()
        let folder = TemporaryDirectory()
        let events = ReporterTests.Events()
        let reporter = try LifecycleReporter(
            client: server.client(timeout: 5),
            configuration: .init(directory: URL(fileURLWithPath: folder.path), batchSize: 3, initialBackoff: 0.02, maxBackoff: 0.1),
            onEvent: events.record
        )
        try reporter.create(instance: "nul")
        try reporter.report(event: "didFinishLaunching", instance: "nul")
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("main\u{0}side")], instance: "nul")
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("main")], instance: "nul")
        try reporter.report(event: "didBecomeActive", instance: "nul", believedState: "fore\u{0}ground")
        // Every other control character is delivered and stored as it was sent.
        try reporter.report(event: "didBecomeActive", instance: "nul", ranHooks: ["tab\there\u{1}\u{1B}[2J\u{7F}\u{85}\u{2028}"])
        try reporter.report(event: "willResignActive", instance: "nul")

        // `.delivered` is told once its answer is journaled, after the queue has let the item go.
        #expect(await ReporterTests.soon(within: 20) { reporter.status.pendingItems == 0 && events.delivered.count == 7 }, "\(events.all.withLock { $0 })")
        #expect(events.delivered.map(\.1) == [201, 200, 422, 200, 422, 200, 200], "\(events.delivered)")
        let records = try ReporterTests.history(server, "nul")
        try #require(records.map { $0["event"] as? String } == ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive"])
        #expect(records[2]["ranHooks"] as? [String] == ["tab\there\u{1}\u{1B}[2J\u{7F}\u{85}\u{2028}"])
    }
}
