import MicroHTTP

/// CORS for the origins named with `--cors-origin`, and for no other: without it the
/// service sends no CORS header, so browsers keep pages of other sites from reading or
/// writing through a visitor's browser.
///
/// A request from a listed origin gets `Access-Control-Allow-Origin` with that origin (and
/// the headers a client needs exposed); its preflight (`OPTIONS` with
/// `Access-Control-Request-Method`) is answered 204 here, before authentication, since a
/// browser never sends credentials with one. A preflight from an origin not listed is 403.
struct CrossOrigin: Middleware {
    /// Exact origins (`https://qa.example.com`), or `*` for any.
    let origins: [String]

    static let methods = "GET, HEAD, POST, PUT, DELETE"
    static let requestHeaders = "Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, Last-Event-ID, X-Request-ID"
    static let exposedHeaders = "ETag, Location, Retry-After, X-Request-ID"
    /// Seconds a browser may keep a preflight's answer.
    static let maxAge = "600"

    private func allowedOrigin(_ origin: String) -> String? {
        if origins.contains("*") { return "*" }
        return origins.contains(origin) ? origin : nil
    }

    func reply(to request: Request, next: Responder) -> Reply {
        guard let origin = request.header("origin") else { return next(request) }
        let allowed = allowedOrigin(origin)
        if request.method == "OPTIONS", request.header("access-control-request-method") != nil {
            guard let allowed else {
                return .now(.problem(
                    Problem(status: 403, title: "Forbidden", detail: "origin \(origin) is not allowed; lifecycled allows \(origins.joined(separator: ", "))"),
                    headers: [("Vary", "Origin")]
                ))
            }
            return .now(Response(status: 204, headers: [
                ("Access-Control-Allow-Origin", allowed), ("Access-Control-Allow-Methods", Self.methods),
                ("Access-Control-Allow-Headers", Self.requestHeaders), ("Access-Control-Max-Age", Self.maxAge), ("Vary", "Origin"),
            ]))
        }
        return next(request).map(allowed) { allowed, response in
            var response = response
            response.headers.append(("Vary", "Origin"))
            if let allowed {
                response.headers += [("Access-Control-Allow-Origin", allowed), ("Access-Control-Expose-Headers", Self.exposedHeaders)]
            }
            return response
        }
    }
}
