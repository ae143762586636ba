import Foundation
import LifecycleKit

/// One page of an instance's history (openapi `HistoryPage`), oldest record first.
public struct HistoryPage: Sendable, Equatable, Decodable {
    public var items: [Record]
    /// Pass as `after` for the next page; `nil` on the last page. A page may be shorter
    /// than its limit (at the service's `--page-bytes`) and still have one.
    public var nextAfter: Int64?
    /// The sequence number of the oldest record kept (`nil` when there is none).
    public var oldestRetainedSequence: Int64?
    /// Its version: `oldestRetainedVersion - 1` records were dropped by retention.
    public var oldestRetainedVersion: Int64?
    /// Whether retention (`--history-limit`) dropped older records.
    public var olderDropped: Bool

    /// Reads a page as the service writes it (`GET /v1/instances/{id}/history` saved to a file):
    /// its times carry milliseconds, which Foundation's own date strategies refuse.
    public init(json: Data) throws {
        self = try LifecycleClient.decoder.decode(HistoryPage.self, from: json)
    }
}

/// One page of instances (openapi `InstancePage`), in id order.
public struct InstancePage: Sendable, Equatable, Decodable {
    public var items: [Instance]
    /// Pass as `cursor` for the next page; `nil` on the last page.
    public var nextCursor: String?
}

/// Which instances a listing returns; the filters combine.
public struct InstanceFilter: Sendable, Equatable {
    /// Only instances in this state.
    public var state: String?
    /// Only instances of this model.
    public var model: String?
    /// Only instances with an unexpected event on their counters.
    public var hasUnexpected: Bool
    /// Only instances with an incomplete launch on their counters.
    public var hasIncompleteLaunch: Bool
    /// Only instances whose app reported something the model disagrees with.
    public var hasDivergence: Bool
    /// Only instances carrying every one of these labels.
    public var labels: [String: String]
    /// Only instances that have this finding (a ``Finding/signature``).
    public var finding: String?

    public init(
        state: String? = nil, model: String? = nil, hasUnexpected: Bool = false, hasIncompleteLaunch: Bool = false, hasDivergence: Bool = false,
        labels: [String: String] = [:], finding: String? = nil
    ) {
        self.state = state
        self.model = model
        self.hasUnexpected = hasUnexpected
        self.hasIncompleteLaunch = hasIncompleteLaunch
        self.hasDivergence = hasDivergence
        self.labels = labels
        self.finding = finding
    }

    var query: [URLQueryItem] {
        var query: [URLQueryItem] = []
        if let state { query.append(URLQueryItem(name: "state", value: state)) }
        if let model { query.append(URLQueryItem(name: "model", value: model)) }
        if hasUnexpected { query.append(URLQueryItem(name: "hasUnexpected", value: "true")) }
        if hasIncompleteLaunch { query.append(URLQueryItem(name: "hasIncompleteLaunch", value: "true")) }
        if hasDivergence { query.append(URLQueryItem(name: "hasDivergence", value: "true")) }
        query += labelQuery(labels)
        if let finding { query.append(URLQueryItem(name: "finding", value: finding)) }
        return query
    }
}

/// Everything a paged listing holds, fetched a page at a time as it is read: the next page
/// is asked for only when the one before it is used up, and the sequence ends after the
/// page that gives no cursor. A failed page throws from `next()`; reading again from a new
/// iterator starts over.
public struct PagedSequence<Element: Sendable>: AsyncSequence, Sendable {
    /// Fetches the page after `cursor` (`nil`: the first), returning its items and the next cursor.
    let fetch: @Sendable (_ cursor: String?) async throws -> (items: [Element], next: String?)

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(fetch: fetch) }

    /// Reads the pages in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let fetch: @Sendable (String?) async throws -> (items: [Element], next: String?)
        private var page: [Element] = []
        private var index = 0
        private var cursor: String?
        private var isLastPage = false

        init(fetch: @escaping @Sendable (String?) async throws -> (items: [Element], next: String?)) {
            self.fetch = fetch
        }

        public mutating func next() async throws -> Element? {
            while index == page.count {
                guard !isLastPage else { return nil }
                let (items, next) = try await fetch(cursor)
                (page, index, cursor) = (items, 0, next)
                isLastPage = next == nil
            }
            defer { index += 1 }
            return page[index]
        }
    }
}

extension LifecycleClient {
    /// One page of instances (`GET /v1/instances`) after `cursor`, of at most `limit` (1…1,000; the service's default 100).
    public func instancePage(filter: InstanceFilter = InstanceFilter(), cursor: String? = nil, limit: Int? = nil) async throws -> InstancePage {
        var query = filter.query
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        return try await send(APIRequest("GET", "/v1/instances", query: query), as: InstancePage.self)
    }

    /// Every instance that matches `filter`, in id order, `pageSize` per request.
    public func instances(filter: InstanceFilter = InstanceFilter(), pageSize: Int = 100) -> PagedSequence<Instance> {
        PagedSequence { cursor in
            let page = try await instancePage(filter: filter, cursor: cursor, limit: pageSize)
            return (page.items, page.nextCursor)
        }
    }

    /// One page of the history of `id` (`GET /v1/instances/{id}/history`): records with a
    /// sequence number above `after`, at most `limit`; only those with a `divergence` when `divergent`.
    public func historyPage(of id: String, after: Int64 = 0, limit: Int? = nil, divergent: Bool = false) async throws -> HistoryPage {
        var query = [URLQueryItem(name: "after", value: String(after))]
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if divergent { query.append(URLQueryItem(name: "divergent", value: "true")) }
        return try await send(APIRequest("GET", "/v1/instances/\(Self.segment(id))/history", query: query), as: HistoryPage.self)
    }

    /// Every record of `id` after sequence `after`, oldest first, `pageSize` per request;
    /// only the divergent ones when `divergent`.
    public func history(of id: String, after: Int64 = 0, divergent: Bool = false, pageSize: Int = 100) -> PagedSequence<Record> {
        PagedSequence { cursor in
            let page = try await historyPage(of: id, after: cursor.flatMap { Int64($0) } ?? after, limit: pageSize, divergent: divergent)
            return (page.items, page.nextAfter.map { String($0) })
        }
    }
}

/// `label=key=value` for each label, in key order.
func labelQuery(_ labels: [String: String]) -> [URLQueryItem] {
    labels.keys.sorted().map { URLQueryItem(name: "label", value: "\($0)=\(labels[$0]!)") }
}
