import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// The journal's compaction, against a real service: the file shrinks once its delivered
/// prefix is large, and what it holds after a rewrite is what it held before.
@Suite struct ReporterJournalTests {
    @Test func theDeliveredPrefixIsCompactedAwayAndTheQueueSurvivesIt() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let journal = folder.appendingPathComponent("journal")
        func size() throws -> Int { try FileManager.default.attributesOfItem(atPath: journal.path)[.size] as? Int ?? -1 }
        let configuration = LifecycleReporter.Configuration(directory: folder, maxItems: 4, compactionThreshold: 2_000, deliversAutomatically: false)
        var largest = 0
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            try reporter.create(instance: "compact")
            for event in ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"] {
                try reporter.report(event: event, parameters: event == "willConnectToWindow" ? ["window": .string("main")] : [:], instance: "compact")
            }
            try await reporter.flush()
            for round in 0..<20 {
                try reporter.report(event: round % 2 == 0 ? "willResignActive" : "didBecomeActive", instance: "compact")
                if round % 3 == 0 { try await reporter.flush() }
                largest = max(largest, try size())
            }
            // Two items queued, one of them past a drop (the bound is 4): a gap pending too.
            for _ in 0..<5 { try reporter.report(event: "willResignActive", instance: "compact") }
            #expect(reporter.status.pendingItems == 4)
        }
        #expect(largest < 4_000, "rewritten once 2,000 bytes were dead, not grown to the \(largest) bytes of every entry")
        let reopened = try LifecycleReporter(client: server.client(), configuration: configuration)
        let status = reopened.status
        #expect(status.pendingItems == 4)
        let drops = status.unreportedDrops["compact"] ?? 0
        #expect(drops >= 1)
        let sent = try await reopened.flush()
        #expect(sent == 4 + 1)
        let instance = try await server.client().instance("compact")
        // 3 launch events, 20 toggles less what was dropped, a gap, the 4 kept.
        #expect(instance.version == Int64(3 + 20 + 5 - drops + 1))
        let keys = Journal.parse(try Data(contentsOf: journal)).entries.compactMap(\.item?.key)
        #expect(Set(keys).count == keys.count)
    }
}
