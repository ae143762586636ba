import Foundation
import LifecycleGraph
import LifecycleKit
import LifecycleLog
import LifecycleHTTP
import LifecycleLocks

/// `GET /v1/models/{model}/graph.dot` and `graph.svg`: each model's transition graph.
///
/// A model cannot change while the service runs, so each document is made once: the DOT
/// text when the router is made (pure and cheap: about 1 ms for both built-in models in a
/// debug build), the SVG by Graphviz on a queue of its own, one drawing at a time, never on
/// an HTTP thread. Graphviz's layout cannot be interrupted, and its time grows far faster
/// than the graph (random models: 45 states and 120 rows 3.4 s, 60 and 162 39 s; 400 and
/// 3,635 ran past 4 minutes at 930 MB), so:
/// - a model of more than ``Limits/maxElements`` states and rows is never drawn: 422 at once;
/// - a request waits for its model's drawing at most ``Limits/wait`` seconds, holding no
///   thread (the handler is deferred), then gets 503 with `Retry-After`; once a drawing has
///   run longer than that, or a request has waited that long for it, requests get the 503 at
///   once (a drawing queued behind another, or started late on a busy machine, has not run
///   that long yet when its first request gives up);
/// - what a drawing ends with, a failure too, is kept and answered from then on.
///
/// The built-in models are drawn at start, which start-up does not wait for (the first
/// drawing loads Graphviz's plugins, 30 to 370 ms measured; each later built-in takes 1 to
/// 5 ms); a model file's on its first request. Each document carries an ETag naming its
/// bytes; `If-None-Match` with it is answered 304 (by ``Caching``).
final class ModelGraphs: Sendable {
    /// A document and its entity tag.
    struct Document: Sendable {
        let body: [UInt8]
        let etag: String

        init(_ body: [UInt8]) {
            self.body = body
            etag = "\"" + SHA256.digest(body).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
        }
    }

    /// What bounds the drawings (`--graph-max-size`, `--graph-wait`).
    struct Limits: Sendable {
        /// States plus rows of the largest model drawn.
        var maxElements = 150
        /// Seconds a request waits for its model's drawing.
        var wait = 2.0
    }

    /// What a request for a model's SVG gets while its drawing is not done.
    private typealias Waiter = @Sendable (Result<Document, Problem>) -> Void

    /// Where a model's SVG is.
    private enum Drawing {
        /// A model file's, until it is first asked for.
        case unrequested
        /// Queued, or under way since `started` (uptime nanoseconds); its waiting requests by ticket;
        /// `outlasted` once a request has waited the whole wait for it.
        case pending(started: UInt64?, waiting: [Int: Waiter], outlasted: Bool)
        case done(Result<Document, Problem>)
    }

    private struct State {
        var drawings: [String: Drawing]
        var nextTicket = 0
    }

    private let dots: [String: Document]
    private let limits: Limits
    private let state: LockedValue<State>
    /// The drawing thread: Graphviz draws one graph at a time in a process anyway.
    private let queue = DispatchQueue(label: "lifecycled.graphs", qos: .utility)
    private let logger: LineLogger

    init(models: [String: Model], limits: Limits = Limits(), logger: LineLogger) {
        dots = models.mapValues { Document(Array($0.dot.utf8)) }
        self.limits = limits
        self.logger = logger
        var drawings: [String: Drawing] = [:]
        var drawnAtStart: [String] = []
        for (name, model) in models {
            let states = model.definition.states.count, rows = model.definition.transitions.count
            if states + rows > limits.maxElements {
                logger.warning("graph not drawn: model too large", [
                    "model": name, "states": String(states), "rows": String(rows), "limit": String(limits.maxElements),
                ])
                drawings[name] = .done(.failure(.unprocessable(
                    "model \"\(name)\" is too large to draw: \(states) states and \(rows) rows, more than \(limits.maxElements) in all (--graph-max-size); graph.dot has its graph"
                )))
            } else if Model.builtins[name] != nil {
                drawings[name] = .pending(started: nil, waiting: [:], outlasted: false)
                drawnAtStart.append(name)
            } else {
                drawings[name] = .unrequested
            }
        }
        state = LockedValue(State(drawings: drawings))
        for name in drawnAtStart.sorted() { queue.async { self.draw(name) } }
    }

    func dot(_ request: Request) throws(Problem) -> Response {
        let name = request.parameters["model"] ?? ""
        guard let dot = dots[name] else { throw .notFound("no model \"\(name)\"") }
        return Self.answer(dot, contentType: "text/vnd.graphviz; charset=utf-8")
    }

    func svg(_ request: Request, respond: @escaping @Sendable (Response) -> Void) {
        let name = request.parameters["model"] ?? ""
        guard dots[name] != nil else { return respond(.problem(.notFound("no model \"\(name)\""))) }
        let waiter: Waiter = { [wait = limits.wait] result in respond(Self.answer(result, wait: wait)) }
        enum Next { case answer(Result<Document, Problem>), wait(ticket: Int, draw: Bool) }
        let now = DispatchTime.now().uptimeNanoseconds
        let next = state.withLock { state -> Next in
            var waiting: [Int: Waiter] = [:]
            var started: UInt64?
            switch state.drawings[name] {
            case .done(let result)?:
                return .answer(result)
            case .pending(let since, let others, let outlasted)?:
                // (`since` may be a moment after `now`, read before the lock.)
                if outlasted { return .answer(.failure(inProgress(name))) }
                if let since, now > since, now - since > UInt64(limits.wait * 1e9) { return .answer(.failure(inProgress(name))) }
                (started, waiting) = (since, others)
            case .unrequested?, nil:
                break
            }
            let ticket = state.nextTicket
            state.nextTicket += 1
            waiting[ticket] = waiter
            let draw = if case .unrequested? = state.drawings[name] { true } else { false }
            state.drawings[name] = .pending(started: started, waiting: waiting, outlasted: false)
            return .wait(ticket: ticket, draw: draw)
        }
        switch next {
        case .answer(let result):
            waiter(result)
        case .wait(let ticket, let draw):
            if draw { queue.async { self.draw(name) } }
            DispatchQueue.global().asyncAfter(deadline: .now() + limits.wait) { self.stopWaiting(ticket, for: name) }
        }
    }

    /// The request `ticket` still waiting for `name`'s drawing gets 503.
    private func stopWaiting(_ ticket: Int, for name: String) {
        let waiter = state.withLock { state -> Waiter? in
            guard case .pending(let started, var waiting, _) = state.drawings[name], let waiter = waiting.removeValue(forKey: ticket) else { return nil }
            state.drawings[name] = .pending(started: started, waiting: waiting, outlasted: true)
            return waiter
        }
        waiter?(.failure(inProgress(name)))
    }

    /// Draws `name`'s graph, on ``queue``, keeps the result and answers those waiting for it.
    private func draw(_ name: String) {
        let started = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            if case .pending(nil, let waiting, let outlasted) = state.drawings[name] {
                state.drawings[name] = .pending(started: started, waiting: waiting, outlasted: outlasted)
            }
        }
        let result: Result<Document, Problem>
        do throws(GraphvizError) {
            let svg = Document(try Graphviz.svg(fromDOT: String(decoding: dots[name]!.body, as: UTF8.self)))
            logger.info("graph drawn", [
                "model": name, "bytes": String(svg.body.count),
                "millis": String(format: "%.1f", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6),
            ])
            result = .success(svg)
        } catch {
            logger.error("graph not drawn", ["model": name, "reason": error.description])
            result = .failure(.internalError("the graph of model \"\(name)\" could not be drawn: \(error.description)"))
        }
        let waiting = state.withLock { state -> [Waiter] in
            defer { state.drawings[name] = .done(result) }
            guard case .pending(_, let waiting, _) = state.drawings[name] else { return [] }
            return Array(waiting.values)
        }
        for waiter in waiting { waiter(result) }
    }

    /// 503 drawing-in-progress: the drawing has not ended within the wait.
    private func inProgress(_ name: String) -> Problem {
        Problem(
            status: 503, title: "Service Unavailable",
            detail: "the graph of model \"\(name)\" is still being drawn; retry in \(Self.retryAfter(limits.wait)) s"
        )
    }

    private static func retryAfter(_ wait: Double) -> Int { max(1, Int(wait.rounded(.up))) }

    private static func answer(_ result: Result<Document, Problem>, wait: Double) -> Response {
        switch result {
        case .success(let svg): answer(svg, contentType: "image/svg+xml")
        case .failure(let problem) where problem.status == 503: .problem(problem, headers: [("Retry-After", String(retryAfter(wait)))])
        case .failure(let problem): .problem(problem)
        }
    }

    /// 200 with the document and its tag (``Caching`` answers a matching `If-None-Match`).
    private static func answer(_ document: Document, contentType: String) -> Response {
        Response(status: 200, headers: [("Content-Type", contentType), ("ETag", document.etag)], body: document.body)
    }
}
