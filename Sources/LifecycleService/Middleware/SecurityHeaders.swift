import MicroHTTP

/// Headers that keep a browser from misusing what it is sent: the dashboard runs only its
/// own scripts (no inline script, nothing from elsewhere), no type is guessed, no referrer
/// leaks, and no other site frames the page. Sent on every answer, API bodies included,
/// since any of them may be opened in a browser.
struct SecurityHeaders: Middleware {
    static let headers: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
    ]

    func reply(to request: Request, next: Responder) -> Reply {
        next(request).map { response in
            var response = response
            response.headers += Self.headers
            return response
        }
    }
}
