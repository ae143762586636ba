import LifecycleHTTP

/// Bearer-token authentication (RFC 6750), decided on the request's head so that a refused
/// write's body is never read: every write needs `Authorization: Bearer <token>`, and with
/// `protectsReads` every other request does too, except the health checks probes call, the
/// dashboard's files (code, not data: the page must load before it can ask for the token,
/// and a browser cannot add a header to the scripts and styles a page names) and `OPTIONS`
/// (a CORS preflight never carries credentials).
///
/// An EventSource cannot send headers, so streams also take the token as a `token` query
/// parameter; nothing else does, so that a token is not pasted into URLs that end up in
/// histories and proxy logs. The access log writes route templates, never a
/// path or query, so the token is not logged.
struct Authentication: Middleware {
    private let token: [UInt8]
    let protectsReads: Bool

    init(token: String, protectsReads: Bool) {
        self.token = Array(token.utf8)
        self.protectsReads = protectsReads
    }

    /// Whether a route stays open to reads: the health check, the problem pages, and the dashboard's files. (This runs
    /// on every read: lengths, compared first, tell most templates from these without comparing
    /// text, which costs more between a long string and a short one than between two short ones.)
    static func isOpen(_ route: String?) -> Bool {
        guard let route else { return false }
        let length = route.utf8.count
        return openRoutes.contains { $0.utf8.count == length && $0 == route }
    }

    /// The route templates ``isOpen(_:)`` lets through: each one a route the service has.
    static let openRoutes = ["/healthz", "/problems/{kind}", Router.fallbackTemplate]

    /// What a request presents its token with.
    private enum Credential {
        /// A token in `Authorization: Bearer`, or in the query where the route takes one:
        /// whether it is the token.
        case presented(isToken: Bool)
        /// A `token` query parameter where the route does not take one.
        case misplacedQuery
        /// No token, or an `Authorization` of another scheme.
        case none
    }

    func admit(_ head: Request) -> Response? {
        guard needsToken(head) else { return nil }
        switch credential(of: head) {
        case .presented(let isToken):
            guard !isToken else { return nil }
            return Self.refusal("the token is not valid", error: "invalid_token")
        case .misplacedQuery:
            return Self.refusal("this request needs the token in Authorization: Bearer <token>; the token query parameter is taken only by streams", error: nil)
        case .none:
            let query = Self.takesQueryToken(head) ? " (or the token query parameter)" : ""
            return Self.refusal("this request needs the token: send Authorization: Bearer <token>\(query)", error: nil)
        }
    }

    /// Whether `presented` is the token, in time that depends on its length only, not on
    /// where it differs: an early exit would tell a guesser how much of a guess was right.
    /// (The length is not secret enough to hide at the cost of hashing on every request.)
    func isToken(_ presented: Substring) -> Bool {
        var presented = presented
        return presented.withUTF8(isToken)
    }

    private func isToken(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == token.count else { return false }
        return token.withUnsafeBufferPointer { token in
            var difference: UInt8 = 0
            for index in 0..<bytes.count { difference |= bytes[index] ^ token[index] }
            return difference == 0
        }
    }

    private func needsToken(_ head: Request) -> Bool {
        switch head.method {
        case "OPTIONS": false
        case "GET", "HEAD": protectsReads && !Self.isOpen(head.route)
        default: true
        }
    }

    /// Runs on every request that needs the token, so it reads the header's bytes in place
    /// (header names are already lowercased), without making strings or characters.
    private func credential(of head: Request) -> Credential {
        if var authorization = head.headers.first(where: { $0.name == "authorization" })?.value {
            return authorization.withUTF8 { value in
                // `Bearer` in any case (RFC 9110 §11.1), one or more spaces, the token.
                let space = UInt8(ascii: " ")
                guard value.count > Self.bearer.count, value[Self.bearer.count] == space, Self.isBearer(value) else { return .none }
                var start = Self.bearer.count
                while start < value.count, value[start] == space { start += 1 }
                return .presented(isToken: isToken(UnsafeBufferPointer(rebasing: value[start...])))
            }
        }
        guard let token = head.query("token") else { return .none }
        return Self.takesQueryToken(head) ? .presented(isToken: isToken(token[...])) : .misplacedQuery
    }

    private static let bearer: [UInt8] = Array("bearer".utf8)

    /// Whether a header's value starts with `bearer`, in any case (setting bit 5 lowercases
    /// a letter, and no other byte becomes one of these lowercase letters).
    private static func isBearer(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        bearer.withUnsafeBufferPointer { bearer in
            (0..<bearer.count).allSatisfy { value[$0] | 0x20 == bearer[$0] }
        }
    }

    /// Streams (route templates ending in `/stream`) take the token in the query.
    private static func takesQueryToken(_ head: Request) -> Bool {
        guard head.method == "GET" || head.method == "HEAD", let route = head.route else { return false }
        return route.hasSuffix("/stream")
    }

    /// 401 with `WWW-Authenticate: Bearer`, naming the error when a token was wrong
    /// (RFC 6750 §3; a request without one gets no error code).
    private static func refusal(_ detail: String, error: String?) -> Response {
        .problem(
            Problem(status: 401, title: "Unauthorized", detail: detail),
            headers: [("WWW-Authenticate", error.map { "Bearer error=\"\($0)\"" } ?? "Bearer")]
        )
    }
}

extension Authentication {
    /// The idempotency scope of requests made with `token`: a digest of it, domain-separated
    /// and shortened, so that what is stored with the keys cannot be used as the token.
    static func idempotencyScope(of token: String) -> String {
        let digest = SHA256.digest(Array("lifecycled idempotency scope\n\(token)".utf8))
        return "token:" + digest.prefix(8).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
