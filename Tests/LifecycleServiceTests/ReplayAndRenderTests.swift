import Foundation
import LifecycleTestSupport
import Testing
import LifecycleKit
import LifecycleHTTP
@testable import LifecycleService
@testable import LifecycleStore

@Suite("idempotent create and rendering")
struct ReplayAndRenderTests {
    @Test("replaying POST /v1/instances without an id names the instance first created, in Location too")
    func replayNamesStoredInstance() throws {
        let server = try TestServer(.router)
        var c = server.router()
        let key = [("Idempotency-Key", "create-once")]
        let first = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(first.status == 201)
        let id = try #require(first.json["id"] as? String)
        #expect(first.header("location") == "/v1/instances/\(id)")
        let again = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(again.status == 201 && again.body == first.body)
        #expect(again.header("location") == "/v1/instances/\(id)")
        try server.restart()
        c = server.router()
        let afterRestart = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(afterRestart.header("location") == "/v1/instances/\(id)" && afterRestart.body == first.body)
        #expect((try c.request("GET", "/v1/instances").json["items"] as? [Any])?.count == 1, "one instance was created")
    }

    @Test("replaying a create whose instance was deleted is refused with 409 naming it, and creates nothing")
    func replayAfterDelete() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let key = [("Idempotency-Key", "gone-1")]
        let first = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        let id = try #require(first.json["id"] as? String)
        #expect(try c.request("DELETE", "/v1/instances/\(id)").status == 204)
        let replay = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(replay.status == 409 && replay.header("content-type") == "application/problem+json")
        #expect(replay.header("location") == nil)
        #expect(replay.json["instance"] as? String == id)
        #expect(replay.json["type"] as? String == "/problems/created-instance-deleted")
        #expect(replay.json["detail"] as? String
            == "instance \"\(id)\", created by the first request with Idempotency-Key \"gone-1\", has since been deleted; nothing was created")
        #expect(try c.request("GET", "/v1/instances/\(id)").status == 404)
        #expect((try c.request("GET", "/v1/instances").json["items"] as? [Any])?.isEmpty == true)

        // Another instance made since with the same id is not the one the key created.
        let named = [("Idempotency-Key", "named-1")]
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "named"}"#, headers: named).status == 201)
        #expect(try c.request("DELETE", "/v1/instances/named").status == 204)
        #expect(try c.request("PUT", "/v1/instances/named", json: #"{"model": "android-activity"}"#).status == 201)
        let stale = try c.request("POST", "/v1/instances", json: #"{"id": "named"}"#, headers: named)
        #expect(stale.status == 409 && stale.json["instance"] as? String == "named")
        #expect(try c.request("GET", "/v1/instances/named").json["model"] as? String == "android-activity")
    }

    @Test("keys a version-2 database kept as responses replay the same answers after the upgrade, and apply nothing again", .sqliteOnly("writes a version-2 SQLite schema"))
    func replayAcrossUpgrade() throws {
        let server = try TestServer()
        var c = try server.connect()
        let create = #"{"id": "a"}"#
        let created = try c.request("POST", "/v1/instances", json: create)
        let odd = #"{"event": "willConnectToWindow", "window": "é \"main\" \\ \u0001"}"#
        let unexpected = try c.event("a", odd)
        let launch = #"{"event": "didFinishLaunching"}"#
        let launched = try c.event("a", launch)
        #expect(created.status == 201 && unexpected.status == 409 && launched.status == 200)
        server.service!.stop()
        server.service = nil

        // Back to version 2, with the keys it would have kept for these requests: the responses,
        // the 409 a problem around the stored record as version 2 wrote it.
        do {
            let database = try Database(path: server.dataDirectory + "/" + SQLiteStore.fileName)
            let record = try #require(try database.first("SELECT body FROM records WHERE instance = 'a' AND version = 1") { $0.bytes(0) })
            let problem = Array(#"{"type":"/problems/unexpected-event","title":"Unexpected Event","status":409,"detail":"\"willConnectToWindow\" is not expected in state \"initializing\"; it was recorded and counted","record":"#.utf8)
                + record + Array("}".utf8)
            // As version 2 answered, apart from the newline that now ends every body.
            #expect(unexpected.body == problem + [UInt8(ascii: "\n")], "answered as version 2 answered")
            try database.transaction { () throws(SQLiteError) in
                // Version 2's lifecycled recorded no migrations' names.
                try database.execute("""
                    DROP TABLE schema_migrations;
                    DROP TABLE idempotency;
                    CREATE TABLE idempotency (
                        key TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, status INTEGER NOT NULL, content_type TEXT NOT NULL,
                        body BLOB NOT NULL, created_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX idempotency_by_age ON idempotency(created_at);
                    DROP TABLE coverage;
                    DROP INDEX records_divergent;
                    ALTER TABLE records DROP COLUMN divergent;
                    ALTER TABLE instances DROP COLUMN divergences;
                    ALTER TABLE instances DROP COLUMN dropped;
                    ALTER TABLE instances DROP COLUMN labels;
                    DROP TABLE findings;
                    DROP TABLE finding_instances;
                    PRAGMA user_version = 2;
                    """)
                let insert = try database.prepare("INSERT INTO idempotency VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                for (key, request, status, contentType, body) in [
                    ("create", "POST /v1/instances\n" + create, 201, "application/json", Array(created.body.dropLast())),
                    ("odd", "POST /v1/instances/a/events\n" + odd, 409, "application/problem+json", problem),
                    ("launch", "POST /v1/instances/a/events\n" + launch, 200, "application/json", Array(launched.body.dropLast())),
                ] {
                    try insert.run([
                        .text(key), .bytes(Array(request.utf8)), .integer(Int64(status)), .text(contentType), .bytes(body),
                        .integer(Codec.milliseconds(Date())),
                    ])
                }
            }
        }
        server.service = try Service(configuration: server.configuration)
        #expect(try (server.service!.store as! SQLiteStore).schemaVersion() == SQLiteStore.migrations.count)
        c = try server.connect()

        let createdAgain = try c.request("POST", "/v1/instances", json: create, headers: [("Idempotency-Key", "create")])
        #expect(createdAgain.status == 201 && createdAgain.body == created.body)
        #expect(createdAgain.header("location") == "/v1/instances/a")
        let unexpectedAgain = try c.event("a", odd, headers: [("Idempotency-Key", "odd")])
        #expect(unexpectedAgain.status == 409 && unexpectedAgain.body == unexpected.body)
        #expect(unexpectedAgain.header("content-type") == "application/problem+json")
        let launchedAgain = try c.event("a", launch, headers: [("Idempotency-Key", "launch")])
        #expect(launchedAgain.status == 200 && launchedAgain.body == launched.body)
        #expect(try c.fullHistory("a").count == 2, "nothing was applied again")
    }

    @Test("a number JSON cannot hold is refused before it is stored; a render that fails answers 500, not an empty 200")
    func renderFailure() throws {
        let models = TemporaryDirectory()
        try """
        {"name": "dial", "states": [{"name": "idle", "kind": "initial"}, {"name": "on", "kind": "permanent", "actionHook": "Dial.turn"}],
         "events": [{"name": "start"}], "actions": [{"name": "turn", "parameters": [{"name": "by", "type": "number", "required": true}]}],
         "transitions": [{"from": "idle", "event": "start", "to": "on"}]}
        """.write(toFile: models.path + "/dial.json", atomically: true, encoding: .utf8)
        let server = try TestServer(.router) { $0.modelsDirectory = models.path }
        let c = server.router()
        try c.makeInstance("knob", model: "dial")
        // HTTP bodies cannot carry infinity (the parser refuses it); the registry's own callers can.
        let answers = try commitAsOneBatch(server.service!.registry, [
            .apply(.action("turn", ["by": .number(.infinity)]), id: "knob", expected: nil, key: nil),
        ])
        #expect(answers.map(\.status) == [422])
        let got = try c.request("GET", "/v1/instances/knob")
        #expect(got.status == 200 && got.json["version"] as? Int == 0)

        // Rendering itself, given a state that cannot be written (no write path makes one now).
        var instance = try server.service!.registry.instance("knob")
        instance.state.bufferedAction = PendingAction(name: "turn", parameters: ["by": .number(.nan)])
        var json = JSONBuffer(capacity: 0)
        let refusal = #expect(throws: InstanceRegistry.Refusal.self) { try server.service!.registry.write(instance, to: &json) }
        let problem = refusal.map(Problem.init)
        #expect(problem?.status == 500)
        #expect(problem?.detail == "instance \"knob\" could not be written as JSON; see the service log")
    }
}
