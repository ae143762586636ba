import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleStore

@Suite("start-up safety", .serialized)
struct StartupSafetyTests {
    @Test("a second lifecycled on the same data folder exits 1 naming the folder and the first's pid", .sqliteOnly("the data folder's lock is the SQLite store's"))
    func secondProcess() throws {
        let data = TemporaryDirectory()
        let first = try LifecycledProcess.serving(dataDirectory: data.path)
        defer {
            first.signal(SIGTERM)
            first.finish()
        }
        let c = try WireClient(port: first.port)
        try c.makeInstance("a", events: coldStart)

        let second = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path]).finish(within: 10)
        #expect(second.status == 1)
        #expect(second.stderr.contains("the data folder \(data.path) is in use by another lifecycled (pid \(first.process.processIdentifier)"), "\(second.stderr)")

        // The first never noticed: its writes still work.
        let write = try c.event("a", #"{"event": "willResignActive"}"#)
        #expect(write.status == 200, "\(write.text)")
        #expect(write.json["sequence"] as? Int == 5, "after the creation record and the three of the cold start")
    }

    @Test("a database emptied or deleted while stopped is refused; --accept-data-loss starts it and numbering continues", .sqliteOnly("empties and deletes the SQLite file"))
    func lostDatabase() throws {
        let data = TemporaryDirectory()
        let database = data.path + "/" + SQLiteStore.fileName
        for damage in ["emptied", "deleted"] {
            var server = try LifecycledProcess.serving(dataDirectory: data.path)
            let c = try WireClient(port: server.port)
            try c.makeInstance("app-\(damage)", events: coldStart)
            let last = try #require(try c.event("app-\(damage)", #"{"event": "willResignActive"}"#).json["sequence"] as? Int)
            server.signal(SIGTERM)
            #expect(server.finish().status == 0)

            if damage == "emptied" {
                #expect(truncate(database, 0) == 0)
            } else {
                try FileManager.default.removeItem(atPath: database)
            }
            let refused = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path]).finish(within: 10)
            #expect(refused.status == 1, "\(damage): \(refused.stderr)")
            let reason = damage == "emptied"
                ? "the database is empty (0 bytes), but it had committed sequence numbers up to \(last)"
                : "the database is missing, but a database committed sequence numbers up to \(last) here"
            #expect(refused.stderr.contains("refusing the database \(database): \(reason)"), "\(refused.stderr)")
            #expect(refused.stderr.contains("start once with --accept-data-loss"), "\(refused.stderr)")
            if damage == "emptied" { #expect(fileSize(database) == 0, "a refused database is left as it was found") }
            else { #expect(!FileManager.default.fileExists(atPath: database), "a refused database is not recreated") }

            server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--accept-data-loss"])
            let after = try WireClient(port: server.port)
            #expect(try after.request("GET", "/v1/instances/app-\(damage)").status == 404, "the loss is real")
            let next = try after.makeInstance("new", events: ["didFinishLaunching"])
            // Creating "new" took the first number after the last one handed out.
            #expect(next.json["sequence"] as? Int == last + 2, "no sequence number is handed out twice")
            server.signal(SIGTERM)
            let run = server.finish()
            #expect(run.status == 0)
            #expect(run.stderr.contains("accepted data loss") && run.stderr.contains("loss=\"\(reason)\" marker=\(last) lastSequence=0"), "\(run.stderr)")
        }
        // Accepted once is enough.
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        server.signal(SIGTERM)
        #expect(server.finish().status == 0)
    }

    @Test(
        "4 KiB of garbage in the middle of the database: refused at start when loading meets it, else /healthz says 503 once the check finds it",
        .sqliteOnly("writes garbage into the SQLite file")
    )
    func damagedDatabase() throws {
        let data = TemporaryDirectory()
        let database = data.path + "/" + SQLiteStore.fileName
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        let c = try WireClient(port: server.port)
        for i in 0..<10 {
            try c.makeInstance("app-\(i)")
            for _ in 0..<150 { #expect(try c.request("POST", "/v1/instances/app-\(i)/relaunches").status == 200) }
        }
        server.signal(SIGTERM)
        #expect(server.finish().status == 0)

        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2 / 4096 * 4096)
        try handle.write(contentsOf: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }))
        try handle.close()

        let damage = "the database \(database) is damaged (PRAGMA quick_check:"
        for extra in [[], ["--accept-data-loss"]] {
            let port = freePort()
            let damaged = try LifecycledProcess(arguments: ["--port", String(port), "--data-dir", data.path] + extra, port: port)
            // The check runs once the service serves; a start that fails runs it to give the reason.
            guard damaged.waitForLogLine(containing: ["lifecycled started"]) != nil else {
                let refused = damaged.finish(within: 10)
                #expect(refused.status == 1, "\(refused.stderr)")
                #expect(refused.stderr.contains(damage), "\(refused.stderr)")
                continue
            }
            let found = damaged.waitForLogLine(containing: ["level=error", "database damaged"])
            #expect(found?.contains(damage) == true, "\(damaged.standardErrorSoFar)")
            let health = try WireClient(port: port).request("GET", "/healthz")
            #expect(health.status == 503)
            #expect((health.json["detail"] as? String)?.contains(damage) == true, "\(health.text)")
            damaged.signal(SIGTERM)
            #expect(damaged.finish().status == 0)
        }
    }

    @Test("--help documents --max-wal and --accept-data-loss; a WAL bound under 1 MiB exits 2")
    func flags() throws {
        let help = try LifecycledProcess(arguments: ["--help"]).finish()
        for text in ["--max-wal BYTES", "LIFECYCLED_MAX_WAL", "--accept-data-loss", "LIFECYCLED_ACCEPT_DATA_LOSS"] {
            #expect(help.stdout.contains(text), "\(text)")
        }
        // A folder and a free port, so a lifecycled that wrongly starts harms nothing.
        let data = TemporaryDirectory()
        let small = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path, "--max-wal", "4096"]).finish(within: 10)
        #expect(small.status == 2)
        #expect(small.stderr.contains("invalid value \"4096\" for --max-wal"), "\(small.stderr)")
        let bad = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path], environment: ["LIFECYCLED_ACCEPT_DATA_LOSS": "yes"]).finish(within: 10)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("invalid value \"yes\" for LIFECYCLED_ACCEPT_DATA_LOSS"), "\(bad.stderr)")
    }
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
}
