import Dispatch
import MicroHTTP
import Synchronization

/// Counts every answer by method, route template and status, and times it by method and
/// route, for `/metrics`. Labels come from ``Request/route`` (never the path, which carries ids)
/// and from a fixed list of methods, so the series are as few as the routes. Refusals (at
/// admission, or the server's own) pass through here too and are counted.
///
/// It runs on every request, so it costs one lock and one hash of the route per answer: the
/// counts by status and the latency histogram of a method and route sit in one entry.
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
    }

    /// Methods named in labels as they are; any other is `other`, so a client cannot add series.
    private static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"]

    private struct Series {
        var statuses: [Int: UInt64] = [:]
        var durations = HistogramFamily.Series(bounds: RequestMetrics.bounds)

        mutating func record(status: Int, seconds: Double, bucket: Int) {
            statuses[status, default: 0] += 1
            durations.record(seconds, in: bucket)
        }
    }

    private let series = Mutex<[Key: Series]>([:])

    /// Where a method is in ``methods``.
    private static func index(of method: String) -> UInt8 {
        UInt8(methods.firstIndex(of: method) ?? methods.count - 1)
    }

    func reply(to request: Request, next: Responder) -> Reply {
        let started = DispatchTime.now().uptimeNanoseconds
        let key = Key(method: Self.index(of: request.method), route: request.route ?? Pipeline.refusedTemplate)
        return next(request).map((self, key, started)) { context, response in
            let (metrics, key, started) = context
            metrics.record(key, status: response.status, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
            return response
        }
    }

    private func record(_ key: Key, status: Int, seconds: Double) {
        let bucket = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        series.withLock { series in
            series[key, default: Series()].record(status: status, seconds: seconds, bucket: bucket)
        }
    }

    func write(to exposition: inout Exposition) {
        let snapshot = series.withLock { $0 }.map { (method: Self.methods[Int($0.key.method)], route: $0.key.route, series: $0.value) }
            .sorted { ($0.method, $0.route) < ($1.method, $1.route) }
        exposition.family(Self.requestsName, .counter, help: Self.requestsHelp)
        for (method, route, series) in snapshot {
            for (status, count) in series.statuses.sorted(by: { $0.key < $1.key }) {
                exposition.sample(Self.requestsName, [("method", method), ("route", route), ("status", String(status))], count)
            }
        }
        exposition.family(Self.durationsName, .histogram, help: Self.durationsHelp)
        for (method, route, series) in snapshot {
            series.durations.write(Self.durationsName, labels: [("method", method), ("route", route)], bounds: Self.bounds, to: &exposition)
        }
    }
}
