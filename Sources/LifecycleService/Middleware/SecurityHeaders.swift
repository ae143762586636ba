import LifecycleHTTP

/// Headers that keep a browser from misusing what it is sent: the dashboard runs only its
/// own scripts (no inline script, nothing from elsewhere), no type is guessed, no referrer
/// leaks, and no other site frames the page. All of them on the dashboard and static files
/// (what a browser renders); on API answers, which a browser only shows as text, the one
/// that stops it from guessing a type, so that every request does not pay for four.
struct SecurityHeaders: Middleware {
    static let apiHeader = (name: "X-Content-Type-Options", value: "nosniff")

    static let headers: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
    ]

    func finish(_ request: Request, _ response: inout Response) {
        // One header appended as such on an API answer: appending an array of them
        // copies each through the generic path.
        if request.route == Router.fallbackTemplate { response.headers += Self.headers } else { response.headers.append(Self.apiHeader) }
    }
}
