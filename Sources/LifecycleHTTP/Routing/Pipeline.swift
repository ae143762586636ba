import Dispatch

/// The router with its middlewares, outermost first: what the server runs for each request.
public struct Pipeline: Sendable {
    private let router: Router
    private let middlewares: [any Middleware]

    /// `middlewares` run outermost first around `router`.
    public init(router: Router, middlewares: [any Middleware] = []) {
        self.router = router
        self.middlewares = middlewares
    }

    /// Routes a request whose head has arrived (setting ``Request/route``) and asks each
    /// middleware, in order, whether to admit it. Returns the first refusal, after it has gone
    /// through every middleware; `nil` to read the body and go on.
    public func admit(_ head: inout Request) -> Response? {
        router.resolve(&head)
        // By index, here and below: a `for in` copies each middleware out of the array
        // (through its existential's value witness), where this calls it in place.
        for index in middlewares.indices {
            if let refusal = middlewares[index].admit(head) { return answer(head, with: refusal) }
        }
        return nil
    }

    /// What the route template of a request the server refused itself reads (a malformed
    /// target, a body over the limit, the server stopping): it was never routed.
    public static let refusedTemplate = "-"

    /// The server's own refusal of a request, through every middleware, so it is logged and
    /// counted like any other answer.
    public func refuse(_ request: Request, with response: Response) -> Response {
        var request = request
        request.route = Self.refusedTemplate
        return answer(request, with: response)
    }

    private func answer(_ request: Request, with response: Response) -> Response {
        var request = request
        prepare(&request)
        var response = response
        finish(request, &response)
        return response
    }

    /// Starts answering a whole request: the middlewares prepare it (in order), then the
    /// router answers it. The reply is the router's: what it answers, now or later, still goes
    /// through ``finish(_:_:)`` with `request` as it is after this call.
    public func start(_ request: inout Request) -> Reply {
        if request.route == nil { router.resolve(&request) }
        prepare(&request)
        return router.reply(to: request)
    }

    /// The middlewares' work on a response on its way out, innermost first.
    public func finish(_ request: Request, _ response: inout Response) {
        var index = middlewares.endIndex
        while index > middlewares.startIndex {
            index -= 1
            middlewares[index].finish(request, &response)
        }
    }

    private func prepare(_ request: inout Request) {
        request.received = DispatchTime.now().uptimeNanoseconds
        for index in middlewares.indices { middlewares[index].prepare(&request) }
    }

    /// Answers a whole request through the middlewares and the router, for callers without a
    /// connection (tests): a later answer is finished on the thread that answers.
    public func reply(to request: Request) -> Reply {
        var request = request
        switch start(&request) {
        case .now(var response):
            finish(request, &response)
            return .now(response)
        case .later(let begin):
            return .later { [self, request] respond in
                begin { response in
                    var response = response
                    finish(request, &response)
                    respond(response)
                }
            }
        }
    }
}
