import CLifecycleSQLite
import Foundation
import Testing
@testable import LifecycleStore

/// The VFS that gathers writes (Sources/CLifecycleSQLiteVFS/gathered_writes.c) keeps a commit out
/// of its buffer: each commit is in the files, checksums and all, when it returns, and so is a
/// checkpoint's copy.
@Suite("gathered WAL and database writes")
struct GatheredWritesTests {
    @Test("SQLite counts no memory: no allocation takes a process-wide mutex to count it")
    func memoryIsNotCounted() throws {
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let database = try Database(path: folder.path + "/counted.sqlite")
        try database.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        try database.execute("INSERT INTO rows VALUES (1, printf('%0500d', 1))")
        // With the count on, this is what SQLite holds (its page cache, the schema): never 0.
        #expect(sqlite3_memory_used() == 0)
    }

    @Test("the statement cache tells texts apart by every byte, though it hashes only their length and ends")
    func statementTexts() throws {
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let database = try Database(path: folder.path + "/statements.sqlite")
        // The same length and the same last 32 bytes: they differ only in the value selected.
        let one = "SELECT 1 WHERE $1 IS NOT NULL AND $1 IS NOT NULL AND $1 IS NOT NULL"
        let two = "SELECT 2 WHERE $1 IS NOT NULL AND $1 IS NOT NULL AND $1 IS NOT NULL"
        #expect(StatementText(sql: one).hashValue == StatementText(sql: two).hashValue)
        #expect(StatementText(sql: one) != StatementText(sql: two))
        func selected(_ sql: String) throws -> [Int64] {
            var values: [Int64] = []
            try database.forEachRow(sql, [.integer(7)]) { row in values.append(row.integer(0)) }
            return values
        }
        #expect(try selected(one) == [1])
        #expect(try selected(two) == [2])
        // A text made again, apart from the first, finds the statement prepared for it.
        let again = String(decoding: Array(one.utf8), as: UTF8.self)
        #expect(StatementText(sql: again) == StatementText(sql: one))
        #expect(try database.cached(again) === database.cached(one))
        #expect(try database.cached(two) !== database.cached(one))
    }

    @Test("every commit and checkpoint is whole in the files when it returns, as a kill -9 right after it leaves them")
    func commitsAreInTheFile() throws {
        #expect(Database.fileSystem == "lifecycled-gathered-writes")
        let folder = Folder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let path = folder.path + "/gathered.sqlite"
        let database = try Database(path: path)
        try database.execute("PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        // A cache of 10 pages spills each transaction into the WAL before it commits and then
        // overwrites frames there, so at the commit SQLite also rewrites frames' headers.
        try database.execute("PRAGMA cache_size = 10")
        try database.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        // Rounds 3 and 4 also copy the WAL into the database file, as a checkpoint does under load.
        for round in 1...4 {
            // 2,000 rows of about 200 bytes: many times the 64 KiB buffer.
            try database.transaction { () throws(SQLiteError) in
                try database.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                    INSERT OR REPLACE INTO rows SELECT i, printf('%d-%0200d', \(round), i) FROM n
                    """)
                try database.execute("UPDATE rows SET value = value || '-again'")
            }
            if round >= 3 { #expect(try database.checkpoint(round == 3 ? .passive : .truncate)) }
            // The files as the kernel has them, read by a connection that recovers the WAL
            // from them, checking every frame's checksum.
            let copy = Folder()
            try FileManager.default.createDirectory(atPath: copy.path, withIntermediateDirectories: true)
            for suffix in ["", "-wal"] {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: copy.path + "/gathered.sqlite" + suffix)
            }
            let recovered = try Database(path: copy.path + "/gathered.sqlite")
            let current = try recovered.first("SELECT count(*) FROM rows WHERE value LIKE '\(round)-%-again'") { $0.integer(0) }
            #expect(current == 2000, "round \(round)")
            #expect(try recovered.first("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }
}
