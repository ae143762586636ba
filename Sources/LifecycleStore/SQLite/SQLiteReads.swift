import Foundation
import LifecycleKit
import Synchronization

extension SQLiteStore {
    /// The read connection and its prepared statements, under ``SQLiteStore/reader``'s lock.
    struct Reader {
        let database: Database
        let selectHistory: Statement
        let selectOldestRetained: Statement
        let selectReplayBounds: Statement

        init(_ database: Database) throws(SQLiteError) {
            self.database = database
            // Start the index range after the version of the record `after` names, not at the history's beginning.
            selectHistory = try database.prepare("""
                SELECT seq, body FROM records
                WHERE instance = ?1
                  AND version > coalesce((SELECT version FROM records WHERE seq = ?2 AND instance = ?1), 0)
                  AND seq > ?2
                ORDER BY instance, version LIMIT ?3
                """)
            // Version 0 is the creation record, which is not history.
            selectOldestRetained = try database.prepare("""
                SELECT version, seq FROM records WHERE instance = ?1 AND version > 0 ORDER BY instance, version LIMIT 1
                """)
            selectReplayBounds = try database.prepare("SELECT \(Codec.replayBounds)")
        }
    }
}

extension SQLiteStore {
    /// The instance columns (see ``Codec/instanceColumns(window:)``).
    static let instanceColumnNames = Codec.instanceColumns(window: "window")
    static let instanceColumns = instanceColumnNames.joined(separator: ", ")
    static let selectInstance = "SELECT \(instanceColumns) FROM instances WHERE id = ?1"

    /// Runs `body` on the read connection (one read at a time).
    func read<T: Sendable>(_ what: String, _ body: sending (Reader) throws(SQLiteError) -> T) throws(StoreError) -> T {
        try reader.withLock { (reader: inout Reader) throws(StoreError) -> T in
            try checked(what) { () throws(SQLiteError) in try body(reader) }
        }
    }

    public func loadInstances() throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { (reader) throws(SQLiteError) in
            var instances: [StoredInstance] = []
            try reader.database.prepare("SELECT \(Self.instanceColumns) FROM instances").forEachRow { (row) throws(SQLiteError) in
                instances.append(try Codec.instance(row))
            }
            return instances
        }
    }

    public func instances(_ ids: [String]) throws(StoreError) -> [StoredInstance] {
        try read("cannot load instances") { (reader) throws(SQLiteError) in
            try reader.database.prepare(Self.selectInstance).instances(ids)
        }
    }

    public func history(instanceID: String, after: Int64, limit: PageLimit) throws(StoreError) -> HistoryPage {
        try read("cannot read history of \(instanceID)") { (reader) throws(SQLiteError) in
            var page = HistoryPage(records: [], lastSequence: nil, hasMore: false, oldestRetainedVersion: nil, oldestRetainedSequence: nil)
            var fill = PageFill(limit)
            // One snapshot for both reads, so the page and its oldest record agree.
            try reader.database.transaction("BEGIN") { () throws(SQLiteError) in
                // One row more than the page holds says whether more follow; rows turned away are not read.
                try reader.selectHistory.forEachRow([.text(instanceID), .integer(after), .integer(Int64(limit.records) + 1)]) { row in
                    guard fill.admits(size: row.byteCount(1)) else { return }
                    page.records.append(row.bytes(1))
                    page.lastSequence = row.integer(0)
                }
                page.hasMore = fill.turnedAway
                if let oldest = try reader.selectOldestRetained.first([.text(instanceID)], { (version: $0.integer(0), sequence: $0.integer(1)) }) {
                    page.oldestRetainedVersion = oldest.version
                    page.oldestRetainedSequence = oldest.sequence
                }
            }
            return page
        }
    }

    public func loadCoverage() throws(StoreError) -> CoverageCounts {
        try read("cannot load coverage counters") { (reader) throws(SQLiteError) in
            var counts = CoverageCounts()
            try reader.database.prepare("SELECT model, kind, name, count FROM coverage").forEachRow { (row) throws(SQLiteError) in
                try Codec.addCounter(row, to: &counts)
            }
            return counts
        }
    }

    public func replay(after: Int64, through: Int64, filter: RecordFilter, limit: PageLimit) throws(StoreError) -> ReplayPage {
        let upper = Codec.replayUpper(after: after, through: through, filter: filter)
        var bindings: [ColumnValue] = [.integer(after), .integer(upper), .integer(Int64(limit.records))]
        func bind(_ text: String) -> String {
            bindings.append(.text(text))
            return "?\(bindings.count)"
        }
        let select = Codec.replaySelect(
            filter, parameter: { "?\($0)" }, bind: bind, anyOf: { "instance IN (\($0.map(bind).joined(separator: ", ")))" }
        )
        let sql = select + " ORDER BY 1 LIMIT ?3"
        let parameters = bindings
        return try read("cannot replay records after \(after)") { (reader) throws(SQLiteError) in
            let select = try reader.database.prepare(sql)
            var page = ReplayPage(records: [], coveredThrough: upper, droppedThrough: 0, oldestKept: nil)
            var fill = PageFill(limit)
            // One snapshot for the page and its bounds, so they agree.
            try reader.database.transaction("BEGIN") { () throws(SQLiteError) in
                try select.forEachRow(parameters) { (row) throws(SQLiteError) in
                    guard fill.admits(size: row.byteCount(2)) else { return }
                    page.records.append(try Codec.replayed(row, from: 0))
                }
                try reader.selectReplayBounds.first { Codec.bounds($0, into: &page) }
            }
            if fill.isFull, let last = page.records.last { page.coveredThrough = last.sequence }
            return page
        }
    }

    /// Runs `PRAGMA integrity_check`; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read("cannot check integrity") { (reader) throws(SQLiteError) in
            var lines: [String] = []
            try reader.database.prepare("PRAGMA integrity_check").forEachRow { row in lines.append(row.text(0) ?? "NULL") }
            return lines.joined(separator: "\n")
        }
    }
}

extension Statement {
    /// What ``SQLiteStore/selectInstance`` finds of `ids`, one lookup each.
    func instances(_ ids: [String]) throws(SQLiteError) -> [StoredInstance] {
        var found: [StoredInstance] = []
        for id in ids {
            if let instance = try first([.text(id)], Codec.instance) { found.append(instance) }
        }
        return found
    }
}
