import LifecycleLocks

/// Counters keyed by label values (in the order of ``labelNames``); a series appears when it
/// is first counted. Its own lock is held for an update or for a copy, never longer, so a
/// scrape waits for neither a commit nor a request.
final class CounterFamily: Sendable {
    let name: String
    let help: String
    let labelNames: [String]
    private let counts = LockedValue<[[String]: UInt64]>([:])

    init(_ name: String, labels: [String], help: String) {
        self.name = name
        self.labelNames = labels
        self.help = help
    }

    func increment(_ labels: [String]) {
        counts.withLock { $0[labels, default: 0] += 1 }
    }

    /// Adds counts tallied elsewhere (a commit's records: a series may come more than once)
    /// under one hold of the lock.
    func add(_ tallies: [(labels: [String], count: UInt64)]) {
        guard !tallies.isEmpty else { return }
        counts.withLock { counts in
            for (labels, amount) in tallies { counts[labels, default: 0] += amount }
        }
    }

    func write(to exposition: inout Exposition) {
        let snapshot = counts.withLock { $0 }
        exposition.family(name, .counter, help: help)
        for (labels, count) in snapshot.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            exposition.sample(name, zip(labelNames, labels), count)
        }
    }
}

/// Histograms keyed by label values: per series, how many observations fell at or under each
/// bound, their sum and their count. Locked like ``CounterFamily``.
final class HistogramFamily: Sendable {
    let name: String
    let help: String
    let labelNames: [String]
    /// Upper bounds, ascending; `+Inf` is implied.
    let bounds: [Double]
    private let series = LockedValue<[[String]: Series]>([:])

    struct Series {
        /// Observations per bucket, not cumulative; the last is above every bound.
        var buckets: [UInt64]
        var sum = 0.0
        var count: UInt64 = 0

        init(bounds: [Double]) {
            buckets = Array(repeating: 0, count: bounds.count + 1)
        }
    }

    init(_ name: String, labels: [String] = [], bounds: [Double], help: String) {
        precondition(bounds == bounds.sorted() && Set(bounds).count == bounds.count, "histogram bounds must ascend")
        self.name = name
        self.labelNames = labels
        self.bounds = bounds
        self.help = help
    }

    func observe(_ value: Double, _ labels: [String] = []) {
        let bucket = bounds.firstIndex { value <= $0 } ?? bounds.count
        series.withLock { series in
            series[labels, default: Series(bounds: bounds)].record(value, in: bucket)
        }
    }

    func write(to exposition: inout Exposition) {
        let snapshot = series.withLock { $0 }
        exposition.family(name, .histogram, help: help)
        for (labels, series) in snapshot.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            series.write(name, labels: Array(zip(labelNames, labels)), bounds: bounds, to: &exposition)
        }
    }
}

extension HistogramFamily.Series {
    mutating func record(_ value: Double, in bucket: Int) {
        buckets[bucket] += 1
        sum += value
        count += 1
    }

    /// Adds the observations of another series of the same bounds.
    mutating func add(_ other: Self) {
        for (bucket, count) in other.buckets.enumerated() { buckets[bucket] += count }
        sum += other.sum
        count += other.count
    }

    /// The series as exposition samples: cumulative buckets, `+Inf`, sum and count.
    func write(_ name: String, labels: [(String, String)], bounds: [Double], to exposition: inout Exposition) {
        var cumulative: UInt64 = 0
        for (bound, count) in zip(bounds, buckets) {
            cumulative += count
            exposition.sample(name + "_bucket", labels + [("le", Exposition.format(bound))], cumulative)
        }
        exposition.sample(name + "_bucket", labels + [("le", "+Inf")], count)
        exposition.sample(name + "_sum", labels, sum)
        exposition.sample(name + "_count", labels, count)
    }
}
