import Foundation
import Synchronization

extension SQLiteStore {
    /// The write connection and what its transactions share, under ``SQLiteStore/writer``'s lock.
    struct Writer {
        let database: Database
        let statements: WriteStatements
        /// One process per data folder; also keeps the marker of the last committed sequence.
        let lock: DataFolderLock
        var sequence: Int64
        var writesSincePurge = 0
        var walBound: WALBound
        var isClosed = false

        /// Drops expired idempotency keys and deletion records, raising the floor of dropped records.
        func purgeExpired(_ options: SQLiteStore.Options) throws(SQLiteError) {
            let now = Date()
            try statements.purgeKeys.run([.integer(Codec.milliseconds(now.addingTimeInterval(-options.idempotencyLifetime)))])
            try database.transaction { () throws(SQLiteError) in
                var purgedThrough: Int64 = 0
                try statements.purgeTombstones.forEachRow([.integer(Codec.milliseconds(now.addingTimeInterval(-options.tombstoneLifetime)))]) { row in
                    purgedThrough = max(purgedThrough, row.integer(0))
                }
                if purgedThrough > 0 { try statements.raiseDroppedFloor.run([.integer(purgedThrough)]) }
            }
        }
    }
}

extension SQLiteStore {
    public func write<T>(_ body: (any StoreTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        // nonisolated(unsafe): `body` runs only here, under the lock; region checking cannot see that.
        nonisolated(unsafe) let body = body
        nonisolated(unsafe) var result: T?
        try writer.withLock { (writer: inout Writer) throws(StoreError) -> Void in
            guard !writer.isClosed else { throw StoreError("the store is closed; nothing was changed") }
            try restartWALIfDue(&writer)
            let transaction = SQLiteTransaction(
                statements: writer.statements, options: options, unscopedKeysThrough: unscopedKeysThrough, sequence: writer.sequence
            )
            let database = writer.database
            try checked("cannot begin a transaction") { () throws(SQLiteError) in try database.execute("BEGIN IMMEDIATE") }
            do throws(StoreError) {
                result = try body(transaction)
                try transaction.finish()
                try checked("cannot commit") { () throws(SQLiteError) in try database.execute("COMMIT") }
            } catch {
                do throws(SQLiteError) {
                    try database.rollBack()
                } catch let failure {
                    throw StoreError("\(error.message); the rollback after it failed too: \(failure.message)", isDiskFull: error.isDiskFull)
                }
                throw error
            }
            committed(transaction.sequence, &writer)
        }
        return result!
    }

    /// After a commit: the marker follows, expired keys go now and then; a failure is reported, since the write committed.
    private func committed(_ newSequence: Int64, _ writer: inout Writer) {
        if newSequence != writer.sequence {
            writer.sequence = newSequence
            // After the commit, so the marker never passes the database, even without fsync (see DataFolderLock).
            do {
                try writer.lock.mark(newSequence)
            } catch {
                report(StoreEvent(.error, "cannot update the sequence marker", ["sequence": String(newSequence), "error": error.message]))
            }
        }
        writer.writesSincePurge += 1
        if writer.writesSincePurge >= 1000 {
            writer.writesSincePurge = 0
            do {
                try writer.purgeExpired(options)
            } catch {
                report(StoreEvent(.warning, "cannot purge expired idempotency keys and deletion records", ["database": path, "error": error.message]))
            }
        }
    }

    /// Checkpoints between two transactions once the WAL passed its threshold, so the next commit
    /// starts it over; RESTART waits only for readers (history reads take milliseconds).
    private func restartWALIfDue(_ writer: inout Writer) throws(StoreError) {
        // The WAL's header, then each frame's header and page.
        let frames = writer.database.walFrames
        let bytes = frames == 0 ? 0 : 32 + frames * (24 + pageSize)
        let due = writer.walBound.due(walBytes: bytes)
        guard due != .no else { return }
        let finished: Bool?
        let database = writer.database
        do throws(SQLiteError) {
            finished = try checkpointer.excludingRounds(waiting: due == .now) { () throws(SQLiteError) in try database.checkpoint(.restart) }
        } catch {
            report(StoreEvent(.error, "WAL checkpoint failed", ["database": path, "walBytes": String(bytes), "error": error.message]))
            writer.walBound.checkpointed(finished: false, walBytes: bytes)
            // A damaged file fails the write; anything else lets it go on into the WAL.
            if error.isDamage { throw StoreError(error, doing: "cannot checkpoint the WAL") }
            return
        }
        guard let finished else { return }  // a background round is running: at a later transaction
        if !finished {
            report(StoreEvent(.warning, "WAL checkpoint could not finish: a reader still uses the WAL", ["database": path, "walBytes": String(bytes)]))
        }
        writer.walBound.checkpointed(finished: finished, walBytes: bytes)
    }
}

/// The write connection's prepared statements, made once.
struct WriteStatements {
    let insertInstance: Statement
    let updateInstance: Statement
    let deleteInstance: Statement
    let deleteRecords: Statement
    let insertRecord: Statement
    let dropOldRecords: Statement
    let insertKey: Statement
    let selectKey: Statement
    let purgeKeys: Statement
    let raiseSequenceFloor: Statement
    let insertTombstone: Statement
    let purgeTombstones: Statement
    let raiseDroppedFloor: Statement
    let addCoverage: Statement
    let selectInstance: Statement
    let countInstances: Statement

    init(_ database: Database) throws(SQLiteError) {
        selectInstance = try database.prepare(SQLiteStore.selectInstance)
        countInstances = try database.prepare("SELECT count(*) FROM instances")
        let columns = SQLiteStore.instanceColumnNames
        let values = columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ")
        insertInstance = try database.prepare("INSERT INTO instances (\(SQLiteStore.instanceColumns)) VALUES (\(values))")
        let assignments = columns.indices.dropFirst().map { "\(columns[$0]) = ?\($0 + 1)" }.joined(separator: ", ")
        updateInstance = try database.prepare("UPDATE instances SET \(assignments) WHERE id = ?1")
        deleteInstance = try database.prepare("DELETE FROM instances WHERE id = ?1")
        deleteRecords = try database.prepare("DELETE FROM records WHERE instance = ?1")
        insertRecord = try database.prepare("INSERT INTO records (seq, instance, version, kind, outcome, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        dropOldRecords = try database.prepare("DELETE FROM records WHERE instance = ?1 AND version <= ?2 RETURNING seq")
        insertKey = try database.prepare("""
            INSERT OR REPLACE INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        selectKey = try database.prepare("""
            SELECT fingerprint, result, instance, model, instance_created_at, body, created_at FROM idempotency WHERE key = ?1
            """)
        purgeKeys = try database.prepare("DELETE FROM idempotency WHERE created_at < ?1")
        raiseSequenceFloor = try database.prepare("""
            INSERT INTO meta (key, value) VALUES ('sequence_floor', ?1)
            ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)
            """)
        insertTombstone = try database.prepare("INSERT INTO tombstones (seq, instance, model, deleted_at, body) VALUES (?1, ?2, ?3, ?4, ?5)")
        purgeTombstones = try database.prepare("DELETE FROM tombstones WHERE deleted_at < ?1 RETURNING seq")
        raiseDroppedFloor = try database.prepare("""
            INSERT INTO meta (key, value) VALUES ('dropped_through', ?1)
            ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)
            """)
        addCoverage = try database.prepare("""
            INSERT INTO coverage (model, kind, name, count) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT (model, kind, name) DO UPDATE SET count = count + excluded.count
            """)
    }
}
