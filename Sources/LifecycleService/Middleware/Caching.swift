import LifecycleHTTP

/// What caches may do with an answer, and conditional GETs answered the one way for every
/// route that sends an `ETag` (an instance, a model's graphs, static files).
///
/// Every answer says whether it may be kept: with an `ETag`, `no-cache` (kept, but asked
/// about each time, since an instance moves on and a model may be defined otherwise after a
/// restart); without one, `no-store` (live state that a cache would otherwise assign a
/// freshness of its own). An answer that chose its own (the dashboard's files, the streams)
/// keeps it. A GET or HEAD whose `If-None-Match` names the answer's `ETag` (weak comparison,
/// RFC 9110 §13.1.2) is answered 304 without a body.
struct Caching: Middleware {
    func finish(_ request: Request, _ response: inout Response) {
        // As the service spells them (this runs on every answer: no lowercasing).
        let etag = response.headers.first { $0.name == "ETag" }?.value
        if !response.headers.contains(where: { $0.name == "Cache-Control" }) {
            response.headers.append(("Cache-Control", etag == nil ? "no-store" : "no-cache"))
        }
        guard let etag, response.status == 200, request.method == "GET" || request.method == "HEAD",
              let tags = request.header("if-none-match"), let body = response.body.bytes, Request.ifNoneMatch(tags, names: etag)
        else { return }
        // What a 304 carries (RFC 9110 §15.4.5): everything the 200 would, but for the body's own type.
        response = .notModified(headers: response.headers.filter { $0.name != "Content-Type" }, body: body)
    }
}
