import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// Two reporters on one folder (an app and its extension sharing an App Group container): they
/// take turns at the journal, read each other's entries, and every report of both is
/// delivered exactly once.
@Suite struct ReporterSharedFolderTests {
    @Test func twoReportersOnOneFolderDeliverEveryReportOnce() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "shared")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let configuration = LifecycleReporter.Configuration(directory: folder, batchSize: 5, compactionThreshold: 2_000, deliversAutomatically: false)
        do {
            let app = try LifecycleReporter(client: server.client(), configuration: configuration)
            let appExtension = try LifecycleReporter(client: server.client(), configuration: configuration)
            // The app's reports are 1...40, its extension's 101...140, each side in order; each
            // delivers now and then (acks, compactions), and some stay queued in the journal.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (reporter, base) in [(app, 0), (appExtension, 100)] {
                    group.addTask {
                        for n in (base + 1)...(base + 40) {
                            try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("w\(n)")], instance: "shared")
                            if n % 9 == 0 { try await reporter.flush() }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        // What both left queued is in the journal, whole: a reporter opened on it delivers it.
        let parsed = Journal.parse(try Data(contentsOf: folder.appendingPathComponent("journal")))
        #expect(parsed.damage == nil && parsed.tornBytes == 0, "no entry interleaved")
        let keys = parsed.entries.compactMap(\.item?.key)
        #expect(Set(keys).count == keys.count)
        let later = try LifecycleReporter(client: server.client(), configuration: configuration)
        _ = try await later.flush()
        let delivered = try ReporterDamageTests.delivered(server, "shared").events
        #expect(delivered.sorted() == Array(1...40) + Array(101...140), "each once")
        #expect(delivered.filter { $0 < 100 } == Array(1...40), "the app's in order")
        #expect(delivered.filter { $0 > 100 } == Array(101...140), "the extension's in order")
    }

    /// The command line and a reporter on one folder: `lifecycled post --queue` runs while the
    /// reporter queues, each delivering what the other queued too; each input is stored once.
    @Test func theCommandLineAndAReporterShareAFolder() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "mixed")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let reporter = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
        let (path, url) = (folder.path, server.url.absoluteString)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for n in 1...30 {
                    try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("w\(n)")], instance: "mixed")
                    if n % 3 == 0 { await Task.yield() }
                }
            }
            for n in 101...104 {
                group.addTask {
                    let run = try await ReporterDamageTests.lifecycled(
                        ["post", "--queue", path, "--server", url, "mixed", "willConnectToWindow", "window=w\(n)"]
                    )
                    #expect(run.status == 0 || run.status == 3, "\(run.stderr)")
                }
            }
            try await group.waitForAll()
        }
        _ = try await reporter.flush()
        let delivered = try ReporterDamageTests.delivered(server, "mixed").events
        #expect(delivered.sorted() == Array(1...30) + Array(101...104), "each once")
        #expect(delivered.filter { $0 < 100 } == Array(1...30), "the reporter's in order")
        let parsed = Journal.parse(try Data(contentsOf: folder.appendingPathComponent("journal")))
        #expect(parsed.damage == nil && parsed.tornBytes == 0)
    }
}
