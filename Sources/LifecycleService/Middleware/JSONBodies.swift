import LifecycleHTTP

/// Every body the API takes is a JSON object, so a write with a body of another type, or
/// of none named, is refused with 415 on its head, before the body is read. This also keeps
/// pages of other sites from sending one without their browser asking the service first:
/// a form's body or a `text/plain` one never needs a preflight, a JSON one always does.
struct JSONBodies: Middleware {
    func admit(_ head: Request) -> Response? {
        guard !head.isSafe, head.hasBody, head.mediaType != "application/json" else { return nil }
        // unsupported-media-type
        return .problem(.unsupportedMediaType("send the body as application/json (got \(head.header("content-type") ?? "no Content-Type")); nothing was changed"))
    }
}
