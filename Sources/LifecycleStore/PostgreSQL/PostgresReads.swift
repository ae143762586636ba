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
