import Foundation
import LifecycleTestSupport
@testable import LifecycleService
@testable import LifecycleHTTP

/// Requests put straight through a running service's own ``Pipeline`` (its middlewares and
/// router, the very value its server answers with), without a socket: for the API tests
/// whose point is what the API answers, not the wire (as Hummingbird's `app.test(.router)`).
/// The request is parsed and admitted as the server does it (``RequestTarget``,
/// ``Pipeline/admit(_:)`` before the body, then ``Pipeline/reply(to:)``), and the answer is
/// returned as a ``WireClient`` would read it: without a body for HEAD, 204 and 304. What
/// only the wire has (framing, `Content-Length`, `Date`, keep-alive, streams) needs a
/// ``WireClient``.
struct RouterClient: APIClient {
    let server: TestServer
    /// The address the requests come from, as the server would take it from the socket.
    var clientAddress = "127.0.0.1"

    init(_ server: TestServer) {
        self.server = server
    }

    /// The running service's pipeline: after ``TestServer/restart()``, the new one's.
    var pipeline: Pipeline { server.service!.pipeline }

    /// Answers one request. Header names are sent lowercased, as the server hands them on;
    /// a body comes with `Content-Type` (unless `nil`) and `Content-Length`, as a client sends it.
    func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil, contentType: String? = "application/json"
    ) throws -> HTTPResponse {
        var fields = [("host", "127.0.0.1")] + headers.map { ($0.0.lowercased(), $0.1) }
        if let body {
            if let contentType { fields.append(("content-type", contentType)) }
            fields.append(("content-length", String(body.count)))
        }
        let parsed: RequestTarget
        do {
            parsed = try RequestTarget(Array(target.utf8))
        } catch {
            // The server's own refusal: the middlewares still see it (and log, count, head it).
            let refused = Request(method: method, path: "", headers: fields, clientAddress: clientAddress)
            return Self.answer(pipeline.refuse(refused, with: .problem(error)), method: method)
        }
        var request = Request(method: method, path: parsed.path, headers: fields, query: parsed.query, clientAddress: clientAddress)
        if let refusal = pipeline.admit(&request) { return Self.answer(refusal, method: method) }
        request.body = body ?? []
        return Self.answer(pipeline.reply(to: request).wait(), method: method)
    }

    private static func answer(_ response: Response, method: String) -> HTTPResponse {
        let sendsBody = method != "HEAD" && response.status != 204 && response.status != 304
        var body: [UInt8] = []
        switch response.body {
        case .bytes(let bytes): if sendsBody { body = bytes }
        case .omitted: break
        case .stream(let stream):
            // A stream never ends on its own: it is the wire's to read (``EventStream``).
            stream.finish()
            preconditionFailure("\(method) answered with a stream; read it with EventStream over a WireClient")
        }
        return HTTPResponse(status: response.status, headers: response.headers, body: body)
    }
}
