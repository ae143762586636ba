import LifecycleHTTP

/// The problems lifecycled answers with a type of their own, beyond their status.
enum ProblemKind: String, CaseIterable, Sendable {
    case unexpectedEvent = "unexpected-event"
    case createdInstanceDeleted = "created-instance-deleted"
    case replayedInstanceDeleted = "replayed-instance-deleted"
    case instanceLimit = "instance-limit"
    case storageFailing = "storage-failing"

    /// The problem's `type`: the path of its page.
    var type: String { ProblemTypes.uri(rawValue) }
}

/// The pages that `/problems/{kind}` answers: what each problem type means and what to do,
/// so that a problem's `type` resolves to its explanation (RFC 9457 §3.1.1).
enum ProblemPages {
    struct Page: Sendable {
        let status: Int
        let title: String
        let explanation: String
    }

    /// Every kind with a page: the status kinds of ``ProblemTypes`` and the ``ProblemKind``s.
    static let pages: [String: Page] = {
        var pages: [String: Page] = [:]
        for (status, kind) in ProblemTypes.kindsByStatus {
            pages[kind] = Page(status: status, title: ProblemTypes.title(forStatus: status), explanation: statusExplanations[status] ?? "")
        }
        for kind in ProblemKind.allCases { pages[kind.rawValue] = kindPages[kind] }
        return pages
    }()

    private static let kindPages: [ProblemKind: Page] = [
        .unexpectedEvent: Page(
            status: 409, title: "Unexpected Event",
            explanation: "The event is not expected in the state the instance's model is in: no transition row of that state matches it. It was recorded anyway (the record is in the problem's record member), counted in the instance's counters.unexpected and in /metrics, and logged. This is the referee's call: the app's code delivered a lifecycle callback its model does not allow there."
        ),
        .createdInstanceDeleted: Page(
            status: 409, title: "Conflict",
            explanation: "The request repeats a create (the same Idempotency-Key and request) whose instance has since been deleted; the instance member names it. Nothing was created again: re-creating would undo a deletion made on purpose. Use a new key to create it anew."
        ),
        .replayedInstanceDeleted: Page(
            status: 409, title: "Conflict",
            explanation: "The request repeats an input (an event, action, relaunch or gap, alone or as a batch item, with the same Idempotency-Key and request) that was applied to an instance since deleted; another instance has been made under its id, which the instance member names. Nothing was applied: the record the first request made went with the deleted instance, and applying the input anew would put a stale input on the new one. A reporter counts the input as answered and goes on."
        ),
        .instanceLimit: Page(
            status: 507, title: "Insufficient Storage",
            explanation: "lifecycled holds as many instances as --max-instances allows (the limit member). Nothing was created; deleting an instance makes room, or start the service with a higher --max-instances."
        ),
        .storageFailing: Page(
            status: 503, title: "Service Unavailable",
            explanation: "The store cannot commit writes (a full disk, an I/O error, damage, or an unreachable PostgreSQL) since failingSince; detail gives its reason. Writes are refused with 503 and Retry-After, nothing is lost that was acknowledged, and the service reports 200 again at the first write that commits (damage stays reported until a restart)."
        ),
    ]

    private static let statusExplanations: [Int: String] = [
        400: "The request is malformed: its JSON, a field, a query parameter, a header, an id in the path, or its framing. Nothing was changed; detail says what to fix.",
        401: "The server has a token and the request did not send it as Authorization: Bearer TOKEN (or ?token= on a stream), or sent a wrong one. Nothing was changed.",
        403: "The request is not allowed from where it came (for example a write from a web page of another origin). Nothing was changed.",
        404: "No such instance, model, scenario or resource.",
        405: "The resource exists but not for this method; the Allow header lists those it takes.",
        408: "The whole request did not arrive within --request-timeout.",
        409: "The request conflicts with what exists, for example an instance id that is taken.",
        412: "If-Match names no tag the instance matches: another write came first, or the instance was deleted and made again. Read the instance again and decide.",
        413: "The body is larger than --max-body.",
        414: "The request target is longer than the server accepts.",
        415: "A body that is not application/json.",
        421: "The Host header names a host this service does not answer for (a loopback service answers only loopback names and those given with --allowed-host).",
        422: "The request is well-formed but names something the model does not have (a model, event, action or parameter; detail suggests the closest name), carries a bad parameter, or reuses an Idempotency-Key for another request. Nothing was changed.",
        429: "The client sent more requests than --rate-limit allows; Retry-After says when to try again. Nothing was changed.",
        431: "The request's header block is larger than the server accepts.",
        500: "lifecycled could not do what the request asked because of an error of its own; detail and the service log say which. Nothing was changed.",
        501: "The request uses a feature the server does not support, such as a transfer coding other than chunked.",
        503: "The service cannot answer now: storage is failing, the server is stopping, or a limit is reached. Retry-After says when to try again; nothing was changed.",
        507: "The service holds as much as its limits allow.",
    ]

    /// `GET /problems/{kind}`: the page of one problem kind, as HTML.
    static func respond(_ request: Request) -> Response {
        let kind = request.parameters["kind"] ?? ""
        guard let page = pages[kind] else {
            return .problem(.notFound("no problem kind \"\(kind)\"; kinds: \(pages.keys.sorted().joined(separator: ", "))"))
        }
        let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(page.title)) (\(page.status)): lifecycled</title></head>
        <body><h1>\(escape(page.title))</h1>
        <p>Problem type <code>\(escape(ProblemTypes.uri(kind)))</code>, answered with status \(page.status).</p>
        <p>\(escape(page.explanation))</p>
        <p>Every problem is an RFC 9457 document: <code>detail</code> says what happened to this request.</p>
        </body></html>

        """
        return Response(status: 200, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "max-age=3600")], body: Array(html.utf8))
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
