import Foundation
import Glibc
import LifecycleClient
import LifecycleKit
import Synchronization

/// `post --queue` and `flush` over a `LifecycleReporter` journal in a folder: one command at a
/// time per folder (an exclusive lock), delivering only when told (`flush`), never by a
/// sender of its own, so the command ends when its delivery does.
///
/// `post --queue` queues first (the journal is fsynced before anything is sent) and then
/// delivers the whole queue, its event last: what earlier runs left queued goes out first, in
/// order. A kill at any point loses nothing queued and stores nothing twice: each item keeps
/// the idempotency key it was queued with, so a batch whose answer was lost is answered again
/// from the service's idempotency store.
struct QueuedPost {
    let directory: String
    let client: LifecycleClient

    /// What one delivery did.
    struct Delivery {
        /// Items and gap records answered, in order.
        var answered: [(item: QueuedItem?, result: BatchResult)] = []
        /// Why the rest stays queued; `nil` when the queue is empty.
        var failure: LifecycleClientError?
        var pending = 0
        var delivered: Int { answered.count }
    }

    /// Queues `item` and delivers the queue; prints the item's record (or `queued`); the exit status.
    func post(_ item: BatchItem) async throws -> Int32 {
        let delivery = try await deliver { reporter in
            try reporter.report(
                event: item.name ?? "", parameters: item.parameters, instance: item.instance, believedState: item.believedState, ranHooks: item.ranHooks
            )
        }
        for earlier in delivery.answered.dropLast(delivery.failure == nil ? 1 : 0) { Self.noteRefusal(earlier.result) }
        if let failure = delivery.failure {
            guard Self.isTransient(failure) else {
                Output.error("lifecycled post: \(ClientCommand.describe(failure)) (the event stays queued in \(directory))")
                return ClientCommand.Status.failure
            }
            Output.line("queued")
            return ClientCommand.Status.success
        }
        guard let mine = delivery.answered.last else { throw CommandFailure("the queue was delivered without the event") }
        return try PostCommand.report(mine.result)
    }

    /// Delivers everything queued.
    func flush() async throws -> Delivery {
        let delivery = try await deliver { _ in }
        for answered in delivery.answered { Self.noteRefusal(answered.result) }
        return delivery
    }

    /// Opens the journal under the folder's lock, runs `queue`, then delivers until the queue is
    /// empty or the service cannot take more.
    private func deliver(_ queue: (LifecycleReporter) throws -> Void) async throws -> Delivery {
        let lock = try FolderLock(directory)
        let answered = Mutex<[(item: QueuedItem?, result: BatchResult)]>([])
        let reporter = try LifecycleReporter(
            client: client, configuration: .init(directory: URL(fileURLWithPath: directory), deliversAutomatically: false)
        ) { event in
            switch event {
            case .delivered(let item, let result): answered.withLock { $0.append((item, result)) }
            case .gapDelivered(_, _, let result): answered.withLock { $0.append((nil, result)) }
            case .damagedTail(let bytes): Output.error("lifecycled: cut off a damaged journal tail of \(bytes) bytes in \(directory)")
            case .damaged(let damage): Output.error("lifecycled: \(QueuedPost.describe(damage)) in \(directory)")
            case .dropped(let instance, let count): Output.error("lifecycled: dropped the \(count) oldest queued items of \(instance) (past the bound)")
            case .retrying: break
            }
        }
        try queue(reporter)
        var delivery = Delivery()
        do {
            try await reporter.flush()
        } catch let error as LifecycleClientError {
            delivery.failure = error
        }
        delivery.answered = answered.withLock { $0 }
        delivery.pending = reporter.status.pendingItems
        withExtendedLifetime(lock) {}
        return delivery
    }

    /// A journal's damage in one line: "3 damaged journal entries (412 bytes) skipped; 2 items lost, recorded as a gap on app-1".
    static func describe(_ damage: LifecycleReporter.Damage) -> String {
        let lost = damage.lostItems == 0 ? "no item lost"
            : "\(damage.lostItems) item\(damage.lostItems == 1 ? "" : "s") lost, " + (damage.gapInstance.map { "recorded as a gap on \($0)" } ?? "no gap recorded (several instances)")
        return "\(damage.entries) damaged journal entr\(damage.entries == 1 ? "y" : "ies") (\(damage.bytes) bytes) skipped; \(lost)"
    }

    /// Whether the service is only out of reach for now (no answer, 5xx, 429): the queue waits for it.
    static func isTransient(_ error: LifecycleClientError) -> Bool {
        guard let problem = error.problem else { return true }
        return problem.status >= 500 || problem.status == 429
    }

    /// An earlier item refused on its merits is delivered (not retried); say so on standard error.
    private static func noteRefusal(_ result: BatchResult) {
        guard case .problem(_, let problem) = result, problem.record == nil else { return }
        Output.error("lifecycled: a queued item was refused: \(String(decoding: problem.body, as: UTF8.self))")
    }
}

/// An exclusive `flock` on `DIR/lock`, held until the value is dropped: a journal has one
/// reporter at a time, and two commands on one folder take turns. The kernel drops it when
/// the process dies, `kill -9` included.
private final class FolderLock {
    private let descriptor: Int32

    init(_ directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        descriptor = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CommandFailure("cannot open \(directory)/lock: \(String(cString: strerror(errno)))") }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw CommandFailure("cannot lock \(directory)/lock: \(String(cString: strerror(errno)))") }
        }
    }

    deinit { close(descriptor) }
}
