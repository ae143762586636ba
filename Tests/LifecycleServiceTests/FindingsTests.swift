import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

@Suite("findings")
struct FindingsTests {
    /// The findings `query` answers, as JSON objects.
    static func findings(_ c: some APIClient, _ query: String = "") throws -> [[String: Any]] {
        let answer = try c.request("GET", "/v1/findings\(query.isEmpty ? "" : "?" + query)")
        #expect(answer.status == 200, "\(query): \(answer.json)")
        return answer.json["items"] as? [[String: Any]] ?? []
    }

    /// The findings by signature.
    static func bySignature(_ items: [[String: Any]]) -> [String: [String: Any]] {
        Dictionary(uniqueKeysWithValues: items.map { ($0["signature"] as! String, $0) })
    }

    static let unexpected = "unexpected:ios-app:initializing:event:didBecomeActive"
    static let believed = "divergence:ios-app:launching:believedState:foreground"
    static let missing = "divergence:ios-app:launching:missingHook:Launching.init"
    static let extra = "divergence:ios-app:launching:extraHook:Extra.hook"
    static let incomplete = "incompleteLaunch:ios-app:ui-attached"
    static let gap = "gap:ios-app"

    /// Three instances' problems, as (instance, kind, body) requests: p-1 (run r1) two unexpected
    /// events, p-2 (run r2) one and a divergence of every kind, an incomplete launch and a gap,
    /// p-3 (no labels) one unexpected event.
    static let requests: [(instance: String, kind: String, body: String)] = [
        ("p-1", "create", #"{"labels": {"run": "r1"}}"#),
        ("p-2", "create", #"{"labels": {"run": "r2", "app.version": "2.1"}}"#),
        ("p-3", "create", "{}"),
        ("p-1", "event", #"{"event": "didBecomeActive"}"#),
        ("p-2", "event", #"{"event": "didBecomeActive"}"#),
        ("p-1", "event", #"{"event": "didBecomeActive"}"#),
        ("p-3", "event", #"{"event": "didBecomeActive"}"#),
        ("p-2", "event", #"{"event": "didFinishLaunching", "believedState": "foreground", "ranHooks": ["Extra.hook"]}"#),
        ("p-2", "event", #"{"event": "willConnectToWindow", "window": "main"}"#),
        ("p-2", "launch", "{}"),
        ("p-2", "event", #"{"event": "didFinishLaunching"}"#),
        ("p-2", "gap", #"{"dropped": 3}"#),
    ]

    /// Sends ``requests`` one by one.
    static func postEach(_ c: some APIClient) throws {
        for (id, kind, body) in requests {
            let path = switch kind {
            case "create": "/v1/instances/\(id)"
            case "launch": "/v1/instances/\(id)/relaunches"
            default: "/v1/instances/\(id)/\(kind)s"
            }
            let answer = try c.request(kind == "create" ? "PUT" : "POST", path, json: body)
            #expect([200, 201, 409].contains(answer.status), "\(kind) \(body): \(answer.json)")
        }
    }

    /// Sends ``requests`` as one batch: one transaction.
    static func postBatch(_ c: some APIClient) throws {
        let items = requests.map { #"{"instance": "\#($0.instance)", "kind": "\#($0.kind)", "body": \#($0.body)}"# }
        let answer = try c.request("POST", "/v1/batch", json: #"{"items": [\#(items.joined(separator: ","))]}"#)
        #expect(answer.status == 200)
        let statuses = (answer.json["results"] as? [[String: Any]])?.compactMap { $0["status"] as? Int }
        #expect(statuses == [201, 201, 201, 409, 409, 409, 409, 200, 200, 200, 200, 200])
    }

    /// What ``requests`` make, however they were sent.
    static func checkAnswer(_ c: some APIClient) throws {
        let items = try findings(c)
        let found = bySignature(items)
        #expect(Set(found.keys) == [unexpected, believed, missing, extra, incomplete, gap])
        // Most widespread first: the unexpected event on three instances.
        #expect(items.first?["signature"] as? String == unexpected)
        let u = try #require(found[unexpected])
        #expect(u["kind"] as? String == "unexpected" && u["model"] as? String == "ios-app" && u["state"] as? String == "initializing")
        #expect(u["event"] as? String == "didBecomeActive" && u["action"] == nil)
        #expect(u["count"] as? Int == 4 && u["instances"] as? Int == 3)
        #expect(u["examples"] as? [String] == ["p-1", "p-2", "p-3"])
        #expect((u["links"] as? [String: String])?["instances"] == "/v1/instances?finding=unexpected%3Aios-app%3Ainitializing%3Aevent%3AdidBecomeActive")
        // First and last seen are the first and last such record's times.
        let times = try ["p-1", "p-2", "p-3"].flatMap { id in
            try c.fullHistory(id).filter { $0["outcome"] as? String == "unexpected" }.compactMap { $0["time"] as? String }
        }.sorted()
        #expect(u["firstSeen"] as? String == times.first && u["lastSeen"] as? String == times.last && times.count == 4)
        #expect((found[believed]?["diverged"] as? [String: String]) == ["believedState": "foreground"] && found[believed]?["state"] as? String == "launching")
        #expect((found[missing]?["diverged"] as? [String: String]) == ["missingHook": "Launching.init"])
        #expect((found[extra]?["diverged"] as? [String: String]) == ["extraHook": "Extra.hook"])
        #expect(found[incomplete]?["step"] as? String == "ui-attached" && found[incomplete]?["kind"] as? String == "incompleteLaunch")
        #expect(found[gap]?["kind"] as? String == "gap" && found[gap]?["state"] == nil)
        for signature in [believed, missing, extra, incomplete, gap] {
            #expect(found[signature]?["count"] as? Int == 1 && found[signature]?["instances"] as? Int == 1, "\(signature)")
            #expect(found[signature]?["examples"] as? [String] == ["p-2"], "\(signature)")
        }
        // Per label: that label's instances only.
        let r1 = bySignature(try findings(c, "label=run=r1"))
        #expect(Set(r1.keys) == [unexpected])
        #expect(r1[unexpected]?["count"] as? Int == 2 && r1[unexpected]?["instances"] as? Int == 1 && r1[unexpected]?["examples"] as? [String] == ["p-1"])
        let version = bySignature(try findings(c, "label=app.version=2.1"))
        #expect(Set(version.keys) == [unexpected, believed, missing, extra, incomplete, gap])
        #expect(version[unexpected]?["count"] as? Int == 1 && version[unexpected]?["instances"] as? Int == 1)
        #expect(try findings(c, "label=run=r9").isEmpty)
    }

    @Test("each kind, counted from single posts: counts, instances, first and last seen, examples; per label")
    func singlePosts() throws {
        let server = try TestServer()
        let c = server.router()
        try Self.postEach(c)
        try Self.checkAnswer(c)
    }

    @Test("the same from one batch, one transaction: grouped in memory, each finding written once")
    func batch() throws {
        let server = try TestServer()
        let c = server.router()
        try Self.postBatch(c)
        try Self.checkAnswer(c)
        // A second batch adds to what the first stored.
        let again = try c.request("POST", "/v1/batch", json: #"{"items": [{"instance": "p-3", "kind": "gap", "body": {"dropped": 1}}, {"instance": "p-3", "kind": "gap", "body": {"dropped": 1}}]}"#)
        #expect(again.status == 200)
        let gap = Self.bySignature(try Self.findings(c))[Self.gap]
        #expect(gap?["count"] as? Int == 3 && gap?["instances"] as? Int == 2 && gap?["examples"] as? [String] == ["p-2", "p-3"])
    }

    @Test("filters: model, kind, since, label; bad ones are 400")
    func filters() throws {
        let server = try TestServer()
        let c = server.router()
        try Self.postEach(c)
        #expect(try Self.findings(c, "model=android-activity").isEmpty)
        #expect(try Self.findings(c, "model=ios-app").count == 6)
        #expect(try Self.findings(c, "kind=divergence").compactMap { $0["signature"] as? String }.sorted() == [Self.believed, Self.extra, Self.missing])
        #expect(try Self.findings(c, "kind=gap&model=ios-app").compactMap { $0["signature"] as? String } == [Self.gap])
        #expect(try Self.findings(c, "since=2000-01-01T00:00:00Z").count == 6)
        #expect(try Self.findings(c, "since=2999-01-01T00:00:00%2B01:00").isEmpty)
        #expect(try Self.findings(c, "limit=2").count == 2)
        for bad in ["model=nokia", "kind=crash", "since=yesterday", "since=2026-12-02T05:00:00", "label=run", "label=run=r1&label=run=r2", "colour=red", "limit=0"] {
            let answer = try c.request("GET", "/v1/findings?\(bad)")
            #expect(answer.status == 400, "\(bad)")
            #expect(answer.header("content-type") == "application/problem+json")
        }
        // since keeps findings last seen at or after it, with their counts whole.
        let gap = try #require(Self.bySignature(try Self.findings(c))[Self.gap])
        let lastSeen = try #require(gap["lastSeen"] as? String)
        let recent = Self.bySignature(try Self.findings(c, "since=\(lastSeen)"))
        #expect(recent[Self.gap]?["count"] as? Int == 1 && recent[Self.unexpected] == nil)
    }

    @Test("a restart answers the same; ?finding= lists the instances; a delete leaves the counts and the list")
    func restartAndInstances() throws {
        let server = try TestServer()
        try Self.postEach(server.router())
        let before = try server.router().request("GET", "/v1/findings").body
        try server.restart()
        let c = server.router()
        #expect(try c.request("GET", "/v1/findings").body == before)
        try Self.checkAnswer(c)
        let link = try #require((Self.bySignature(try Self.findings(c))[Self.unexpected]?["links"] as? [String: String])?["instances"])
        let linked = try c.request("GET", link)
        #expect((linked.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["p-1", "p-2", "p-3"])
        #expect(try listed(c, "finding=\(Self.gap.replacingOccurrences(of: ":", with: "%3A"))") == ["p-2"])
        #expect(try listed(c, "finding=\(Self.unexpected)&label=run=r1") == ["p-1"])
        #expect(try listed(c, "finding=unexpected:nothing").isEmpty)

        // Deleted: the counts are history and stay; the instance leaves the list.
        #expect(try c.request("DELETE", "/v1/instances/p-2").status == 204)
        #expect(try listed(c, "finding=\(Self.unexpected)") == ["p-1", "p-3"])
        #expect(try listed(c, "finding=\(Self.gap)").isEmpty)
        #expect(Self.bySignature(try Self.findings(c))[Self.unexpected]?["instances"] as? Int == 3)
        // Made again under its id, it is another instance.
        try c.makeInstance("p-2")
        #expect(try c.event("p-2", #"{"event": "didBecomeActive"}"#).status == 409)
        let u = Self.bySignature(try Self.findings(c))[Self.unexpected]
        #expect(u?["count"] as? Int == 5 && u?["instances"] as? Int == 4 && u?["examples"] as? [String] == ["p-1", "p-2", "p-3", "p-2"])
        #expect(try listed(c, "finding=\(Self.unexpected)") == ["p-1", "p-2", "p-3"])
        try server.restart()
        #expect(try listed(server.router(), "finding=\(Self.unexpected)") == ["p-1", "p-2", "p-3"])
    }

    @Test("another model's unexpected event is a finding of its own, with its own signature")
    func actionsAndSignatures() throws {
        let server = try TestServer()
        let c = server.router()
        try c.makeInstance("a", model: "android-activity")
        #expect(try c.event("a", #"{"event": "onResume"}"#).status == 409)
        let items = try Self.findings(c, "model=android-activity")
        #expect(items.count == 1 && items.first?["state"] as? String == "initialized" && items.first?["event"] as? String == "onResume")
        #expect(items.first?["signature"] as? String == "unexpected:android-activity:initialized:event:onResume")
    }
}
