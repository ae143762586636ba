import LifecycleKit

/// What the committer committed since the process started: the records' transitions,
/// unexpected events, divergences, incomplete launches, relaunches and reports dropped on devices, and each transaction's time and
/// size. The committer reports a transaction once it has committed (one that rolls back
/// counts nothing) and before it answers its writes, so a client that was answered finds its
/// write counted.
///
/// Labels are names from loaded models: an event or action a model does not have is refused
/// before it is recorded, so the series are bounded by the models.
///
/// These count since the process started, and say so: rebuilding them from stored records
/// would cost start-up a pass over every record, and records beyond the history limit and
/// those of deleted instances are gone anyway.
final class CommitMetrics: Sendable {
    let transitions = CounterFamily(
        "lifecycled_transitions_total", labels: ["model", "from", "event", "to"],
        help: "Events recorded since the process started, by model, the state the event found, the event and the state it left; unexpected and ignored events too. Not kept across restarts."
    )
    let unexpectedEvents = CounterFamily(
        "lifecycled_unexpected_events_total", labels: ["model", "state", "event"],
        help: "Unexpected events recorded since the process started, by model, the state that did not expect them and the event. Not kept across restarts."
    )
    let divergences = CounterFamily(
        "lifecycled_divergences_total", labels: ["model", "state", "kind"],
        help: "Divergences recorded since the process started, by model, the state the record left the instance in and the kind (state, missingHook, extraHook, hookOrder): one per kind a record shows, on events (unexpected ones too) and actions. Not kept across restarts."
    )
    let incompleteLaunches = CounterFamily(
        "lifecycled_incomplete_launches_total", labels: ["model"],
        help: "Launches that found an earlier launch unfinished, since the process started, by model. Not kept across restarts."
    )
    let relaunches = CounterFamily(
        "lifecycled_relaunches_total", labels: ["model"],
        help: "Relaunches recorded since the process started, by model. Not kept across restarts."
    )
    let droppedReports = CounterFamily(
        "lifecycled_dropped_reports_total", labels: ["model"],
        help: "Inputs apps' reporters said they dropped before delivery (the sum of gap records' dropped), since the process started, by model. Not kept across restarts."
    )
    let commitDuration = HistogramFamily(
        "lifecycled_store_commit_duration_seconds",
        bounds: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        help: "Time one committed transaction took in the store: its writes applied, their SQL, the commit and its sync. Since the process started."
    )
    let commitWrites = HistogramFamily(
        "lifecycled_store_commit_writes",
        bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000],
        help: "Writes committed by one transaction: the group commit's batch size (up to 512 requests, or one batch of up to 1,000 items). Since the process started."
    )

    /// Starts the per-model counters at 0 for every loaded model, so that Prometheus sees a
    /// model's first incomplete launch, relaunch or dropped report as an increase.
    func start(models: some Sequence<String>) {
        let zeros = models.map { (labels: [$0], count: UInt64(0)) }
        incompleteLaunches.add(zeros)
        relaunches.add(zeros)
        droppedReports.add(zeros)
    }

    /// A committed transaction of `writes` writes that took `seconds`, whose applied inputs
    /// `counts` counted.
    func committed(writes: Int, seconds: Double, counts: CommitCounts) {
        commitDuration.observe(seconds)
        commitWrites.observe(Double(writes))
        transitions.add(counts.transitions.series)
        unexpectedEvents.add(counts.unexpected.series)
        divergences.add(counts.divergences.series)
        incompleteLaunches.add(counts.incomplete.series)
        relaunches.add(counts.relaunches.series)
        droppedReports.add(counts.dropped.series)
    }

    func write(to exposition: inout Exposition) {
        for family in [transitions, unexpectedEvents, divergences, incompleteLaunches, relaunches, droppedReports] { family.write(to: &exposition) }
        commitDuration.write(to: &exposition)
        commitWrites.write(to: &exposition)
    }
}

/// What one transaction's applied inputs add to ``CommitMetrics``' counters, counted as each
/// is applied: the transaction keeps no records for the metrics.
struct CommitCounts {
    fileprivate var transitions = SeriesTally()
    fileprivate var unexpected = SeriesTally()
    fileprivate var divergences = SeriesTally()
    fileprivate var incomplete = SeriesTally()
    fileprivate var relaunches = SeriesTally()
    fileprivate var dropped = SeriesTally()

    /// `record`, applied to an instance of `model`.
    mutating func count(_ record: Record, model: String) {
        for kind in record.divergence?.kinds ?? [] { divergences.add(1, SeriesLabels(model, record.to, kind.rawValue)) }
        switch record.kind {
        case .event:
            transitions.add(1, SeriesLabels(model, record.from, record.name, record.to))
            if record.outcome == .unexpected { unexpected.add(1, SeriesLabels(model, record.from, record.name)) }
            if record.incompleteLaunch != nil { incomplete.add(1, SeriesLabels(model)) }
        case .relaunch:
            relaunches.add(1, SeriesLabels(model))
        case .gap:
            dropped.add(UInt64(record.dropped ?? 0), SeriesLabels(model))
        case .action:
            break
        }
    }
}

/// One transaction's counts for a counter family, by the series' label values.
///
/// Not a dictionary keyed by the labels: that cost every record counted an array and the
/// hashing of up to four strings, some 2,000 instructions on the committer thread. A
/// transaction's records fall in a few series, found here by comparing labels in place; the
/// labels are names from the models, mostly the very same strings, equal at the first
/// comparison of their bits.
fileprivate struct SeriesTally {
    /// Each series' label values, as ``CounterFamily/add(_:)`` takes them: made once a series.
    private(set) var series: [(labels: [String], count: UInt64)] = []
    /// The same series' labels, compared in place.
    private var found: [SeriesLabels] = []

    mutating func add(_ amount: UInt64, _ labels: SeriesLabels) {
        if let index = found.firstIndex(of: labels) {
            series[index].count += amount
        } else {
            found.append(labels)
            series.append((labels.values, amount))
        }
    }
}

/// A series' label values, one to four, held without an array of their own.
fileprivate struct SeriesLabels: Equatable {
    private let first: String
    private let second: String?
    private let third: String?
    private let fourth: String?

    init(_ first: String, _ second: String? = nil, _ third: String? = nil, _ fourth: String? = nil) {
        (self.first, self.second, self.third, self.fourth) = (first, second, third, fourth)
    }

    var values: [String] { [first] + [second, third, fourth].compactMap { $0 } }
}
