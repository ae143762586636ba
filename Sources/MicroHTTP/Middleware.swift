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
    public func admit(_ head: Request) -> Response? { nil }
    public func reply(to request: Request, next: Responder) -> Reply { next(request) }
}

extension Reply {
    /// The same reply with `transform` applied to its response, whenever that comes.
    ///
    /// What the transform needs is passed as `context` rather than captured: a closure that
    /// captures nothing costs no allocation, so a response that is there at once (most are)
    /// costs each middleware a plain call, where a capturing closure would be allocated and
    /// freed on every request. (Inlinable, so that it is specialized for each context.)
    @inlinable
    public func map<Context: Sendable>(_ context: Context, _ transform: @escaping @Sendable (Context, Response) -> Response) -> Reply {
        switch self {
        case .now(let response):
            .now(transform(context, response))
        case .later(let start):
            .later { respond in start { respond(transform(context, $0)) } }
        }
    }
}

/// The router with its middlewares, outermost first: what the server runs for each request.
public struct Pipeline: Sendable {
    private let router: Router
    private let middlewares: [any Middleware]
    /// The middlewares around the router, built once rather than per request.
    private let chain: Responder

    public init(router: Router, middlewares: [any Middleware] = []) {
        self.router = router
        self.middlewares = middlewares
        chain = Self.wrap(middlewares[...]) { [router] in router.reply(to: $0) }
    }

    private static func wrap(_ middlewares: ArraySlice<any Middleware>, around inner: @escaping Responder) -> Responder {
        middlewares.reversed().reduce(inner) { next, middleware in
            { request in middleware.reply(to: request, next: next) }
        }
    }

    /// Routes a request whose head has arrived (setting ``Request/route``) and asks each
    /// middleware, in order, whether to admit it. Returns the first refusal, after it has gone
    /// through every middleware's `reply`; `nil` to read the body and go on.
    public func admit(_ head: inout Request) -> Response? {
        router.resolve(&head)
        for middleware in middlewares {
            if let refusal = middleware.admit(head) { return answer(head, with: refusal) }
        }
        return nil
    }

    /// What the route template of a request the server refused itself reads (a malformed
    /// target, a body over the limit, the server stopping): it was never routed.
    public static let refusedTemplate = "-"

    /// The server's own refusal of a request, through every middleware's `reply`, so it is
    /// logged and counted like any other answer.
    public func refuse(_ request: Request, with response: Response) -> Response {
        var request = request
        request.route = Self.refusedTemplate
        return answer(request, with: response)
    }

    private func answer(_ request: Request, with response: Response) -> Response {
        Self.wrap(middlewares[...]) { _ in .now(response) }(request).wait()
    }

    /// Answers a whole request through the middlewares and the router.
    public func reply(to request: Request) -> Reply {
        var request = request
        if request.route == nil { router.resolve(&request) }
        return chain(request)
    }
}
