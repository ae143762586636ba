import Foundation
import LifecycleKit

extension LifecycleReporter {
    /// How a reporter queues and delivers.
    public struct Configuration: Sendable {
        /// The folder of the journal (made if absent). Reporters in several processes may share
        /// it (an app and its extension): each write is made under an exclusive lock on the
        /// folder's `journal.lock`, after reading what the others wrote.
        public var directory: URL
        /// The most items one `POST /v1/batch` holds.
        public var batchSize: Int
        /// The most undelivered items kept; past it the oldest are dropped (and reported as a
        /// gap), except an instance's last `create` (its items, kept or queued later, need it;
        /// one followed by a later create of its instance is dropped, uncounted): it still counts,
        /// so another item is dropped in its place, and only creates kept so are held past the
        /// bound, one an instance at most.
        public var maxItems: Int
        /// The most bytes of undelivered items kept (their journal entries); past it, as `maxItems`.
        public var maxBytes: Int
        /// The first retry's longest wait; each failure doubles it (full jitter: a random wait up to it).
        public var initialBackoff: TimeInterval
        /// The longest wait between retries (30 s by default): after an outage the first batch
        /// goes at most this long after the service is back, or at once when the app becomes
        /// active (``LifecycleReporter/retryNow()``).
        public var maxBackoff: TimeInterval
        /// Dead bytes (delivered or dropped entries) past which the journal is rewritten.
        public var compactionThreshold: Int
        /// Whether a sender task delivers by itself (`false`: only ``LifecycleReporter/flush()`` does).
        public var deliversAutomatically: Bool
        /// Whether each journal sync also flushes the drive's cache (`F_FULLFSYNC` on Apple
        /// platforms; Linux's `fsync` always does), so what was synced survives a power loss, at
        /// a cost of milliseconds a sync off the reporting thread. Off by default: an app's
        /// process being killed, the usual loss, needs no sync at all (invariant 2 on `Journal`).
        public var powerLossDurable: Bool
        /// Labels of the instance an adapter creates (``LifecycleAppObserver``), beside those it
        /// fills itself (`app.version`, `run`, …); the app's win over the adapter's for one key.
        public var labels: [String: String]
        /// The journal's writes and cuts: a test's fail as a full disk would.
        var journalIO = Journal.IO.system

        /// The defaults: batches of 100, at most 10,000 items or 8 MiB, backoff from 0.5 s up to 30 s.
        public init(
            directory: URL, batchSize: Int = 100, maxItems: Int = 10_000, maxBytes: Int = 8 << 20,
            initialBackoff: TimeInterval = 0.5, maxBackoff: TimeInterval = 30, compactionThreshold: Int = 1 << 20,
            deliversAutomatically: Bool = true, powerLossDurable: Bool = false, labels: [String: String] = [:]
        ) {
            self.labels = labels
            self.directory = directory
            self.batchSize = max(1, min(batchSize, 1000))
            self.maxItems = max(1, maxItems)
            self.maxBytes = max(1, maxBytes)
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.compactionThreshold = compactionThreshold
            self.deliversAutomatically = deliversAutomatically
            self.powerLossDurable = powerLossDurable
        }
    }

    /// What a reporter tells the app (its `onEvent` callback), one value per notable event.
    public enum Event: Sendable {
        /// The journal's tail was a write torn by a kill (never acknowledged to the caller):
        /// `bytes` were cut off when it opened.
        case damagedTail(bytes: Int)
        /// The journal held damaged entries when it opened: they were skipped and removed, what
        /// they cost is in the value (see ``Damage``).
        case damaged(Damage)
        /// The bound was passed: the oldest `count` undelivered items of `instance` were dropped;
        /// a `gap` item will tell the service.
        case dropped(instance: String, count: Int)
        /// An item was answered and has left the queue, its answer journaled (one that could not
        /// be is sent again and told once, then): stored (`.record`, `.instance`, or an
        /// unexpected event's 409 `.problem` carrying its record) or refused on its merits
        /// (404, 409, 412, 422, …: it is not retried).
        case delivered(QueuedItem, BatchResult)
        /// A gap item was answered (a record of kind `gap`, or a refusal such as 404).
        case gapDelivered(instance: String, dropped: Int, BatchResult)
        /// A batch could not be delivered; it is retried after `retryIn` seconds, keys unchanged.
        /// `error` is one line of at most 120 characters, such as "cannot connect to
        /// 10.0.0.5:8080: connection refused".
        case retrying(error: String, retryIn: TimeInterval)
        /// The journal's folder cannot be opened (`reason`, one line of at most 120 characters),
        /// such as before the first unlock after a reboot: reports are held in memory (within the
        /// bound) and the reporter tries again on each report and ``LifecycleReporter/retryNow()``.
        case journalUnavailable(reason: String)
        /// The journal could be written again: the `items` reports held meanwhile are now in it,
        /// in the order they were made, and are delivered.
        case journalCaughtUp(items: Int)
    }

    /// A snapshot of the queue.
    public struct Status: Sendable, Equatable {
        /// Items queued and not yet answered.
        public var pendingItems: Int
        /// Bytes of their journal entries.
        public var pendingBytes: Int
        /// Dropped items not yet reported to the service, per instance.
        public var unreportedDrops: [String: Int]
        /// Bytes of a damaged tail cut off when the journal opened (0: none).
        public var damagedTailBytes: Int
        /// The damaged entries found since the reporter opened (nil: none).
        public var damage: Damage?
        /// Why the journal's last compaction failed, if it did: the journal stays as it was,
        /// whole, and grows until a later one succeeds.
        public var compactionError: String?
        /// Reports held in memory while the journal could not be opened (not in `pendingItems`):
        /// they are written to it, in order, once it can be, and are lost if the process ends first.
        public var heldItems = 0
        /// Why the journal cannot be opened or written now, if so (one line).
        public var journalUnavailable: String?
    }

    /// Why `report` could not queue an item, or `flush` stopped.
    public enum ReportError: Error, Sendable, CustomStringConvertible {
        /// The reporter was closed.
        case closed
        /// One item's entry is larger than the whole byte bound.
        case tooLarge(bytes: Int)
        /// The journal in `directory` could not be written (`reason`: the system's words, such
        /// as "No space left on device"); what it would have recorded is not durable.
        case journalUnwritable(directory: String, reason: String)

        /// The error in one line of at most 120 characters (a long folder is elided in its
        /// middle; the reason, at the end, is kept).
        public var description: String {
            switch self {
            case .closed: "the reporter was closed"
            case .tooLarge(let bytes): "an item's journal entry of \(bytes) bytes is larger than the queue's byte bound"
            case .journalUnwritable(let directory, let reason): Self.unwritable(directory, reason)
            }
        }

        /// Each part cut in its own middle, the folder only as far as the reason needs: the
        /// reason ends with the system's words, what to act on.
        private static func unwritable(_ directory: String, _ reason: String) -> String {
            let lead = "cannot write the queue's journal in "
            let said = reason.oneLine(limit: 120 - lead.count - 2 - 24)
            return lead + directory.oneLine(limit: 120 - lead.count - 2 - said.count) + ": " + said
        }

        /// `error`, thrown writing the journal in `directory`, with the system's reason when it
        /// carries one: Foundation wraps the errno (ENOSPC, EIO) in errors of its own.
        static func journalUnwritable(_ directory: URL, _ error: any Error) -> ReportError {
            if let error = error as? ReportError { return error }
            return .journalUnwritable(directory: directory.path, reason: reason(of: error))
        }

        /// The system's reason in `error`, thrown reading or writing the journal.
        static func reason(of error: any Error) -> String {
            if case .journalUnwritable(_, let reason) = error as? ReportError { return reason }
            if let error = error as? ReportError { return error.description }
            if let failure = error as? Journal.Failure { return failure.message }
            return posixReason(of: error) ?? String(describing: error).oneLine()
        }
    }

    /// Damaged journal entries skipped: bytes changed after they were written, or values no
    /// reporter writes. The journal's documentation (`Journal`) says what each kind costs.
    public struct Damage: Sendable, Equatable {
        /// Entries skipped.
        public var entries: Int
        /// Of them, items never answered by the service: lost (an entry whose kind could not be
        /// read counts as an item).
        public var lostItems: Int
        /// Bytes skipped.
        public var bytes: Int
        /// The instance a gap of `lostItems` was queued for: the instance the journal names when
        /// it names only one (nil: none could be told, or nothing was lost).
        public var gapInstance: String?

        /// A count of damage.
        public init(entries: Int, lostItems: Int, bytes: Int, gapInstance: String? = nil) {
            self.entries = entries
            self.lostItems = lostItems
            self.bytes = bytes
            self.gapInstance = gapInstance
        }

        /// This damage and `other`'s, summed (the instance the later one's, if any).
        func adding(_ other: Damage?) -> Damage {
            guard let other else { return self }
            return Damage(entries: entries + other.entries, lostItems: lostItems + other.lostItems, bytes: bytes + other.bytes,
                          gapInstance: other.gapInstance ?? gapInstance)
        }
    }
}
