import Foundation
import Testing
import LifecycleKit
import MicroHTTP
@testable import LifecycleService

@Suite("idempotent create and rendering")
struct ReplayAndRenderTests {
    @Test("replaying POST /v1/instances without an id names the instance first created, in Location too")
    func replayNamesStoredInstance() throws {
        let server = try TestServer()
        var c = try server.connect()
        let key = [("Idempotency-Key", "create-once")]
        let first = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(first.status == 201)
        let id = try #require(first.json["id"] as? String)
        #expect(first.header("location") == "/v1/instances/\(id)")
        let again = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(again.status == 201 && again.body == first.body)
        #expect(again.header("location") == "/v1/instances/\(id)")
        try server.restart()
        c = try server.connect()
        let afterRestart = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(afterRestart.header("location") == "/v1/instances/\(id)" && afterRestart.body == first.body)
        #expect((try c.request("GET", "/v1/instances").json["items"] as? [Any])?.count == 1, "one instance was created")
    }

    @Test("replaying a create whose instance was deleted is refused with 409 naming it, and creates nothing")
    func replayAfterDelete() throws {
        let server = try TestServer()
        let c = try server.connect()
        let key = [("Idempotency-Key", "gone-1")]
        let first = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        let id = try #require(first.json["id"] as? String)
        #expect(try c.request("DELETE", "/v1/instances/\(id)").status == 204)
        let replay = try c.request("POST", "/v1/instances", headers: key, body: [], contentType: nil)
        #expect(replay.status == 409 && replay.header("content-type") == "application/problem+json")
        #expect(replay.header("location") == nil)
        #expect(replay.json["instance"] as? String == id)
        #expect(replay.json["type"] as? String == "https://lifecycled.dev/problems/created-instance-deleted")
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

    @Test("a number JSON cannot hold is refused before it is stored; a render that fails answers 500, not an empty 200")
    func renderFailure() throws {
        let models = TemporaryDirectory()
        try """
        {"name": "dial", "states": [{"name": "idle", "kind": "initial"}, {"name": "on", "kind": "permanent", "actionHook": "Dial.turn"}],
         "events": [{"name": "start"}], "actions": [{"name": "turn", "parameters": [{"name": "by", "type": "number", "required": true}]}],
         "transitions": [{"from": "idle", "event": "start", "to": "on"}]}
        """.write(toFile: models.path + "/dial.json", atomically: true, encoding: .utf8)
        let server = try TestServer { $0.modelsDirectory = models.path }
        let c = try server.connect()
        try c.makeInstance("knob", model: "dial")
        // HTTP bodies cannot carry infinity (the parser refuses it); the registry's own callers can.
        let answers = try commitAsOneBatch(server.service!.registry, [
            .apply(.action("turn", ["by": .number(.infinity)]), id: "knob", expectedVersions: nil, key: nil),
        ])
        #expect(answers.map(\.status) == [422])
        let got = try c.request("GET", "/v1/instances/knob")
        #expect(got.status == 200 && got.json["version"] as? Int == 0)

        // Rendering itself, given a state that cannot be written (no write path makes one now).
        var instance = try server.service!.registry.instance("knob")
        instance.state.bufferedAction = PendingAction(name: "turn", parameters: ["by": .number(.nan)])
        let problem = #expect(throws: Problem.self) { try server.service!.registry.render(instance) }
        #expect(problem?.status == 500)
        #expect(problem?.detail == "instance \"knob\" could not be written as JSON; see the service log")
    }
}
