import Foundation

/// An HTTP request as handlers see it: no C pointers, body fully read.
public struct Request: Sendable {
    /// The method as sent: `GET`, `POST`, …
    public var method: String
    /// The decoded path, without the query string: only `A-Z a-z 0-9 . _ -` and `/`, with
    /// no `.` or `..` segment (the server refuses any other with 400).
    public var path: String
    /// Header fields with lowercased names, in arrival order.
    public var headers: [(name: String, value: String)]
    /// Decoded query arguments, in arrival order.
    public var query: [(name: String, value: String)]
    /// The whole body, read before the handler runs (at most ``ServerConfiguration/maxBodySize`` bytes).
    public var body: [UInt8]
    /// Values of `{name}` segments of the matched route.
    public var parameters = RouteParameters()
    /// The client's IP address as text (`127.0.0.1`, `::1`; IPv4 clients of an IPv6
    /// socket as IPv4), for per-client limits: the peer's, or for a request from a trusted
    /// proxy the one its `X-Forwarded-For` names (see ``TrustedProxies``); empty when not
    /// from a socket.
    public var clientAddress: String
    /// The pattern of the route the path matched (`/v1/instances/{id}`, or
    /// ``Router/fallbackTemplate``): set before any middleware runs; `nil` before routing.
    public var route: String?
    /// The request's id for logs and the `X-Request-ID` header: set by the request-id
    /// middleware (the client's, when valid, or a new one); empty without it.
    public var id: String = ""
    /// When the middlewares started on the whole request (``DispatchTime`` uptime
    /// nanoseconds), for the durations they log and count; 0 before.
    public var received: UInt64 = 0
    /// The router's index of the route found at admission (see ``Router/resolve(_:)``).
    var endpoint: Int?
    /// What `Host` names, as the server parsed it when checking the head: so that a middleware
    /// does not parse it again.
    var parsedHost: HostName?

    /// A request as the server builds it, or as a test makes one to call a handler without a socket.
    public init(
        method: String, path: String, headers: [(name: String, value: String)] = [], query: [(name: String, value: String)] = [],
        body: [UInt8] = [], clientAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.body = body
        self.clientAddress = clientAddress
    }

    /// The first header with this name (case-insensitive).
    public func header(_ name: String) -> String? {
        // Callers mostly pass lowercase literals: lowercasing those would cost more than the
        // search. Checked on the contiguous bytes, as iterating a `UTF8View` costs more still.
        var lowered = name
        if lowered.withUTF8({ $0.contains(where: \.isASCIICapital) }) { lowered = name.lowercased() }
        guard let first = headers.firstIndex(where: { $0.name == lowered }) else { return nil }
        // Lines of one name are one field, their values joined by commas (RFC 9110 §5.3): two
        // `If-Match` lines as one listing both, two `Idempotency-Key` lines refused as one would be.
        var value = headers[first].value
        for other in headers[(first + 1)...] where other.name == lowered { value += ", " + other.value }
        return value
    }

    /// What the `Host` header names; `nil` without one, or for one that is not `host[:port]`
    /// (which the server refuses before any middleware or handler sees the request).
    public var hostName: HostName? {
        // Parsed by the server already, but for a request made without a socket (tests).
        parsedHost ?? header("host").flatMap(HostName.init)
    }

    /// Whether `If-None-Match` names `etag`, by weak comparison (RFC 9110 §13.1.2: `W/` is
    /// ignored, `*` names any); `nil` when the request has no `If-None-Match`.
    public func ifNoneMatch(names etag: String) -> Bool? {
        header("if-none-match").map { Self.ifNoneMatch($0, names: etag) }
    }

    /// Whether an `If-None-Match` value (`tags`) names `etag`, as ``ifNoneMatch(names:)``.
    public static func ifNoneMatch(_ tags: String, names etag: String) -> Bool {
        tags.split(separator: ",").contains { tag in
            let tag = tag.trimmingCharacters(in: .whitespaces)
            return tag == "*" || (tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag) == etag
        }
    }

    /// The first query argument with this name.
    public func query(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    /// Whether the method only reads (RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE); any other
    /// may change something.
    public var isSafe: Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE": true
        default: false
        }
    }

    /// Whether a body follows the head, as its framing says (a `Content-Length` above 0, or
    /// `Transfer-Encoding`): known before the body is read. The server has refused any
    /// request whose framing is ambiguous before a handler or middleware sees it.
    public var hasBody: Bool {
        headers.contains { header in
            switch header.name {
            case "transfer-encoding": true
            case "content-length": (Int(header.value) ?? 0) > 0
            default: false
            }
        }
    }

    /// The media type of the body, without parameters or the spaces and tabs around it
    /// (HTTP's whitespace), lowercased.
    public var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        // On the UTF-8 bytes: Foundation's trimming bridges through NSString, which cost a POST about
        // a tenth of its HTTP threads' time (perf under wrk).
        let type = value[..<(value.utf8.firstIndex(of: UInt8(ascii: ";")) ?? value.endIndex)].trimmingOWS
        // As usually sent (`application/json`: bare and lowercase), the header's own string.
        guard type.utf8.contains(where: \.isASCIICapital) else {
            return type.utf8.count == value.utf8.count ? value : String(type)
        }
        return type.lowercased()
    }
}

