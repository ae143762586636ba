import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService
@testable import LifecycleStore

@Suite("durability")
struct DurabilityTests {
    @Test("a restart restores every field of every instance, and sequence numbers continue")
    func restartEquality() throws {
        let server = try TestServer(.router)
        var c = server.router()
        // One instance exercising every stored field: window, breadcrumb with scene, counters, buffered action.
        try c.makeInstance("rich", events: ["didFinishLaunching", "willConnectToWindow"])
        _ = try c.request("POST", "/v1/instances/rich/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#)
        _ = try c.event("rich", #"{"event": "willEnterForeground"}"#)
        _ = try c.event("rich", #"{"event": "willResignActive"}"#)
        _ = try c.request("POST", "/v1/instances/rich/relaunches", body: [], contentType: nil)
        _ = try c.event("rich", #"{"event": "didFinishLaunching"}"#)
        try c.makeInstance("droid", model: "android-activity", events: [])
        _ = try c.event("droid", #"{"event": "onCreate"}"#)
        try c.makeInstance("bg", events: coldStart + ["didEnterBackground"])

        let ids = ["bg", "droid", "rich"]
        let before = try ids.map { try c.request("GET", "/v1/instances/\($0)").body }
        let historyBefore = try ids.map { try c.request("GET", "/v1/instances/\($0)/history").body }
        let rich = try c.request("GET", "/v1/instances/rich").json
        #expect((rich["counters"] as? [String: Any])?["incompleteLaunches"] as? Int == 1)
        #expect((rich["counters"] as? [String: Any])?["ignored"] as? Int == 1)
        #expect((rich["counters"] as? [String: Any])?["unexpected"] as? Int == 1)
        let lastSequence = server.service!.store.lastSequence

        try server.restart()
        c = server.router()
        let after = try ids.map { try c.request("GET", "/v1/instances/\($0)").body }
        let historyAfter = try ids.map { try c.request("GET", "/v1/instances/\($0)/history").body }
        #expect(after == before)
        #expect(historyAfter == historyBefore)
        let next = try c.event("bg", #"{"event": "didBecomeActive"}"#)
        #expect(next.json["sequence"] as? Int == Int(lastSequence) + 1)

        // Deleting the instance with the newest records must not let their numbers be reused
        // (nor the deletion record's, the next number, once it expires).
        _ = try c.request("DELETE", "/v1/instances/bg")
        try server.restart()
        c = server.router()
        let afterDelete = try c.event("rich", #"{"event": "willConnectToWindow", "window": "w"}"#)
        #expect(afterDelete.json["sequence"] as? Int == Int(lastSequence) + 3)
    }

    @Test("Idempotency-Key: same request replays without applying twice; a different one is refused")
    func idempotency() throws {
        let server = try TestServer(.router)
        var c = server.router()
        try c.makeInstance("app", events: coldStart)
        let key = [("Idempotency-Key", "abc-123")]
        let first = try c.event("app", #"{"event": "willResignActive"}"#, headers: key)
        let again = try c.event("app", #"{"event": "willResignActive"}"#, headers: key)
        #expect(first.status == 200 && again.status == 200)
        #expect(again.body == first.body)
        #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == 4)
        let different = try c.event("app", #"{"event": "didEnterBackground"}"#, headers: key)
        #expect(different.status == 422)
        #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == 4)

        // An unexpected event's 409 is replayed too, and recorded once.
        let oops = [("Idempotency-Key", "oops-1")]
        #expect(try c.event("app", #"{"event": "didFinishLaunching"}"#, headers: oops).status == 409)
        #expect(try c.event("app", #"{"event": "didFinishLaunching"}"#, headers: oops).status == 409)
        #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == 5)

        // Creation with a key, and keys survive a restart.
        let create = [("Idempotency-Key", "create-1")]
        let created = try c.request("POST", "/v1/instances", json: "{}", headers: create)
        try server.restart()
        c = server.router()
        let replayed = try c.request("POST", "/v1/instances", json: "{}", headers: create)
        #expect(created.status == 201 && replayed.status == 201 && replayed.body == created.body)
        #expect(try c.request("GET", "/v1/instances").json["items"].map { ($0 as? [Any])?.count } == 2)
        #expect(try c.event("app", #"{"event": "willResignActive"}"#, headers: key).body == first.body)
        #expect(try c.event("app", #"{"event": "x"}"#, headers: [("Idempotency-Key", "")]).status == 400)
    }

    @Test("retention keeps the newest records and says older ones were dropped")
    func retention() throws {
        let server = try TestServer(.router) { $0.historyLimit = 5 }
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        for i in 0..<9 { _ = try c.event("app", i % 2 == 0 ? #"{"event": "willResignActive"}"# : #"{"event": "didBecomeActive"}"#) }
        let page = try c.request("GET", "/v1/instances/app/history").json
        let versions = (page["items"] as? [[String: Any]])?.compactMap { $0["version"] as? Int }
        #expect(versions == [8, 9, 10, 11, 12])
        #expect(page["olderDropped"] as? Bool == true)
        #expect(page["oldestRetainedVersion"] as? Int == 8)
    }

    /// `after` and `nextAfter` are sequence numbers, global and with gaps within one instance;
    /// versions count one instance's records without gaps. The oldest record kept is given on
    /// both, so a client can compare it with its cursor (sequence) or with the last version it read.
    @Test("history gives the oldest record kept by sequence number, as `after` counts, and by version")
    func retentionNumberings() throws {
        let server = try TestServer(.router) { $0.historyLimit = 3 }
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        try c.makeInstance("other")
        var sequences: [Int] = []
        // Interleaved with another instance's records, so that the two numberings differ.
        for i in 0..<6 {
            let answer = try c.event("app", i % 2 == 0 ? #"{"event": "willResignActive"}"# : #"{"event": "didBecomeActive"}"#)
            sequences.append(try #require(answer.json["sequence"] as? Int))
            _ = try c.request("POST", "/v1/instances/other/relaunches", body: [], contentType: nil)
        }
        // Versions 1 to 9, the last three kept: 7, 8 and 9, which are sequences[3...].
        let first = try c.request("GET", "/v1/instances/app/history?limit=1").json
        let items = try #require(first["items"] as? [[String: Any]])
        #expect(items.map { $0["version"] as? Int } == [7])
        #expect(items.first?["sequence"] as? Int == sequences[3])
        #expect(first["oldestRetainedSequence"] as? Int == sequences[3])
        #expect(first["oldestRetainedVersion"] as? Int == 7)
        #expect(first["olderDropped"] as? Bool == true)
        #expect(sequences[3] != 7)
        // A later page says the same; a cursor at a dropped record is below the oldest kept.
        let later = try c.request("GET", "/v1/instances/app/history?after=\(sequences[3])").json
        #expect((later["items"] as? [[String: Any]])?.map { $0["sequence"] as? Int } == [sequences[4], sequences[5]])
        #expect(later["oldestRetainedSequence"] as? Int == sequences[3] && later["oldestRetainedVersion"] as? Int == 7)
        let behind = try c.request("GET", "/v1/instances/app/history?after=\(sequences[1])").json
        #expect((behind["items"] as? [[String: Any]])?.first?["sequence"] as? Int == sequences[3])
        // An instance without records has neither.
        try c.makeInstance("fresh")
        let empty = try c.request("GET", "/v1/instances/fresh/history").json
        #expect(empty["oldestRetainedSequence"] is NSNull && empty["oldestRetainedVersion"] is NSNull)
        #expect(empty["olderDropped"] as? Bool == false)
    }

    @Test("a full disk answers 503 with Retry-After and changes nothing", .sqliteOnly("a page cap on the SQLite file fills the disk"))
    func fullDisk() throws {
        let server = try TestServer(.router) { $0.maxDatabasePages = 19 }  // the schema (a page a table and index) and a few records
        let c = server.router()
        try c.makeInstance("app", events: ["didFinishLaunching"])
        var failure: HTTPResponse?
        for i in 0..<2000 {
            let response = try c.event("app", #"{"event": "willConnectToWindow", "window": "\#(String(repeating: "w", count: 200))-\#(i)"}"#)
            if response.status != 200 {
                failure = response
                break
            }
        }
        let refused = try #require(failure)
        #expect(refused.status == 503 && refused.header("content-type") == "application/problem+json")
        #expect(refused.json["detail"] as? String == "the disk is full; nothing was changed")
        #expect(refused.header("retry-after").flatMap { Int($0) }.map { $0 >= 1 } == true, "Retry-After: \(refused.header("retry-after") ?? "none")")
        let instance = try c.request("GET", "/v1/instances/app").json
        let version = try #require(instance["version"] as? Int)
        let history = try c.fullHistory("app")
        #expect(history.last?["version"] as? Int == version, "memory and disk agree after the failure")
        try server.restart()
        let reopened = server.router()
        #expect(try reopened.request("GET", "/v1/instances/app").json["version"] as? Int == version)
    }

    @Test("a corrupt database or an unusable data folder stops start-up with a clear error")
    func unusableStorage() throws {
        let folder = TemporaryDirectory()
        let corrupt = folder.path + "/corrupt"
        try FileManager.default.createDirectory(atPath: corrupt, withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: corrupt + "/" + SQLiteStore.fileName))
        var configuration = Configuration()
        configuration.port = 0
        configuration.dataDirectory = corrupt
        #expect {
            _ = try Service(configuration: configuration)
        } throws: { error in
            "\(error)".contains("file is not a database")
        }
        let notAFolder = folder.path + "/file"
        try Data("x".utf8).write(to: URL(fileURLWithPath: notAFolder))
        configuration.dataDirectory = notAFolder
        #expect {
            _ = try Service(configuration: configuration)
        } throws: { error in
            "\(error)".contains("cannot create data folder")
        }
    }
}

@Suite("graceful stop")
struct GracefulStopTests {
    @Test("stopping under load answers or refuses every request, and keeps every acknowledged write")
    func stopUnderLoad() throws {
        let server = try TestServer()
        let setup = try server.connect()
        let writers = 4
        for writer in 0..<writers { try setup.makeInstance("stop-\(writer)", events: coldStart) }
        let acknowledged = LockedValue<[Acknowledged]>([])
        let unexpectedStatuses = LockedValue<[Int]>([])
        let group = startClients(writers, port: server.port) { writer, c in
            for i in 0..<100_000 {
                let event = i % 2 == 0 ? "willResignActive" : "didBecomeActive"
                guard let response = try? c.event("stop-\(writer)", #"{"event": "\#(event)"}"#) else { return }
                if response.status == 503 { return }
                guard response.status == 200, let version = response.json["version"] as? Int, let sequence = response.json["sequence"] as? Int else {
                    unexpectedStatuses.withLock { $0.append(response.status) }
                    return
                }
                acknowledged.withLock { $0.append(Acknowledged(instance: "stop-\(writer)", version: version, sequence: sequence)) }
            }
        }
        // The writers are busy when the stop comes: it waits for their first 50 acknowledgements.
        #expect(eventually(within: 30) { acknowledged.withLock { $0.count } > 50 })
        let started = Date()
        try server.restart()
        #expect(Date().timeIntervalSince(started) < 5, "the stop drained promptly")
        group.wait()
        #expect(unexpectedStatuses.withLock { $0 } == [])
        let acks = acknowledged.withLock { $0 }
        let c = try server.connect()
        for writer in 0..<writers {
            let history = try c.fullHistory("stop-\(writer)")
            let stored = Dictionary(uniqueKeysWithValues: history.map { ($0["sequence"] as! Int, $0["version"] as! Int) })
            for ack in acks where ack.instance == "stop-\(writer)" {
                #expect(stored[ack.sequence] == ack.version)
            }
            #expect(history.map { $0["version"] as! Int } == Array(1...history.count))
        }
    }
}
