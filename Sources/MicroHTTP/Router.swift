/// A request handler: a plain function, testable without a socket.
public typealias Handler = @Sendable (Request) -> Response

/// Matches method and path to a handler. Paths are `/`-separated literals and
/// `{name}` captures. An unmatched path is 404 (or the fallback); a matched path
/// with another method is 405 with `Allow`.
public struct Router: Sendable {
    private struct Route: Sendable {
        var method: String
        var segments: [Segment]
        var handler: Handler
    }

    private enum Segment: Sendable {
        case literal([UInt8])
        case capture(String)
    }

    private var routes: [Route] = []
    /// Answers paths no route matches (static files, for instance).
    public var fallback: Handler = { request in
        .problem(Problem(status: 404, title: "Not Found", detail: "no resource at \(request.path)"))
    }

    public init() {}

    /// The order methods are listed in an `Allow` header.
    private static let methodOrder = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping Handler) {
        let segments = pattern.utf8.split(separator: UInt8(ascii: "/")).map { bytes -> Segment in
            if bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") {
                return .capture(String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self))
            }
            return .literal(Array(bytes))
        }
        routes.append(Route(method: method, segments: segments, handler: handler))
    }

    public mutating func get(_ pattern: String, _ handler: @escaping Handler) { add("GET", pattern, handler) }
    public mutating func post(_ pattern: String, _ handler: @escaping Handler) { add("POST", pattern, handler) }
    public mutating func put(_ pattern: String, _ handler: @escaping Handler) { add("PUT", pattern, handler) }
    public mutating func delete(_ pattern: String, _ handler: @escaping Handler) { add("DELETE", pattern, handler) }

    /// Routes a request and runs its handler.
    public func respond(to request: Request) -> Response {
        // Bytes, not Characters: routing runs on every request and paths are ASCII in practice.
        let segments = request.path.utf8.split(separator: UInt8(ascii: "/"))
        let method = request.method == "HEAD" ? "GET" : request.method
        var allowed: [String] = []
        for route in routes {
            guard let parameters = Self.match(route.segments, segments) else { continue }
            if route.method == method {
                var routed = request
                routed.parameters = parameters
                return route.handler(routed)
            }
            allowed.append(route.method)
        }
        if allowed.isEmpty { return fallback(request) }
        if allowed.contains("GET") { allowed.append("HEAD") }
        let allow = Self.methodOrder.filter(allowed.contains).joined(separator: ", ")
        return .problem(
            Problem(status: 405, title: "Method Not Allowed", detail: "\(request.method) is not allowed on \(request.path); allowed: \(allow)"),
            headers: [("Allow", allow)]
        )
    }

    private static func match(_ pattern: [Segment], _ path: [Substring.UTF8View]) -> [String: String]? {
        guard pattern.count == path.count else { return nil }
        for (p, s) in zip(pattern, path) {
            if case .literal(let bytes) = p, !bytes.elementsEqual(s) { return nil }
        }
        var parameters: [String: String] = [:]
        for (p, s) in zip(pattern, path) {
            if case .capture(let name) = p { parameters[name] = String(Substring(s)) }
        }
        return parameters
    }
}
