/// Answers a whole request: the router, or the router with middlewares around it.
public typealias Responder = @Sendable (Request) -> Reply

/// Something wrapped around the router for every request: authentication, rate limits,
/// request ids, metrics, access logs, response headers. Handlers stay plain functions that
/// know none of it.
///
/// A middleware acts at two moments:
/// - ``admit(_:)`` when the request's head has arrived, before any of its body is read, to
///   refuse it early (a missing token, a spent rate budget): its body is then never read.
/// - ``reply(to:next:)`` with the whole request, to pass it on to `next` (maybe changed) and
///   look at or change the response on the way back. A request refused at ``admit(_:)`` goes
///   through every middleware's `reply` too, with the refusal as what `next` answers, so it
///   is logged, counted and given its headers like any other.
///
/// Both have defaults that do nothing; a middleware implements what it needs.
public protocol Middleware: Sendable {
    /// A response refuses the request before its body is read. The request's body is empty
    /// here; its method, path, query, headers, client address and ``Request/route`` are set.
    func admit(_ head: Request) -> Response?
    /// Answers `request`, usually by calling `next`.
    func reply(to request: Request, next: Responder) -> Reply
}

extension Middleware {
    /// Admits every request.
    public func admit(_ head: Request) -> Response? { nil }
    /// Passes the request on unchanged.
    public func reply(to request: Request, next: Responder) -> Reply { next(request) }
}
