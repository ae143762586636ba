import Foundation
import Glibc
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// A batch in flight stays in flight, and only it, while other processes' entries (acks,
/// compactions) change the queue under it.
@Suite struct ReporterInFlightTests {
    /// A service that takes each connection and never answers: a batch sent to it stays in flight.
    final class BlackHole: Sendable {
        private let listener: Int32
        private let accepted = LockedValue<[Int32]>([])
        let url: URL

        var requests: Int { accepted.withLock { $0.count } }

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    bind(listener, address, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, address, &length) == 0
                }
            }
            guard bound else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")!
            self.listener = listener
            let accepted = accepted
            Thread.detachNewThread {
                while true {
                    let connection = accept(listener, nil, nil)
                    guard connection >= 0 else { return }
                    accepted.withLock { $0.append(connection) }
                }
            }
        }

        deinit {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
            for connection in accepted.withLock({ $0 }) { close(connection) }
        }
    }

    static func report(_ reporter: LifecycleReporter, _ n: Int) throws {
        try reporter.report(event: "willConnectToWindow", parameters: ["window": .string("w\(n)")], instance: "shared")
    }

    /// Review point 2: the app has a batch in flight when its extension delivers and acknowledges
    /// past it; the app's next report found the in-flight items gone by count and trapped.
    @Test func aReportAfterAnotherProcessAcknowledgedPastTheBatchInFlightIsQueued() async throws {
        let server = try ClientTestServer()
        _ = try await server.client().createInstance(id: "shared")
        let temporary = TemporaryDirectory()
        let folder = URL(fileURLWithPath: temporary.path)
        let hole = try BlackHole()
        do {
            let app = try LifecycleReporter(
                client: LifecycleClient(configuration: .init(server: hole.url, timeout: 60)), configuration: .init(directory: folder, batchSize: 5)
            )
            for n in 1...5 { try Self.report(app, n) }
            #expect(await ReporterTests.soon { hole.requests == 1 }, "the app's batch is in flight")
            let appExtension = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, batchSize: 5, deliversAutomatically: false))
            try Self.report(appExtension, 6)
            #expect(try await appExtension.flush() == 6)
            try Self.report(app, 7)
            #expect(app.status.pendingItems == 1)
        }
        let later = try LifecycleReporter(client: server.client(), configuration: .init(directory: folder, deliversAutomatically: false))
        #expect(try await later.flush() == 1)
        let delivered = try ReporterDamageTests.delivered(server, "shared")
        #expect(delivered.events == Array(1...7) && delivered.gaps.isEmpty, "each once, none lost")
    }

    static func item(_ sequence: UInt64) -> QueuedItem {
        QueuedItem(sequence: sequence, key: "k\(sequence)", instance: "i", kind: .event, name: "e\(sequence)", parameters: [:], model: nil,
                   believedState: nil, ranHooks: nil, occurredAt: nil)
    }

    static func entry(_ sequence: UInt64) -> Journal.Entry { Journal.Entry(t: .item, item: item(sequence)) }

    /// Review point 2: a compaction by another process (the journal replaced) replays the queue;
    /// the batch in flight stays so: the bound does not drop it, and no second batch overlaps it.
    @Test func aBatchInFlightStaysInFlightAcrossAReplacedJournal() throws {
        var queue = ReportQueue(bound: .init(items: 5, bytes: 1 << 20), replaying: (1...5).map(Self.entry), sizes: Array(repeating: 10, count: 5))
        let batch = queue.takeBatch(limit: 3)
        #expect(batch?.count == 3)
        queue.reset()
        for n in UInt64(1)...5 { queue.apply(Self.entry(n), size: 10) }
        #expect(queue.takeBatch(limit: 3) == nil, "the batch is still in flight")
        let entries = queue.entries(queueing: Self.item(6), size: 10) { "gap" }
        let drop = try #require(entries.first { $0.t == .drop })
        #expect(drop.from == 4 && drop.through == 4, "the oldest item not in flight is dropped, not one in flight")
    }
}
