import LifecycleHTTP

/// Which web pages may use the service through a visitor's browser: its own (the dashboard),
/// and those of the origins named with `--cors-origin`.
///
/// Writes: a browser sends some requests of any page without asking the server first (a
/// form's POST, a `fetch` without a body or with a `text/plain` one), and a service without
/// a token would carry them out. So a write (any method but GET, HEAD, OPTIONS and TRACE)
/// whose `Origin` is neither the service's own nor listed is refused with 403 on its head,
/// before its body is read. The service's own origin is `http://` (or `https://`, behind a
/// proxy that ends TLS and passes `Host` on) followed by the request's `Host`. A write without
/// `Origin` is not from a page (curl, apps) and goes on; `Origin: null` (a sandboxed frame, a
/// `data:` or `file:` page) is no page's own and goes on only with `--cors-origin '*'`.
///
/// Reads: a page of another origin may send them, but without CORS its browser keeps it
/// from reading the answer. A request from a listed origin gets `Access-Control-Allow-Origin`
/// with that origin (and the headers a client needs exposed); its preflight (`OPTIONS`
/// with `Access-Control-Request-Method`) is answered 204 here, before authentication, since a
/// browser never sends credentials with one. A preflight from an origin not listed is 403.
/// Without `--cors-origin`, no CORS header is sent and a preflight is `OPTIONS` like any other.
struct CrossOrigin: Middleware {
    /// Exact origins (`https://qa.example.com`), or `*` for any; may be empty.
    let origins: [String]

    static let methods = "GET, HEAD, POST, PUT, DELETE"
    static let requestHeaders = "Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, Last-Event-ID, X-Request-ID"
    static let exposedHeaders = "ETag, Location, Retry-After, X-Request-ID"
    /// Seconds a browser may keep a preflight's answer.
    static let maxAge = "600"

    /// What `Access-Control-Allow-Origin` says to `origin`; `nil` when it is not listed.
    private func allowedOrigin(_ origin: String) -> String? {
        if origins.contains("*") { return "*" }
        return origins.contains(origin) ? origin : nil
    }

    /// Whether `origin` is the service's own: the one its `Host` makes, over http or https.
    static func isOwn(_ origin: String, host: String?) -> Bool {
        guard let host = host?.lowercased(), !host.isEmpty else { return false }
        let origin = origin.lowercased()
        return origin == "http://" + host || origin == "https://" + host
    }

    func admit(_ head: Request) -> Response? {
        guard let origin = head.header("origin") else { return nil }
        if !origins.isEmpty, head.method == "OPTIONS", head.header("access-control-request-method") != nil {
            guard allowedOrigin(origin) != nil else {
                // origin-not-allowed. The origins that are go unsaid: they are no stranger's business.
                return .problem(Problem(status: 403, title: "Forbidden", detail: "origin \(origin) is not allowed"))
            }
            // Allow-Origin and Vary are added in `reply`, as to any answer to a listed origin.
            return Response(status: 204, headers: [
                ("Access-Control-Allow-Methods", Self.methods), ("Access-Control-Allow-Headers", Self.requestHeaders),
                ("Access-Control-Max-Age", Self.maxAge),
            ])
        }
        guard !head.isSafe, allowedOrigin(origin) == nil, !Self.isOwn(origin, host: head.header("host")) else { return nil }
        // cross-origin-write
        return .problem(Problem(
            status: 403, title: "Forbidden",
            detail: "a page of origin \(origin) may not write here: lifecycled takes writes from its own pages and from origins named with --cors-origin; nothing was changed"
        ))
    }

    func finish(_ request: Request, _ response: inout Response) {
        guard !origins.isEmpty, let origin = request.header("origin") else { return }
        response.headers.append(("Vary", "Origin"))
        if let allowed = allowedOrigin(origin) {
            response.headers += [("Access-Control-Allow-Origin", allowed), ("Access-Control-Expose-Headers", Self.exposedHeaders)]
        }
    }
}
