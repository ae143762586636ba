import Dispatch
import MicroHTTP

/// Counts every answer by method, route template and status, and times it by method and
/// route, for `/metrics`. Labels come from ``Request/route`` (never the path, which carries ids)
/// and from a fixed list of methods, so the series are as few as the routes. Refusals (at
/// admission, or the server's own) pass through here too and are counted.
final class RequestMetrics: Middleware {
    let requests = CounterFamily(
        "lifecycled_http_requests_total", labels: ["method", "route", "status"],
        help: "Requests answered since the process started, by method, route template (* for static files, - for requests the server refused before routing) and status."
    )
    let durations = HistogramFamily(
        "lifecycled_http_request_duration_seconds", labels: ["method", "route"],
        bounds: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
        help: "Time from a whole request to its response (a stream's: to its start), by method and route template, since the process started."
    )

    /// Methods named in labels as they are; any other is `other`, so a client cannot add series.
    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    func reply(to request: Request, next: Responder) -> Reply {
        let started = DispatchTime.now().uptimeNanoseconds
        return next(request).map { [requests, durations] response in
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            let method = Self.methods.contains(request.method) ? request.method : "other"
            let route = request.route ?? Pipeline.refusedTemplate
            requests.increment([method, route, String(response.status)])
            durations.observe(seconds, [method, route])
            return response
        }
    }

    func write(to exposition: inout Exposition) {
        requests.write(to: &exposition)
        durations.write(to: &exposition)
    }
}
