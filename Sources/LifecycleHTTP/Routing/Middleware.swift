/// Something wrapped around the router for every request: authentication, rate limits,
/// request ids, metrics, access logs, response headers. Handlers stay plain functions that
/// know none of it.
///
/// A middleware acts at three moments:
/// - ``admit(_:)`` when the request's head has arrived, before any of its body is read, to
///   refuse it early (a missing token, a spent rate budget): its body is then never read.
/// - ``prepare(_:)`` with the whole request, before the router, in the middlewares' order
///   (outermost first), to change it (its id).
/// - ``finish(_:_:)`` with the request as every middleware prepared it and its response, in the
///   reverse order, to look at the response or change it. For a handler that answers later,
///   this runs on the connection's thread once the answer has come, not on the thread that
///   answered. It may change the response's status, headers and body, but not make a body
///   held in memory a stream or the other way round (the connection has decided how to send
///   it by then).
///
/// A request refused at ``admit(_:)``, or by the server itself, is prepared and finished too,
/// with the refusal as its response, so it is logged, counted and given its headers like any other.
///
/// Each is one call on one request and one response for all the middlewares, rather than a
/// chain of closures each copying both. All three have defaults that do nothing; a middleware
/// implements what it needs.
public protocol Middleware: Sendable {
    /// A response refuses the request before its body is read. The request's body is empty
    /// here; its method, path, query, headers, client address and ``Request/route`` are set.
    func admit(_ head: Request) -> Response?
    /// Changes the request before the router (and the middlewares after this one) see it.
    func prepare(_ request: inout Request)
    /// Looks at or changes the response to `request` on its way out.
    func finish(_ request: Request, _ response: inout Response)
}

extension Middleware {
    /// Admits every request.
    public func admit(_ head: Request) -> Response? { nil }
    /// Leaves the request as it is.
    public func prepare(_ request: inout Request) {}
    /// Leaves the response as it is.
    public func finish(_ request: Request, _ response: inout Response) {}
}
