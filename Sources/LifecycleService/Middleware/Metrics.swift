import Dispatch
import LifecycleHTTP
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// Counts every answer by method, route template and status, and times it by method and
/// route, for `/metrics`. Labels come from ``Request/route`` (never the path, which carries ids)
/// and from a fixed list of methods, so the series are as few as the routes. Refusals (at
/// admission, or the server's own) pass through here too and are counted.
///
/// It runs on every request, so recording is kept to one uncontended lock and one look-up
/// that hashes no text: each thread records into a shard of its own (see ``Shard``), summed
/// at scrape time, so the worker threads neither wait for one lock nor write the same memory.
final class RequestMetrics: Middleware {
    static let requestsName = "lifecycled_http_requests_total"
    static let requestsHelp = "Requests answered since the process started, by method, route template (* for static files, - for requests the server refused before routing) and status."
    static let durationsName = "lifecycled_http_request_duration_seconds"
    static let durationsHelp = "Time from a whole request to its response (a stream's: to its start), by method and route template, since the process started."
    /// Upper bounds of the latency buckets, in seconds; `+Inf` is implied.
    static let bounds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct Key: Hashable {
        /// An index into ``methods``.
        var method: UInt8
        var route: String

        /// The route's length stands for its text: routes are few and fixed (a client cannot
        /// add one), so the rare routes of one length are told apart by `==`, and no request
        /// pays for hashing a template.
        func hash(into hasher: inout Hasher) {
            hasher.combine(method)
            hasher.combine(route.utf8.count)
        }
    }

    /// Methods named in labels as they are; any other is `other`, so a client cannot add series.
    private static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"]

    private struct Series {
        /// Answers by status, in the order first seen: a route answers with few statuses,
        /// and a short list is searched for less than a status costs to hash.
        var statuses: [(status: Int, count: UInt64)] = []
        var durations = HistogramFamily.Series(bounds: RequestMetrics.bounds)

        mutating func record(status: Int, seconds: Double, bucket: Int) {
            if let index = statuses.firstIndex(where: { $0.status == status }) {
                statuses[index].count += 1
            } else {
                statuses.append((status, 1))
            }
            durations.record(seconds, in: bucket)
        }

        mutating func add(_ other: Series) {
            for (status, count) in other.statuses {
                if let index = statuses.firstIndex(where: { $0.status == status }) {
                    statuses[index].count += count
                } else {
                    statuses.append((status, count))
                }
            }
            durations.add(other.durations)
        }
    }

    /// One thread's series (or a few threads', past ``shardCount`` threads). Padded so that
    /// two shards' locks never share a cache line, which the threads would pass back and forth.
    private final class Shard: Sendable {
        let series = LockedValue<[Key: Series]>([:])
        private let padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    }

    /// More than the HTTP worker threads of any machine this serves on, as a rule (one per
    /// core by default); threads past it share shards, which stays correct.
    static let shardCount = 16
    private let shards = (0..<RequestMetrics.shardCount).map { _ in Shard() }

    /// This thread's shard.
    private var shard: Shard { shards[ThreadOrdinal.current % shards.count] }

    /// Where a method is in ``methods``.
    private static func index(of method: String) -> UInt8 {
        UInt8(methods.firstIndex(of: method) ?? methods.count - 1)
    }

    /// A method as labels and log lines name it: itself if it is one of ``methods``, else `other`.
    static func methodName(_ method: String) -> String { methods[Int(index(of: method))] }

    func finish(_ request: Request, _ response: inout Response) {
        let key = Key(method: Self.index(of: request.method), route: request.route ?? Pipeline.refusedTemplate)
        record(key, status: response.status, seconds: Double(DispatchTime.now().uptimeNanoseconds - request.received) / 1e9)
    }

    private func record(_ key: Key, status: Int, seconds: Double) {
        let bucket = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        shard.series.withLock { series in
            series[key, default: Series()].record(status: status, seconds: seconds, bucket: bucket)
        }
    }

    func write(to exposition: inout Exposition) {
        var merged: [Key: Series] = [:]
        for shard in shards {
            for (key, series) in shard.series.withLock({ $0 }) { merged[key, default: Series()].add(series) }
        }
        let snapshot = merged.map { (method: Self.methods[Int($0.key.method)], route: $0.key.route, series: $0.value) }
            .sorted { ($0.method, $0.route) < ($1.method, $1.route) }
        exposition.family(Self.requestsName, .counter, help: Self.requestsHelp)
        for (method, route, series) in snapshot {
            for (status, count) in series.statuses.sorted(by: { $0.status < $1.status }) {
                exposition.sample(Self.requestsName, [("method", method), ("route", route), ("status", String(status))], count)
            }
        }
        exposition.family(Self.durationsName, .histogram, help: Self.durationsHelp)
        for (method, route, series) in snapshot {
            series.durations.write(Self.durationsName, labels: [("method", method), ("route", route)], bounds: Self.bounds, to: &exposition)
        }
    }
}

/// A small number for the calling thread, handed out in turn on each thread's first call:
/// up to ``RequestMetrics/shardCount`` threads get shards of their own, where a hash of the
/// thread's id could put two workers in one.
private enum ThreadOrdinal {
    /// One key for the process, never deleted: keys are few (`PTHREAD_KEYS_MAX`).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key, nil)
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()
    private static let next = LockedValue<Int>(0)

    static var current: Int {
        // Stored plus one: a thread that has none yet reads 0.
        let stored = Int(bitPattern: pthread_getspecific(key))
        if stored != 0 { return stored - 1 }
        let ordinal = next.withLock { value in defer { value += 1 }; return value }
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: ordinal + 1))
        return ordinal
    }
}
