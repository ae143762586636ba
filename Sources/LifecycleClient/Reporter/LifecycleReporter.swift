import Foundation
import LifecycleKit
import LifecycleLocks

/// The offline queue: inputs reported by the app are journaled on the device and delivered in
/// order, exactly once, through `POST /v1/batch` whenever the service can be reached.
///
/// `report` never waits for the disk either: it writes the entry (`pwrite(2)`, microseconds) on
/// the caller's thread, the main thread in an app, and returns; from then on a kill of the
/// process loses nothing. A serial queue fsyncs the entries written since its last sync in one
/// go, at once (`F_FULLFSYNC` on Apple platforms with ``Configuration/powerLossDurable``): a
/// power loss before that sync can cost the last few reports, never their order and never a
/// duplicate (`Journal`'s invariant 2).
///
/// `report` never waits on the network: a sender task delivers batches of up to
/// ``Configuration/batchSize`` items, with exponential backoff and full jitter while the service
/// is unreachable or answers 5xx/429 (a `Retry-After` it sends is honoured), and at once when
/// ``retryNow()`` is called (the app adapter calls it when the app becomes active again).
///
/// Delivery: every answered item leaves the queue, whether stored or refused on its merits
/// (404, 409, 422…: reported as ``Event/delivered(_:_:)`` and not retried; an unexpected event's
/// 409 is an ordinary delivery, its record stored). Items answered 5xx/429 and every item after
/// them stay queued and are sent again with their keys. A batch refused whole (400, 413) is
/// split in halves until the item the service refuses is alone, and that item is delivered as refused.
///
/// Past the bound (``Configuration/maxItems``, ``Configuration/maxBytes``) the oldest items not
/// in flight are dropped, counted per instance, and a `gap` item (`{"dropped": N}`) goes before
/// each instance's first kept item, so the gap is in its history where they were. An instance's
/// last `create` is never dropped (without it the items kept, or queued later, would be
/// answered 404; it still counts toward the bound), and its gap goes after it: create, gap,
/// kept items.
///
/// A folder that cannot be opened yet (on iOS, data protection before the first unlock after a
/// reboot; a path that is not a folder) does not stop the reporter: it says so
/// (``Event/journalUnavailable(reason:)``, ``Status/journalUnavailable``), holds reports in
/// memory within the bound (``Status/heldItems``; past it `report` throws), tries again on each
/// report and ``retryNow()``, and writes them, in order, once it can (``Event/journalCaughtUp(items:)``).
/// Held reports are lost if the process ends first. Once the folder opens, `report` journals or
/// throws: while the held reports cannot be written (a full disk), it throws.
/// On Apple platforms the folder is excluded from backups and readable from the first unlock
/// (`completeUntilFirstUserAuthentication`); that code is not verified here (no Apple SDK).
///
/// Recovery: a write torn by a kill is cut off when the journal opens (``Event/damagedTail(bytes:)``);
/// a failed write (a full disk) is cut back at once and `report` throws
/// ``ReportError/journalUnwritable(directory:reason:)``; a damaged entry is skipped and reading
/// goes on, a damaged item counted as lost (``Event/damaged(_:)``, ``Status/damage``) and queued
/// as a gap on its instance when the journal names one only. A batch answered whose answer
/// cannot be journaled is not delivered: the sender backs off as for any failure
/// (``Event/retrying(error:retryIn:)`` naming the folder and the reason), ``flush()`` throws
/// ``ReportError/journalUnwritable(directory:reason:)``, and the batch goes again with its keys,
/// so the service stores each item once. Reporters in several processes may share one folder:
/// each write holds the folder's lock, taken and released around it alone. The journal's format,
/// the invariants that make delivery exactly once across kills, and what damage to each entry
/// kind costs are described on `Journal` (Sources/LifecycleClient/Reporter/Journal.swift).
public final class LifecycleReporter: Sendable {
    private let core: ReporterCore
    private let sender: Task<Void, Never>?

    /// Opens the journal in `configuration.directory` (cutting off a torn tail, reported to
    /// `onEvent` as ``Event/damagedTail(bytes:)``, and removing damaged entries, reported as
    /// ``Event/damaged(_:)``) and starts delivering what it holds. A journal that cannot be
    /// opened is no error (``Event/journalUnavailable(reason:)``): nothing is thrown today, and
    /// `throws` stays so that callers' `try` compiles without a warning.
    public init(client: LifecycleClient, configuration: Configuration, onEvent: (@Sendable (Event) -> Void)? = nil) throws {
        core = ReporterCore(client: client, configuration: configuration, onEvent: onEvent ?? { _ in })
        let core = core
        sender = configuration.deliversAutomatically ? Task.detached { await core.run() } : nil
    }

    deinit {
        sender?.cancel()
        core.wake()
    }

    /// Queues an event: returns once it is written to the journal (a kill loses nothing; the
    /// sync follows off this thread), never waiting on the disk's sync or the network; throws
    /// ``ReportError/journalUnwritable(directory:reason:)`` when the journal cannot be written
    /// (not queued) or after a failed sync when a second fails too.
    /// `occurredAt` defaults to now on the device's clock, in its offset.
    public func report(
        event: String, parameters: [String: Value] = [:], instance: String, believedState: String? = nil, ranHooks: [String]? = nil,
        occurredAt: DeviceTime? = nil
    ) throws {
        try core.enqueue(instance: instance, kind: .event, name: event, parameters: parameters, believedState: believedState,
                         ranHooks: ranHooks, occurredAt: occurredAt)
    }

    /// Queues an action, as ``report(event:parameters:instance:believedState:ranHooks:occurredAt:)``.
    public func report(
        action: String, parameters: [String: Value] = [:], instance: String, believedState: String? = nil, ranHooks: [String]? = nil,
        occurredAt: DeviceTime? = nil
    ) throws {
        try core.enqueue(instance: instance, kind: .action, name: action, parameters: parameters, believedState: believedState,
                         ranHooks: ranHooks, occurredAt: occurredAt)
    }

    /// Queues a relaunch of `instance` (a new process of the app).
    public func reportRelaunch(instance: String, occurredAt: DeviceTime? = nil) throws {
        try core.enqueue(instance: instance, kind: .launch, occurredAt: occurredAt)
    }

    /// Queues the creation of `instance` (of `model`; `nil`: the service's default) with
    /// `labels` (who it is; see docs/TRIAGE.md), a no-op on the service when it exists with that model.
    public func create(instance: String, model: String? = nil, labels: [String: String] = [:]) throws {
        try core.enqueue(instance: instance, kind: .create, model: model, labels: labels)
    }

    /// Tries to deliver now, cutting a backoff wait short (but not a `Retry-After` the service
    /// asked for). The adapter calls it when the app becomes active or enters the foreground.
    public func retryNow() { core.retryNow() }

    /// Syncs the journal (what `report` wrote and the group sync has not yet covered), then
    /// delivers everything queued, in order, now; returns the number of items and gaps answered.
    /// Throws (items kept) when the service cannot be reached, refuses the batch whole (its
    /// ``LifecycleClientError/problem(_:)``, such as a wrong token's 401), or asks to retry
    /// later, and ``ReportError/journalUnwritable(directory:reason:)`` when an answer cannot be
    /// journaled. Meant for reporters made with `deliversAutomatically: false` (a command line's `flush`).
    @discardableResult
    public func flush() async throws -> Int { try await core.flush() }

    /// The queue as it is now.
    public var status: Status { core.status }

    /// Why the last group sync failed, until a report syncs again (for tests).
    var syncFailure: String? { core.syncFailure }
}
