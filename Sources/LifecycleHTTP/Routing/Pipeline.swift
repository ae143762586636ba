/// The router with its middlewares, outermost first: what the server runs for each request.
public struct Pipeline: Sendable {
    private let router: Router
    private let middlewares: [any Middleware]
    /// The middlewares around the router, built once rather than per request.
    private let chain: Responder

    /// `middlewares` run outermost first around `router`.
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
