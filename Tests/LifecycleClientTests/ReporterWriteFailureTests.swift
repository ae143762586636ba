import Foundation
import Glibc
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// A failed journal write (a full disk) leaves the journal as if it had not been tried, and
/// `report` says so: every report acknowledged to the caller is stored exactly once, in order.
@Suite struct ReporterWriteFailureTests {
    /// A disk that fails the writes `failing` picks, after writing a part of them (a torn
    /// write), with ENOSPC; `truncates`: whether cutting back works.
    final class FullDisk: Sendable {
        private let state: LockedValue<(random: SeededRandom, calls: Int)>
        private let failing: @Sendable (_ call: Int, _ random: inout SeededRandom) -> Bool
        private let truncates: Bool

        init(seed: UInt64 = 1, truncates: Bool = true, failing: @escaping @Sendable (_ call: Int, _ random: inout SeededRandom) -> Bool) {
            state = LockedValue((SeededRandom(seed: seed), 0))
            self.failing = failing
            self.truncates = truncates
        }

        var io: Journal.IO {
            Journal.IO(
                write: { descriptor, bytes, offset in
                    let part: Int? = self.state.withLock { s in
                        s.calls += 1
                        return self.failing(s.calls, &s.random) ? s.random.next(below: bytes.count) : nil
                    }
                    guard let part else { return pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset)) }
                    if part > 0 { _ = pwrite(descriptor, bytes.baseAddress, part, off_t(offset)) }
                    errno = ENOSPC
                    return -1
                },
                truncate: { descriptor, length in
                    guard self.truncates else {
                        errno = EIO
                        return -1
                    }
                    return ftruncate(descriptor, off_t(length))
                }
            )
        }
    }

    static func report(_ reporter: LifecycleReporter, _ instance: String, _ n: Int) throws {
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("w\(n)")], instance: instance)
    }

    @Test func aFailedWriteIsCutBackAndTheNextReportIsKept() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "full")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let disk = FullDisk { call, _ in call == 2 }
        var configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        configuration.journalIO = disk.io
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            try Self.report(reporter, "full", 1)
            #expect {
                try Self.report(reporter, "full", 2)
            } throws: { error in
                guard case LifecycleReporter.ReportError.journalUnwritable(_, let reason) = error else { return false }
                return reason.contains("ENOSPC") && reason.contains("No space left on device")
            }
            try Self.report(reporter, "full", 3)
            #expect(reporter.status.pendingItems == 2)
        }
        // The journal is whole: no torn bytes for the next open to cut, and both kept reports in it.
        let parsed = Journal.parse(try Data(contentsOf: folder.appendingPathComponent("journal")))
        #expect(parsed.tornBytes == 0 && parsed.damage == nil)
        let reporter = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
        #expect(reporter.status.pendingItems == 2)
        #expect(try await reporter.flush() == 2)
        #expect(try ReporterDamageTests.delivered(server, "full").events == [1, 3])
    }

    @Test func whenTheCutFailsTooTheJournalRefusesWritesUntilItIsOpenedAgain() throws {
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let disk = FullDisk(truncates: false) { call, _ in call == 2 }
        var configuration = LifecycleReporter.Configuration(directory: folder, deliversAutomatically: false)
        configuration.journalIO = disk.io
        do {
            let reporter = try LifecycleReporter(client: ReporterDamageTests.offline, configuration: configuration)
            try Self.report(reporter, "stuck", 1)
            #expect(throws: LifecycleReporter.ReportError.self) { try Self.report(reporter, "stuck", 2) }
            #expect {
                try Self.report(reporter, "stuck", 3)
            } throws: { error in
                guard case LifecycleReporter.ReportError.journalUnwritable(_, let reason) = error else { return false }
                return reason.contains("opened again")
            }
        }
        let events = ReporterTests.Events()
        let reporter = try LifecycleReporter(
            client: ReporterDamageTests.offline, configuration: .init(directory: folder, deliversAutomatically: false), onEvent: events.record
        )
        #expect(reporter.status.pendingItems == 1)
        #expect(reporter.status.damage == nil, "a torn write, not damage")
        try Self.report(reporter, "stuck", 4)
        #expect(try ReporterDamageTests.pending(folder).items.map(ReporterDamageTests.n) == [1, 4])
    }

    /// Point 13: writes fail at seeded points (items, acks, compactions); every report
    /// `report` returned from is stored exactly once, in order, the failed ones never.
    @Test(arguments: [7, 8, 9, 10] as [UInt64])
    func reportsAcknowledgedWhileTheDiskFillsAreStoredOnceInOrder(seed: UInt64) async throws {
        let server = try ClientTestServer()
        let instance = "disk-\(seed)"
        _ = try await server.client().createInstance(id: instance)
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let disk = FullDisk(seed: seed) { _, random in random.next(below: 4) == 0 }
        var configuration = LifecycleReporter.Configuration(directory: folder, batchSize: 7, initialBackoff: 0, maxBackoff: 0, compactionThreshold: 1_500,
                                                            deliversAutomatically: false)
        configuration.journalIO = disk.io
        var acknowledged: [Int] = []
        do {
            let reporter = try LifecycleReporter(client: server.client(), configuration: configuration)
            for n in 1...60 {
                do {
                    try Self.report(reporter, instance, n)
                    acknowledged.append(n)
                } catch LifecycleReporter.ReportError.journalUnwritable {
                    continue
                }
                if n % 9 == 0 {
                    // A batch answered whose ack could not be written stops the flush; the batch
                    // goes again with its keys, which make the resend harmless.
                    do { _ = try await reporter.flush() } catch LifecycleReporter.ReportError.journalUnwritable {}
                }
            }
        }
        #expect(acknowledged.count < 60 && acknowledged.count > 20, "the seed fails some writes")
        let reporter = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
        #expect(reporter.status.damage == nil)
        _ = try await reporter.flush()
        #expect(try ReporterDamageTests.delivered(server, instance).events == acknowledged)
    }
}
