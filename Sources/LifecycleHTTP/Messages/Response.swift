import Foundation

/// An HTTP response: status, headers and a body, held in memory or written over time.
public struct Response: Sendable {
    /// The status code, sent with libmicrohttpd's reason phrase.
    public var status: Int
    /// Header fields in the order sent; the server adds `Date`, `Content-Length` and the framing.
    public var headers: [(name: String, value: String)]
    /// What follows the head.
    public var body: Body

    /// What follows the headers.
    public enum Body: Sendable {
        /// Bytes held in memory, sent with `Content-Length`.
        case bytes([UInt8])
        /// Bytes written over time (a chunked body for HTTP/1.1 clients); the connection
        /// holds no thread while the stream has nothing to send.
        case stream(any ResponseStream)
        /// None, and no length announced: the answer to a HEAD request whose GET would be
        /// streamed (see ``Response/forHEAD()``).
        case omitted

        /// The bytes of a body held in memory; `nil` for a stream.
        public var bytes: [UInt8]? {
            if case .bytes(let bytes) = self { return bytes }
            return nil
        }
    }

    /// A response whose body is held in memory.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        // Room for what the middlewares add (cache policy, nosniff, request id), so that
        // their appends do not grow the array twice.
        self.headers.reserveCapacity(headers.count + 4)
        self.body = .bytes(body)
    }

    /// A response whose body is written over time by `stream` (see ``ResponseStream``).
    public init(status: Int, headers: [(name: String, value: String)] = [], stream: any ResponseStream) {
        self.status = status
        self.headers = headers
        self.body = .stream(stream)
    }

    /// This response as the answer to a HEAD request, which has no body (RFC 9110 §9.3.2): a
    /// streamed body is finished before it starts. (A body held in memory stays, since
    /// libmicrohttpd sends its length for a HEAD request, and not the body itself.)
    public func forHEAD() -> Response {
        guard case .stream(let stream) = body else { return self }
        stream.start(waker: StreamWaker {})
        stream.finish()
        var answer = self
        answer.body = .omitted
        return answer
    }

    /// A JSON body encoded from a value.
    public static func json<T: Encodable>(_ value: T, status: Int = 200, headers: [(name: String, value: String)] = []) -> Response {
        do {
            return Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: try JSON.encode(value))
        } catch {
            return .problem(Problem(status: 500, title: "Internal Server Error", detail: "response could not be encoded: \(error)"))
        }
    }

    /// 304 for a representation whose 200 would carry `body`. libmicrohttpd sends no body
    /// with a 304 but states the length of the one it is given, which must then be the full
    /// answer's (RFC 9110 §8.6): so the body goes in, and is not sent.
    public static func notModified(headers: [(name: String, value: String)], body: [UInt8]) -> Response {
        Response(status: 304, headers: headers, body: body)
    }

    /// An RFC 9457 problem body.
    public static func problem(_ problem: Problem, headers: [(name: String, value: String)] = []) -> Response {
        Response(status: problem.status, headers: [("Content-Type", "application/problem+json")] + headers, body: problem.json)
    }

    /// 404 for a path nothing serves.
    public static func notFound(_ request: Request) -> Response {
        .problem(Problem(status: 404, title: "Not Found", detail: "no resource at \(request.path)"))
    }

    /// 405 naming, in `Allow`, the methods the path does serve.
    public static func methodNotAllowed(_ request: Request, allow: String) -> Response {
        .problem(
            Problem(status: 405, title: "Method Not Allowed", detail: "\(request.method) is not allowed on \(request.path); allowed: \(allow)"),
            headers: [("Allow", allow)]
        )
    }

    /// A text body, UTF-8.
    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }
}
