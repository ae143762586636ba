/// The `type` of a problem that says no more than its status: a relative reference,
/// `/problems/<kind>` (RFC 9457 §3.1.1 allows one), that the service answers with a page
/// explaining the kind, so that every problem a client gets leads to its explanation.
public enum ProblemTypes {
    /// The kind named for each status the server answers with a problem of its own.
    public static let kindsByStatus: [Int: String] = [
        400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
        405: "method-not-allowed", 408: "request-timeout", 409: "conflict",
        412: "precondition-failed", 413: "content-too-large", 414: "uri-too-long",
        415: "unsupported-media-type", 421: "misdirected-request", 422: "unprocessable-content",
        429: "too-many-requests", 431: "header-fields-too-large", 500: "internal-error",
        501: "not-implemented", 503: "unavailable", 507: "insufficient-storage",
    ]

    /// The status's reason phrase, as a problem's title.
    public static func title(forStatus status: Int) -> String { LibraryMessages.reasonPhrase(status) }

    /// The path of the page that explains `kind`.
    public static func uri(_ kind: String) -> String { "/problems/" + kind }

    /// The type of a problem that has no kind of its own beyond its status: that status's
    /// page, or `about:blank` for a status no page explains.
    public static func uri(forStatus status: Int) -> String {
        kindsByStatus[status].map(uri) ?? "about:blank"
    }
}
