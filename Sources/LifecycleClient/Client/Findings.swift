import Foundation

/// A fleet's problems grouped by signature (openapi `Finding`; docs/TRIAGE.md).
public struct Finding: Sendable, Equatable, Decodable {
    /// What kind of problem it groups.
    public enum Kind: String, Sendable, Equatable, Decodable, CaseIterable {
        case unexpected, incompleteLaunch, divergence, gap
    }

    /// What diverged: one of the three is set.
    public struct Diverged: Sendable, Equatable, Decodable {
        public var believedState: String?
        public var missingHook: String?
        public var extraHook: String?
    }

    /// Its instances' list, `/v1/instances?finding=…`.
    public struct Links: Sendable, Equatable, Decodable {
        public var instances: String
    }

    /// Names it stably; pass it as ``InstanceFilter/finding``.
    public var signature: String
    public var kind: Kind
    public var model: String
    /// `unexpected`: the state the input came in; `divergence`: the state the model put the app in.
    public var state: String?
    public var event: String?
    public var action: String?
    /// `incompleteLaunch`: the breadcrumb step the earlier launch stopped at.
    public var step: String?
    public var diverged: Diverged?
    /// Records that showed it.
    public var count: Int64
    /// Distinct instances they were of.
    public var instances: Int64
    public var firstSeen: Date
    public var lastSeen: Date
    /// The first instances it was seen on (up to 5).
    public var examples: [String]
    public var links: Links
}

private struct FindingList: Decodable {
    var items: [Finding]
}

extension LifecycleClient {
    /// The findings (`GET /v1/findings`), most widespread first: of `model`, of `kind`, last seen
    /// at or after `since` (counts stay totals), counted over the instances carrying `label`
    /// (`key`, `value`) only; at most `limit` (1…1,000; the service's default 100).
    public func findings(
        model: String? = nil, kind: Finding.Kind? = nil, since: Date? = nil, label: (key: String, value: String)? = nil, limit: Int? = nil
    ) async throws -> [Finding] {
        var query: [URLQueryItem] = []
        if let model { query.append(URLQueryItem(name: "model", value: model)) }
        if let kind { query.append(URLQueryItem(name: "kind", value: kind.rawValue)) }
        if let since {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            query.append(URLQueryItem(name: "since", value: formatter.string(from: since)))
        }
        if let label { query.append(URLQueryItem(name: "label", value: "\(label.key)=\(label.value)")) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        return try await send(APIRequest("GET", "/v1/findings", query: query), as: FindingList.self).items
    }
}
