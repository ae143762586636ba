import Foundation
import Synchronization

extension SQLiteStore {
    /// The write connection and what its transactions share, under ``SQLiteStore/writer``'s lock.
    struct Writer {
        let database: Database
        /// One process per data folder; also keeps the marker of the last committed sequence.
        let lock: DataFolderLock
        var sequence: Int64
        var writesSincePurge = 0
        var walBound: WALBound
        var isClosed = false

        /// Drops expired idempotency keys and deletion records, raising the floor of dropped records.
        func purgeExpired(_ options: SQLiteStore.Options) throws(SQLiteError) {
            let statements = Database.purgingExpired(idempotencyLifetime: options.idempotencyLifetime, tombstoneLifetime: options.tombstoneLifetime)
            try database.transaction { () throws(SQLiteError) in try database.run(statements) }
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
            let database = writer.database
            let transaction = SQLTransaction(
                database, sequence: writer.sequence, instanceCount: nil, historyLimit: options.historyLimit,
                idempotencyLifetime: options.idempotencyLifetime, unscopedKeysThrough: unscopedKeysThrough
            )
            try checked("cannot begin a transaction") { () throws(SQLiteError) in try database.execute("BEGIN IMMEDIATE") }
            do throws(StoreError) {
                result = try body(transaction)
                // What waits, then the COMMIT, each a prepared statement.
                let closing = try transaction.waitingStatements() + [SQLStatement("COMMIT")]
                try checked("cannot commit") { () throws(SQLiteError) in try database.run(closing) }
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
