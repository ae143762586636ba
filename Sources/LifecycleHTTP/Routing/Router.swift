import Foundation

/// Matches method and path to a handler. Paths are `/`-separated literals and
/// `{name}` captures. An unmatched path is 404 (or the fallback); a matched path
/// with another method is 405 with `Allow`.
public struct Router: Sendable {
    private struct Route: Sendable {
        var method: String
        var pattern: String
        var segments: [Segment]
        var handler: Target
    }

    private enum Target: Sendable {
        case now(Handler)
        case later(DeferredHandler)
    }

    private enum Segment: Sendable {
        case literal([UInt8])
        case capture(String)
    }

    private var routes: [Route] = []
    /// Answers paths no route matches (static files, for instance).
    public var fallback: Handler = { request in
        .notFound(request)
    }

    /// A router with no routes: every path goes to ``fallback``.
    public init() {}

    /// The order methods are listed in an `Allow` header.
    private static let methodOrder = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

    /// Adds a route whose handler answers at once, on the daemon thread.
    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping Handler) {
        add(method, pattern, target: .now(handler))
    }

    /// Adds a route whose handler responds later (see ``DeferredHandler``).
    public mutating func addDeferred(_ method: String, _ pattern: String, _ handler: @escaping DeferredHandler) {
        add(method, pattern, target: .later(handler))
    }

    private mutating func add(_ method: String, _ pattern: String, target: Target) {
        let segments = pattern.utf8.split(separator: UInt8(ascii: "/")).map { bytes -> Segment in
            if bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") {
                return .capture(String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self))
            }
            return .literal(Array(bytes))
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: target))
    }

    /// Adds a GET route (which also answers HEAD).
    public mutating func get(_ pattern: String, _ handler: @escaping Handler) { add("GET", pattern, handler) }

    /// Every route as (method, pattern), in the order added: for checking the API description.
    public var routeList: [(method: String, pattern: String)] {
        routes.map { ($0.method, $0.pattern) }
    }

    /// What ``Request/route`` names for paths that only the fallback serves.
    public static let fallbackTemplate = "*"

    /// What a request's method and path lead to.
    private enum Destination {
        /// The route at this index of ``routes``.
        case route(Int, parameters: [String: String])
        /// The path exists only under other methods: their patterns' first, and `Allow`.
        case otherMethods(pattern: String, allow: String)
        case fallback
    }

    /// Routing runs on every request: routes of the request's method are tried first, and
    /// the others (to name them in `Allow`) only when none of those matches.
    private func destination(of request: Request) -> Destination {
        let method = request.method == "HEAD" ? "GET" : request.method
        return Self.withBytes(of: request.path) { path -> Destination in
            // By index: a copy of each route tried would retain and release all it holds.
            for index in routes.indices where routes[index].method == method {
                if let parameters = Self.match(routes[index].segments, path) { return .route(index, parameters: parameters) }
            }
            let others = routes.filter { $0.method != method && Self.match($0.segments, path) != nil }
            guard let first = others.first else { return .fallback }
            var allowed = Set(others.map(\.method))
            if allowed.contains("GET") { allowed.insert("HEAD") }
            return .otherMethods(pattern: first.pattern, allow: Self.methodOrder.filter(allowed.contains).joined(separator: ", "))
        }
    }

    /// Routes a request whose head has arrived: sets ``Request/route`` to the pattern of the
    /// route its path matches (`/v1/instances/{id}`; also when only under another method;
    /// ``fallbackTemplate`` otherwise: few and fixed, so fit for metric labels and log lines,
    /// unlike paths) and, when a route of its method matches, its parameters, so that
    /// ``reply(to:)`` does not search again.
    public func resolve(_ request: inout Request) {
        switch destination(of: request) {
        case .route(let index, let parameters):
            request.route = routes[index].pattern
            request.parameters = parameters
            request.endpoint = index
        case .otherMethods(let pattern, _):
            request.route = pattern
        case .fallback:
            request.route = Self.fallbackTemplate
        }
    }

    /// Routes a request and runs (or, for a deferred handler, prepares) its handler. A path
    /// served under other methods only is 405 with `Allow`; an unmatched one goes to the
    /// fallback. HEAD is answered as GET would be, without the body (``Response/forHEAD()``).
    public func reply(to request: Request) -> Reply {
        let reply = route(request)
        return request.method == "HEAD" ? reply.map(()) { _, response in response.forHEAD() } : reply
    }

    private func route(_ request: Request) -> Reply {
        if let index = request.endpoint, routes.indices.contains(index) { return run(routes[index], request) }
        switch destination(of: request) {
        case .route(let index, let parameters):
            var routed = request
            routed.parameters = parameters
            return run(routes[index], routed)
        case .otherMethods(_, let allow):
            return .now(.methodNotAllowed(request, allow: allow))
        case .fallback:
            return .now(fallback(request))
        }
    }

    private func run(_ route: Route, _ request: Request) -> Reply {
        switch route.handler {
        case .now(let handler): .now(handler(request))
        case .later(let handler): .later { respond in handler(request, respond) }
        }
    }

    /// Routes a request and waits for its response.
    public func respond(to request: Request) -> Response { reply(to: request).wait() }

    private static func withBytes<T>(of path: String, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        var path = path
        return path.withUTF8(body)
    }

    /// Matches a path's bytes against a route's segments without splitting (routing runs
    /// on every request): first only whether it matches, then, for the route that does, its
    /// parameters, so that routes tried and missed make no dictionary. Empty segments are
    /// skipped, as `//` means `/`. Returns the captured parameters, or `nil`.
    private static func match(_ pattern: [Segment], _ bytes: UnsafeBufferPointer<UInt8>) -> [String: String]? {
        guard walk(pattern, bytes, capture: { _, _ in }) else { return nil }
        var parameters: [String: String] = [:]
        _ = walk(pattern, bytes) { name, range in
            parameters[name] = String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        return parameters
    }

    /// Whether `bytes` match `pattern`, calling `capture` with each capture's name and range.
    private static func walk(_ pattern: [Segment], _ bytes: UnsafeBufferPointer<UInt8>, capture: (String, Range<Int>) -> Void) -> Bool {
        var segmentIndex = 0
        var position = 0
        let slash = UInt8(ascii: "/")
        while position < bytes.count {
            if bytes[position] == slash {
                position += 1
                continue
            }
            var end = position
            while end < bytes.count, bytes[end] != slash { end += 1 }
            guard segmentIndex < pattern.count else { return false }
            switch pattern[segmentIndex] {
            case .literal(let literal):
                let isEqual = literal.count == end - position
                    && literal.withUnsafeBufferPointer { memcmp($0.baseAddress!, bytes.baseAddress! + position, literal.count) == 0 }
                guard isEqual else { return false }
            case .capture(let name):
                capture(name, position..<end)
            }
            segmentIndex += 1
            position = end
        }
        return segmentIndex == pattern.count
    }
}
