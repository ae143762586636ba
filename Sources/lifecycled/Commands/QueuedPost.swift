import Foundation
import Glibc
import LifecycleClient
import LifecycleKit
import LifecycleLocks

/// `post --queue` (and `action`, `relaunch`, `create`) and `flush` over a `LifecycleReporter`
/// journal in a folder: one command at a time per folder (an exclusive lock), delivering only
/// when told (`flush`), never by a sender of its own, so the command ends when its delivery does.
///
/// `post --queue` queues first (the journal is fsynced before anything is sent) and then
/// delivers the whole queue, its event last: what earlier runs left queued goes out first, in
/// order. A kill at any point loses nothing queued and stores nothing twice: each item keeps
/// the idempotency key it was queued with, so a batch whose answer was lost is answered again
/// from the service's idempotency store.
struct QueuedPost {
    let queue: QueueOptions
    let client: LifecycleClient
    var directory: String { queue.directory }

    /// What one delivery did.
    struct Delivery {
        /// Items and gap records answered, in order.
        var answered: [(item: QueuedItem?, result: BatchResult)] = []
        /// Why the rest stays queued; `nil` when the queue is empty.
        var failure: LifecycleClientError?
        var pending = 0
        var delivered: Int { answered.count }
    }

    /// Queues `item` and delivers the queue; prints the item's answer (or `queued`); the exit status.
    func post(_ item: BatchItem, command: String) async throws -> Int32 {
        var isQueued = false
        let delivery: Delivery
        do {
            delivery = try await deliver { reporter in
                try Self.queue(item, reporter)
                isQueued = true
            }
        } catch {
            // Said apart from an answer that could not be journaled: this item is not in the queue
            // (the folder, its lock or its journal could not be opened, or the entry not written).
            guard isQueued else { throw CommandFailure("not queued: \(Self.reason(error))") }
            throw error
        }
        for earlier in delivery.answered.dropLast(delivery.failure == nil ? 1 : 0) { Self.noteRefusal(earlier.result) }
        if let failure = delivery.failure {
            guard Self.isTransient(failure) else {
                Output.error("lifecycled \(command): \(ClientCommand.describe(failure)) (waiting will not cure this refusal; the item stays queued in \(directory))")
                return ClientCommand.Status.failure
            }
            Output.line("queued")
            return ClientCommand.Status.success
        }
        guard let mine = delivery.answered.last else { throw CommandFailure("the queue was delivered without the item") }
        return try PostCommand.report(mine.result, command: command)
    }

    /// Queues `item` in `reporter`'s journal.
    private static func queue(_ item: BatchItem, _ reporter: LifecycleReporter) throws {
        switch item.kind {
        case .event:
            try reporter.report(
                event: item.name ?? "", parameters: item.parameters, instance: item.instance, believedState: item.believedState, ranHooks: item.ranHooks
            )
        case .action:
            try reporter.report(
                action: item.name ?? "", parameters: item.parameters, instance: item.instance, believedState: item.believedState, ranHooks: item.ranHooks
            )
        case .launch: try reporter.reportRelaunch(instance: item.instance)
        case .create: try reporter.create(instance: item.instance, model: item.model)
        case .gap: throw CommandFailure("no command queues a gap")
        }
    }

    /// Delivers everything queued.
    func flush() async throws -> Delivery {
        let delivery = try await deliver { _ in }
        for answered in delivery.answered { Self.noteRefusal(answered.result) }
        return delivery
    }

    /// Opens the journal under the folder's lock, runs `enqueue`, then delivers until the queue is
    /// empty or the service cannot take more.
    private func deliver(_ enqueue: (LifecycleReporter) throws -> Void) async throws -> Delivery {
        let lock = try FolderLock(queue)
        let answered = LockedValue<[(item: QueuedItem?, result: BatchResult)]>([])
        let reporter = try LifecycleReporter(
            client: client, configuration: queue.configuration
        ) { event in
            switch event {
            case .delivered(let item, let result): answered.withLock { $0.append((item, result)) }
            case .gapDelivered(_, _, let result): answered.withLock { $0.append((nil, result)) }
            case .damagedTail(let bytes): Output.error("lifecycled: cut off a damaged journal tail of \(Output.counted(bytes, "byte")) in \(directory)")
            case .damaged(let damage): Output.error("lifecycled: \(QueuedPost.describe(damage)) in \(directory)")
            case .dropped(let instance, let count):
                Output.error("lifecycled: dropped \(count == 1 ? "the oldest queued item" : "the \(count) oldest queued items") of \(instance) (past the bound)")
            case .retrying, .journalUnavailable, .journalCaughtUp: break
            }
        }
        // A command ends with its process: a report held in memory would be lost, so it is refused.
        if let reason = reporter.status.journalUnavailable { throw CommandFailure(reason) }
        try enqueue(reporter)
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
            : "\(Output.counted(damage.lostItems, "item")) lost, " + (damage.gapInstance.map { "recorded as a gap on \($0)" } ?? "no gap recorded (several instances)")
        return "\(Output.counted(damage.entries, "damaged journal entry", plural: "damaged journal entries")) (\(Output.counted(damage.bytes, "byte"))) skipped; \(lost)"
    }

    /// An error opening or writing the queue in one line, in the system's words where it has them.
    private static func reason(_ error: any Error) -> String {
        switch error {
        case let failure as CommandFailure: failure.description
        case let failure as LifecycleReporter.ReportError: failure.description
        default: (error as NSError).localizedDescription
        }
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

/// `--queue DIR` and the reporter's bounds (``LifecycleReporter/Configuration``), as every
/// command that queues takes them.
struct QueueOptions {
    /// The flags.
    static let flags: Set<String> = ["--queue", "--max-items", "--max-bytes"]
    /// Their lines in each command's `--help`.
    static let help = """
          --queue DIR         queue it in the reporter journal in DIR first, then deliver the
                              queue (this item last) at once; if the service cannot be reached,
                              it stays queued for `lifecycled flush --queue DIR`
          --max-items N       keep at most N undelivered items in DIR (default 10000); past it
                              the oldest are dropped, said on standard error, and a gap tells
                              the service how many
          --max-bytes N       keep at most N bytes of undelivered items (default 8388608), as
                              --max-items
        """

    var directory: String
    var maxItems: Int?
    var maxBytes: Int?

    /// What is at a queue folder's path: post creates a missing one, and neither command takes a file for one.
    enum Found {
        case nothing, file, folder
    }

    /// What is at ``directory`` now.
    var found: Found {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else { return .nothing }
        return isDirectory.boolValue ? .folder : .file
    }

    /// Why a file cannot be the queue: one sentence for both commands, which exit differently.
    var isAFile: String { "\(directory) is a file, not a queue folder" }

    /// The options given; `nil` without `--queue` (the bounds need it).
    init?(_ arguments: Arguments, command: String) throws(UsageError) {
        func bound(_ flag: String) throws(UsageError) -> Int? {
            guard let text = try arguments.single(flag, command: command) else { return nil }
            guard let value = Int(text), value > 0 else { throw UsageError("invalid value \"\(text)\" for \(flag): a whole number above 0") }
            return value
        }
        maxItems = try bound("--max-items")
        maxBytes = try bound("--max-bytes")
        guard let directory = try arguments.single("--queue", command: command) else {
            if maxItems != nil || maxBytes != nil { throw UsageError("--max-items and --max-bytes bound a queue: they need --queue DIR") }
            return nil
        }
        if directory.isEmpty { throw UsageError("--queue needs a directory; see lifecycled \(command) --help") }
        self.directory = directory
    }

    /// The reporter's configuration: delivering only when a command says so.
    var configuration: LifecycleReporter.Configuration {
        let defaults = LifecycleReporter.Configuration(directory: URL(fileURLWithPath: directory))
        return .init(
            directory: defaults.directory, maxItems: maxItems ?? defaults.maxItems, maxBytes: maxBytes ?? defaults.maxBytes, deliversAutomatically: false
        )
    }
}

/// An exclusive `flock` on `DIR/lock`, held until the value is dropped: a journal has one
/// reporter at a time, and two commands on one folder take turns. The kernel drops it when
/// the process dies, `kill -9` included.
private final class FolderLock {
    private let descriptor: Int32

    init(_ queue: QueueOptions) throws {
        let directory = queue.directory
        if queue.found == .file { throw CommandFailure(queue.isAFile) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        descriptor = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CommandFailure("cannot open \(directory)/lock: \(String(cString: strerror(errno)))") }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw CommandFailure("cannot lock \(directory)/lock: \(String(cString: strerror(errno)))") }
        }
    }

    deinit { close(descriptor) }
}
