import Foundation
import LifecycleKit

extension PostgresStore {
    /// Runs `body` (one statement, so one snapshot) on the read connection within `bound`
    /// (``Options/readTimeout`` unless given), waiting for the read ahead included. A connection
    /// found lost is made again once at once: a read changes nothing, so trying again is safe.
    func read<T: Sendable>(
        _ what: String, within bound: Duration? = nil, _ body: sending (Connection) throws(PostgreSQLError) -> T
    ) throws(StoreError) -> T {
        let deadline = Deadline(bound ?? options.readTimeout)
        guard readGate.lock(before: deadline.date) else { throw StoreError(deadline.passed("waiting for the read ahead of it"), doing: what) }
        defer { readGate.unlock() }
        return try reader.withLock { (reader) throws(StoreError) -> T in
            guard !reader.isClosed else { throw StoreError("\(what): the store is closed") }
            var retried = false
            while true {
                let connection = try checked(what) { () throws(PostgreSQLError) in try reader.link.connection(by: deadline) }
                do throws(PostgreSQLError) {
                    return try body(connection)
                } catch {
                    reader.link.dropIfLost(error)
                    if error.isConnectionLost, !error.isTimedOut, !retried {
                        retried = true
                        continue
                    }
                    throw StoreError(error, doing: what)
                }
            }
        }
    }

    /// Instances one statement of ``loadInstances()`` reads.
    static let loadPageSize = 10_000

    /// In pages by id, each within ``Options/timeout``; a replica's catch-up reconciles their snapshots.
    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        var loaded: [StoredInstance] = []
        while true {
            let after = loaded.last?.id ?? ""
            let page = try read("cannot load instances", within: options.timeout) { (connection) throws(PostgreSQLError) in
                try connection.instances(after: after, limit: Int64(Self.loadPageSize))
            }
            loaded += page
            if page.count < Self.loadPageSize { return loaded }
        }
    }

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        guard !ids.isEmpty else { return [] }
        return try read("cannot load instances") { (connection) throws(PostgreSQLError) in try connection.instances(ids) }
    }

    public func history(instanceID: String, after: Int64, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { (connection) throws(PostgreSQLError) in
            try connection.history(instanceID: instanceID, after: after, limit: limit)
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { (connection) throws(PostgreSQLError) in try connection.coverage() }
    }

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        try read("cannot replay records after \(after)") { (connection) throws(PostgreSQLError) in
            try connection.replay(after: after, through: through, filter: filter, limit: limit)
        }
    }
}

extension Connection {
    /// One statement, so the page and its oldest record agree (no oldest, no page). libpq holds
    /// the result whole, so it stops at the first row past the page's bytes (`before`), or the second.
    func history(instanceID: String, after: Int64, limit: PageLimit) throws(PostgreSQLError) -> HistoryPage {
        let found = try execute(
            """
            WITH oldest AS (\(Self.historyOldest)), page AS (
              SELECT seq, version, body, row_number() OVER (ORDER BY version) AS n,
                sum(octet_length(body)) OVER (ORDER BY version) - octet_length(body) AS before
              \(Self.historyRange)
            )
            SELECT oldest.version, oldest.seq, page.seq, page.body FROM oldest LEFT JOIN page ON page.before <= $4 OR page.n <= 2 ORDER BY page.version
            """,
            [.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1), .integer(Int64(limit.bytes))]
        )
        var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
        var fill = PageFill(limit)
        for row in found.rows {
            page.oldestRetainedVersion = row.integer(0)
            page.oldestRetainedSequence = row.integer(1)
            guard !row.isNull(2), fill.admits(size: row.byteCount(3)) else { continue }
            page.records.append(row.bytes(3))
            page.lastSequence = row.integer(2)
        }
        page.hasMore = fill.turnedAway
        return page
    }

    /// One statement, so the page and its bounds agree; it stops past the page's bytes, as history does.
    func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(PostgreSQLError) -> ReplayPage {
        var (select, values, upper) = Self.replaySelect(after: after, through: through, filter: filter, limit: limit)
        values.append(.integer(Int64(limit.bytes)))
        let sql = """
            WITH rows AS (\(select)),
            page AS (
              SELECT *, row_number() OVER (ORDER BY seq) AS n, sum(octet_length(body)) OVER (ORDER BY seq) - octet_length(body) AS before
              FROM rows
            ),
            bounds AS (SELECT \(Self.replayBounds))
            SELECT bounds.*, page.seq, page.kind, page.body, page.instance, page.outcome, page.model
            FROM bounds LEFT JOIN page ON page.before <= $\(values.count) OR page.n <= 2 ORDER BY page.seq
            """
        var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
        var fill = PageFill(limit)
        for row in try execute(sql, values).rows {
            Codec.bounds(row, into: &page)
            guard !row.isNull(3), fill.admits(size: row.byteCount(5)) else { continue }
            page.records.append(try Codec.replayed(row, from: 3))
        }
        if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
        return page
    }
}
