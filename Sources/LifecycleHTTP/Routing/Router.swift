import Foundation

/// Matches method and path to a handler. Paths are `/`-separated literals and
/// `{name}` captures. An unmatched path is 404 (or the fallback); a matched path
/// with another method is 405 with `Allow`.
///
/// The routes are kept as a table, rebuilt as each is added (at start, never per request): a
/// trie of the patterns' segments, each node holding, for each ``HTTPMethod``, the first route
/// added that ends there. A request walks the trie over its path's bytes once, allocating
/// nothing, and finds both the route of its method and every method its path is served under.
public struct Router: Sendable {
    private struct Route: Sendable {
        var method: HTTPMethod
        var pattern: String
        var segments: [Segment]
        var handler: Target
        /// Whether any segment is a capture: a route without (most) makes no parameters.
        var hasCaptures: Bool
    }

    private enum Target: Sendable {
        case now(Handler)
        case later(DeferredHandler)
    }

    fileprivate enum Segment: Sendable {
        case literal([UInt8])
        case capture(String)
    }

    private var routes: [Route] = []
    private var table = Table(routes: [])
    /// Answers paths no route matches (static files, for instance).
    public var fallback: Handler = { request in
        .notFound(request)
    }

    /// A router with no routes: every path goes to ``fallback``.
    public init() {}

    /// Adds a route whose handler answers at once, on the daemon thread. A GET route also
    /// answers HEAD.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
        add(method, pattern, target: .now(handler))
    }

    /// Adds a route whose handler responds later (see ``DeferredHandler``).
    public mutating func addDeferred(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping DeferredHandler) {
        add(method, pattern, target: .later(handler))
    }

    private mutating func add(_ method: HTTPMethod, _ pattern: String, target: Target) {
        let segments = pattern.utf8.split(separator: UInt8(ascii: "/")).map { bytes -> Segment in
            if bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") {
                return .capture(String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self))
            }
            return .literal(Array(bytes))
        }
        let hasCaptures = segments.contains { if case .capture = $0 { true } else { false } }
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: target, hasCaptures: hasCaptures))
        table = Table(routes: routes.map { ($0.method, $0.segments) })
    }

    /// Adds a GET route (which also answers HEAD).
    public mutating func get(_ pattern: String, _ handler: @escaping Handler) { add(.get, pattern, handler) }

    /// Every route as (method, pattern), in the order added: for checking the API description.
    public var routeList: [(method: HTTPMethod, pattern: String)] {
        routes.map { ($0.method, $0.pattern) }
    }

    /// What ``Request/route`` names for paths that only the fallback serves.
    public static let fallbackTemplate = "*"

    /// What a request's method and path lead to.
    private enum Destination {
        /// The route at this index of ``routes``.
        case route(Int)
        /// The path exists only under other methods: their patterns' first, and `Allow`.
        case otherMethods(pattern: String, allow: String)
        case fallback
    }

    /// Routing runs on every request: one walk of the table over the path's bytes. HEAD is
    /// looked up as GET; a method that is not an ``HTTPMethod`` finds only the other methods.
    private func destination(of request: Request) -> Destination {
        let method = HTTPMethod(request.method).map { $0 == .head ? .get : $0 }
        let found = Self.withBytes(of: request.path) { table.search($0, method: method) }
        if let route = found.route { return .route(route) }
        guard let first = found.firstRoute else { return .fallback }
        return .otherMethods(pattern: routes[first].pattern, allow: Table.allow(found.methods))
    }

    /// Routes a request whose head has arrived: sets ``Request/route`` to the pattern of the
    /// route its path matches (`/v1/instances/{id}`; also when only under another method;
    /// ``fallbackTemplate`` otherwise: few and fixed, so fit for metric labels and log lines,
    /// unlike paths) and, when a route of its method matches, its parameters, so that
    /// ``reply(to:)`` does not search again.
    public func resolve(_ request: inout Request) {
        switch destination(of: request) {
        case .route(let index):
            request.route = routes[index].pattern
            request.parameters = parameters(of: index, in: request.path)
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
        case .route(let index):
            var routed = request
            routed.parameters = parameters(of: index, in: request.path)
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

    /// The values of the captures of the route at `index` in `path`, by name. Empty segments
    /// are skipped, as `//` means `/` (as the table does).
    private func parameters(of index: Int, in path: String) -> RouteParameters {
        guard routes[index].hasCaptures else { return RouteParameters() }
        // By index: a copy of the route would retain and release all it holds.
        let segments = routes[index].segments
        return Self.withBytes(of: path) { bytes in
            var parameters = RouteParameters()
            var segment = 0
            var position = 0
            let slash = UInt8(ascii: "/")
            while position < bytes.count, segment < segments.count {
                if bytes[position] == slash {
                    position += 1
                    continue
                }
                var end = position
                while end < bytes.count, bytes[end] != slash { end += 1 }
                if case .capture(let name) = segments[segment] {
                    parameters[name] = String(decoding: UnsafeBufferPointer(rebasing: bytes[position..<end]), as: UTF8.self)
                }
                segment += 1
                position = end
            }
            return parameters
        }
    }
}

extension Router {
    /// The routes' patterns as a trie, in flat arrays: node 0 is the root; a node's literal
    /// segments are a run of ``edges``, whose bytes lie end to end in ``bytes``; a `{name}`
    /// capture is one more child, tried after the literals (so `/v1/batch` and `/v1/{id}` can
    /// both be routes, and each path finds its own).
    fileprivate struct Table: Sendable {
        struct Node: Sendable {
            /// This node's literal children: a range of ``edges``.
            var edges: Range<Int> = 0..<0
            /// The child any one segment leads to, or -1.
            var capture = -1
            /// The methods of the routes that end here, one bit each (``HTTPMethod/ordinal``).
            var methods: UInt16 = 0
            /// The first route (by index) of any method that ends here, or -1.
            var firstRoute = -1
        }

        struct Edge: Sendable {
            var start: Int
            var count: Int
            var child: Int
        }

        var nodes: [Node] = []
        var edges: [Edge] = []
        var bytes: [UInt8] = []
        /// Row per node, column per method: the first route of that method ending at the node, or -1.
        var endpoints: [Int] = []

        static let methodCount = HTTPMethod.allCases.count

        /// The table of routes given as (method, segments), in the order added.
        init(routes: [(HTTPMethod, [Segment])]) {
            // First as a tree with a list of children per node, then laid out flat.
            var literals: [[(bytes: [UInt8], child: Int)]] = [[]]
            var captures: [Int] = [-1]
            var ends: [[(HTTPMethod, Int)]] = [[]]
            func newNode() -> Int {
                literals.append([])
                captures.append(-1)
                ends.append([])
                return literals.count - 1
            }
            for (index, (method, segments)) in routes.enumerated() {
                var node = 0
                for segment in segments {
                    switch segment {
                    case .literal(let bytes):
                        if let existing = literals[node].first(where: { $0.bytes == bytes }) {
                            node = existing.child
                        } else {
                            let child = newNode()
                            literals[node].append((bytes, child))
                            node = child
                        }
                    case .capture:
                        if captures[node] < 0 { captures[node] = newNode() }
                        node = captures[node]
                    }
                }
                ends[node].append((method, index))
            }
            endpoints = Array(repeating: -1, count: literals.count * Self.methodCount)
            for node in literals.indices {
                var entry = Node()
                let first = edges.count
                for literal in literals[node] {
                    edges.append(Edge(start: bytes.count, count: literal.bytes.count, child: literal.child))
                    bytes += literal.bytes
                }
                entry.edges = first..<edges.count
                entry.capture = captures[node]
                for (method, index) in ends[node] {
                    entry.methods |= 1 << method.ordinal
                    if entry.firstRoute < 0 { entry.firstRoute = index }
                    let cell = node * Self.methodCount + method.ordinal
                    if endpoints[cell] < 0 { endpoints[cell] = index }
                }
                nodes.append(entry)
            }
        }

        /// What one walk of the trie over a path found.
        struct Found {
            /// The first route of the method asked for whose pattern matches.
            var route: Int?
            /// The first route of any method whose pattern matches.
            var firstRoute: Int?
            /// The methods of every route whose pattern matches.
            var methods: UInt16 = 0
        }

        /// Every route whose pattern matches `path`, summed up. Routes added earlier win where two
        /// patterns match (a literal and a capture), as they did in the list this table replaces.
        func search(_ path: UnsafeBufferPointer<UInt8>, method: HTTPMethod?) -> Found {
            var found = Found()
            guard !nodes.isEmpty else { return found }
            visit(0, from: 0, path, method: method?.ordinal ?? -1, &found)
            return found
        }

        private func visit(_ index: Int, from start: Int, _ path: UnsafeBufferPointer<UInt8>, method: Int, _ found: inout Found) {
            let slash = UInt8(ascii: "/")
            var position = start
            while position < path.count, path[position] == slash { position += 1 }
            let node = nodes[index]
            guard position < path.count else {
                guard node.methods != 0 else { return }
                found.methods |= node.methods
                found.firstRoute = min(found.firstRoute ?? .max, node.firstRoute)
                if method >= 0, case let route = endpoints[index * Self.methodCount + method], route >= 0 {
                    found.route = min(found.route ?? .max, route)
                }
                return
            }
            var end = position
            while end < path.count, path[end] != slash { end += 1 }
            let length = end - position
            for edge in node.edges {
                let literal = edges[edge]
                guard literal.count == length else { continue }
                let isEqual = bytes.withUnsafeBufferPointer { memcmp($0.baseAddress! + literal.start, path.baseAddress! + position, length) == 0 }
                if isEqual {
                    // A node's literals differ from each other: no other can match.
                    visit(literal.child, from: end, path, method: method, &found)
                    break
                }
            }
            if node.capture >= 0 { visit(node.capture, from: end, path, method: method, &found) }
        }

        /// An `Allow` value naming `methods` in ``HTTPMethod`` order, HEAD wherever GET is.
        static func allow(_ methods: UInt16) -> String {
            var methods = methods
            if methods & 1 << HTTPMethod.get.ordinal != 0 { methods |= 1 << HTTPMethod.head.ordinal }
            return HTTPMethod.allCases.filter { methods & 1 << $0.ordinal != 0 }.map(\.rawValue).joined(separator: ", ")
        }
    }
}
