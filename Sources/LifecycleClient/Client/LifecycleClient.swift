import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LifecycleKit

/// A client of one lifecycled service: every operation of its API as an async function with
/// typed results.
///
/// ```swift
/// let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:8080")!, token: "s3cret"))
/// let instance = try await client.createInstance(id: "app-1")
/// let record = try await client.postEvent("didFinishLaunching", to: instance.id)
/// ```
///
/// A refusal throws ``LifecycleClientError/problem(_:)`` with the service's problem document;
/// but an unexpected event is not a refusal: it was recorded, and ``postEvent(_:to:parameters:believedState:ranHooks:occurredAt:expectedVersion:idempotencyKey:)``
/// returns its record, whose `outcome` is `.unexpected`. Every write carries an
/// `Idempotency-Key` (a fresh UUID unless the caller passes one), so a write that timed out
/// can be sent again with the same key and is applied once. The value is cheap to copy and
/// safe to share between tasks.
public struct LifecycleClient: Sendable {
    /// Where the service is and how to talk to it.
    public struct Configuration: Sendable {
        /// The service's base URL, such as `http://127.0.0.1:8080` (a path, if any, is kept as a prefix).
        public var server: URL
        /// The service's token (`--token`), sent as `Authorization: Bearer` on every request.
        public var token: String?
        /// Seconds a request may wait for an answer; for a stream, the most it may go without
        /// a byte (the service sends a heartbeat every 15 seconds by default) before it reconnects.
        public var timeout: TimeInterval

        public init(server: URL, token: String? = nil, timeout: TimeInterval = 30) {
            self.server = server
            self.token = token
            self.timeout = timeout
        }
    }

    /// The configuration the client was made with.
    public let configuration: Configuration
    let session: URLSession

    public init(configuration: Configuration) {
        self.configuration = configuration
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.timeout
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: sessionConfiguration)
    }

    /// A fresh `Idempotency-Key`: the default of every write.
    public static func makeIdempotencyKey() -> String { UUID().uuidString.lowercased() }

    /// Reads the service's JSON: its times carry milliseconds (`2026-12-02T05:00:00.123Z`),
    /// which Foundation's `.iso8601` strategy refuses.
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let time = DeviceTime(rfc3339: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an RFC 3339 date-time: \(text)"))
            }
            return time.date
        }
        return decoder
    }()

    /// Writes request bodies with sorted members, the canonical form the service binds
    /// idempotency keys to, so the same call always sends the same bytes.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}

// MARK: - Transport

/// One request to the service, before the URL and the token are added.
struct APIRequest: Sendable {
    var method: String
    /// The path under the server URL, its segments already escaped (see ``LifecycleClient/segment(_:)``).
    var path: String
    var query: [URLQueryItem] = []
    var headers: [String: String] = [:]
    var body: Data?

    init(_ method: String, _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// A write: a JSON body (if any), its `Idempotency-Key` and `If-Match` (if any).
    init(write method: String, _ path: String, json: [String: JSONValue]?, idempotencyKey: String?, expectedVersion: Int64? = nil) throws {
        self.init(method, path)
        if let json {
            body = try LifecycleClient.encoder.encode(json)
            headers["Content-Type"] = "application/json"
        }
        if let idempotencyKey { headers["Idempotency-Key"] = idempotencyKey }
        if let expectedVersion { headers["If-Match"] = "\"\(expectedVersion)\"" }
    }
}

/// An answer: its status, headers and whole body.
struct APIResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    func header(_ name: String) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// `Retry-After` in seconds, at most a day: delay-seconds, as the service sends (RFC 9110
    /// §10.2.3). A date, which a proxy may send, or anything else is `nil`: the usual backoff.
    var retryAfter: TimeInterval? {
        guard let text = header("Retry-After")?.trimmingCharacters(in: .whitespaces), !text.isEmpty,
            text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = TimeInterval(text)
        else { return nil }
        return seconds.asWait
    }
}

extension LifecycleClient {
    /// The URL of `request` on the configured server.
    func url(for request: APIRequest) throws -> URL {
        var base = configuration.server.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        guard var components = URLComponents(string: base + request.path) else {
            throw LifecycleClientError.badResponse("cannot form a URL from \(base) and \(request.path)")
        }
        if !request.query.isEmpty {
            components.queryItems = request.query
            // URLComponents leaves `+` alone, which a server reads as a space.
            components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        }
        guard let url = components.url else { throw LifecycleClientError.badResponse("cannot form a URL for \(request.path)") }
        return url
    }

    /// The `URLRequest` for `request`, with the token.
    func urlRequest(for request: APIRequest, accept: String = "application/json") throws -> URLRequest {
        var urlRequest = URLRequest(url: try url(for: request))
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = configuration.timeout
        urlRequest.setValue(accept, forHTTPHeaderField: "Accept")
        if let token = configuration.token { urlRequest.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        return urlRequest
    }

    /// Sends `request` and returns the answer whatever its status; throws only when there is none.
    func perform(_ request: APIRequest, accept: String = "application/json") async throws -> APIResponse {
        let urlRequest = try urlRequest(for: request, accept: accept)
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: urlRequest)
        } catch {
            throw LifecycleClientError.unreachable(LifecycleClientError.unreachableReason(error, url: urlRequest.url ?? configuration.server))
        }
        guard let http = response as? HTTPURLResponse else { throw LifecycleClientError.badResponse("not an HTTP answer") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return APIResponse(status: http.statusCode, headers: headers, body: data)
    }

    /// Sends `request` and returns the answer when its status is one of `success`; any other
    /// status throws: a problem document as ``LifecycleClientError/problem(_:)``, anything else
    /// as ``LifecycleClientError/badResponse(_:)``.
    func send(_ request: APIRequest, success: Set<Int> = [200], accept: String = "application/json") async throws -> APIResponse {
        let response = try await perform(request, accept: accept)
        guard success.contains(response.status) else { throw Self.failure(response) }
        return response
    }

    /// Sends `request` and decodes its body as `T`.
    func send<T: Decodable>(_ request: APIRequest, as type: T.Type, success: Set<Int> = [200]) async throws -> T {
        try Self.decode(type, from: try await send(request, success: success))
    }

    static func decode<T: Decodable>(_ type: T.Type, from response: APIResponse) throws -> T {
        do {
            return try decoder.decode(type, from: response.body)
        } catch {
            throw LifecycleClientError.badResponse("\(response.status) body is not a \(type): \(error)")
        }
    }

    /// The error an answer of an unwanted status stands for.
    static func failure(_ response: APIResponse) -> LifecycleClientError {
        if let problem = LifecycleProblem(status: response.status, body: response.body, retryAfter: response.retryAfter) {
            return .problem(problem)
        }
        let text = String(decoding: response.body.prefix(200), as: UTF8.self)
        return .badResponse("status \(response.status): \(text)")
    }

    /// One path segment, percent-escaped (instance ids and names are plain, but a caller's typo should not change the path).
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

extension JSONValue {
    /// The JSON form of a parameter value.
    init(_ value: Value) {
        switch value {
        case .string(let text): self = .string(text)
        case .bool(let flag): self = .bool(flag)
        case .integer(let number): self = .integer(number)
        case .number(let number): self = .number(number)
        }
    }
}

extension TimeInterval {
    /// The longest the library waits before an attempt: a day.
    static let longestWait: TimeInterval = 86_400

    /// This as a wait: NaN and negative as 0, at most ``longestWait``. What a server, a proxy
    /// or a configuration says of a delay never traps a conversion to nanoseconds.
    var asWait: TimeInterval { isNaN ? 0 : Swift.min(Swift.max(self, 0), .longestWait) }
}
