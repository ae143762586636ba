import Foundation
import LifecycleTestSupport
import LifecycleKit
import LifecycleLocks
import Testing
@testable import LifecycleService

/// What the coverage of a model should be, counted from the records themselves (every
/// instance's full history) and from the instance list.
struct CountedCoverage: Equatable, CustomStringConvertible {
    var taken: [String: Int] = [:]
    var unexpected: [String: Int] = [:]
    /// Per row, the records that took it with a divergence.
    var divergent: [String: Int] = [:]
    /// Per state, the divergent records whose `to` it is.
    var divergences: [String: Int] = [:]

    /// Adds what the records of one instance's history say.
    mutating func count(_ records: [[String: Any]]) {
        for record in records {
            if let row = record["row"] as? String { taken[row, default: 0] += 1 }
            if record["outcome"] as? String == "unexpected", let from = record["from"] as? String { unexpected[from, default: 0] += 1 }
            guard record["divergence"] is [String: Any] else { continue }
            if let row = record["row"] as? String { divergent[row, default: 0] += 1 }
            if let to = record["to"] as? String { divergences[to, default: 0] += 1 }
        }
    }

    /// What `GET /v1/models/{model}/coverage` answered, as the same tables (zeros left out).
    init(answer: [String: Any]) {
        for row in answer["rows"] as? [[String: Any]] ?? [] {
            let name = row["row"] as? String ?? "?"
            if row["taken"] as? Int != 0 { taken[name] = row["taken"] as? Int }
            if row["divergent"] as? Int != 0 { divergent[name] = row["divergent"] as? Int }
        }
        for state in answer["states"] as? [[String: Any]] ?? [] {
            let name = state["state"] as? String ?? "?"
            if state["unexpected"] as? Int != 0 { unexpected[name] = state["unexpected"] as? Int }
            if state["divergences"] as? Int != 0 { divergences[name] = state["divergences"] as? Int }
        }
    }

    init() {}

    var description: String {
        func sorted(_ table: [String: Int]) -> String { "\(table.sorted { $0.key < $1.key })" }
        return "taken \(sorted(taken)), unexpected \(sorted(unexpected)), divergent \(sorted(divergent)), divergences \(sorted(divergences))"
    }
}

extension APIClient {
    func coverage(_ model: String = "ios-app") throws -> [String: Any] {
        let response = try request("GET", "/v1/models/\(model)/coverage")
        #expect(response.status == 200 && response.header("content-type") == "application/json")
        return response.json
    }

    /// Per state of the coverage answer: (instances, unexpected, incompleteLaunches).
    func stateCounts(_ model: String = "ios-app") throws -> [String: [Int]] {
        var counts: [String: [Int]] = [:]
        for state in try coverage(model)["states"] as? [[String: Any]] ?? [] {
            counts[state["state"] as? String ?? "?"] = ["instances", "unexpected", "incompleteLaunches"].map { state[$0] as? Int ?? -1 }
        }
        return counts
    }

    /// Instances per state as the list says, through every page.
    func listedPerState(model: String, states: [String]) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for state in states {
            var cursor: String?
            repeat {
                let page = try request("GET", "/v1/instances?model=\(model)&state=\(state)&limit=1000" + (cursor.map { "&cursor=\($0)" } ?? "")).json
                counts[state, default: 0] += (page["items"] as? [Any])?.count ?? 0
                cursor = page["nextCursor"] as? String
            } while cursor != nil
        }
        return counts
    }

    func conformance(_ model: String = "ios-app", _ json: String) throws -> HTTPResponse {
        try request("POST", "/v1/models/\(model)/conformance", json: json)
    }
}

@Suite("coverage")
struct CoverageTests {
    static let iosStates = Model.iosApp.definition.states.map(\.name)

    /// Events on three iOS instances and one Android one: rows taken, unexpected events in
    /// two states, an action and a relaunch (which take no row), and an incomplete launch.
    static func makeFleet(_ c: some APIClient) throws {
        try c.makeInstance("a", events: coldStart + ["willResignActive", "didEnterBackground"])
        #expect(try c.event("a", #"{"event": "didFinishLaunching"}"#).status == 409, "unexpected in background")
        #expect(try c.request("POST", "/v1/instances/a/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#).status == 200)
        try c.makeInstance("b", events: ["didFinishLaunching"])
        #expect(try c.event("b", #"{"event": "didBecomeActive"}"#).status == 409, "unexpected in launching")
        #expect(try c.event("b", #"{"event": "didBecomeActive"}"#).status == 409)
        // A launch that connected a scene and never finished: the next launch finds it.
        try c.makeInstance("c", events: ["didFinishLaunching", "willConnectToWindow"])
        #expect(try c.request("POST", "/v1/instances/c/relaunches", headers: [], body: [], contentType: nil).status == 200)
        let relaunched = try c.event("c", #"{"event": "didFinishLaunching"}"#)
        #expect(relaunched.json["incompleteLaunch"] != nil)
        try c.makeInstance("droid", model: "android-activity", events: ["onCreate", "onStart", "onResume"])
    }

    /// The coverage answered equals what the records say; instance counts equal the list's.
    static func expectMatchesRecords(_ c: some APIClient, instances: [String], deletedCounts: CountedCoverage = CountedCoverage()) throws {
        var counted = deletedCounts
        for id in instances { counted.count(try c.fullHistory(id)) }
        let answer = try c.coverage()
        #expect(CountedCoverage(answer: answer) == counted)
        let states = try c.stateCounts()
        let listed = try c.listedPerState(model: "ios-app", states: iosStates)
        #expect(states.mapValues { $0[0] } == listed)
    }

    @Test("counts match the records, survive a restart and a delete, and go on counting")
    func countsMatchRecords() throws {
        let server = try TestServer(.router)
        var c = server.router()
        try Self.makeFleet(c)
        try Self.expectMatchesRecords(c, instances: ["a", "b", "c"])

        // The known sequence, spelled out: r2 (didFinishLaunching in initializing) by a, b and
        // c twice; r4 (willConnectToWindow in launching) by a and c; r5, r10, r11 by a.
        let answer = try c.coverage()
        let rows = try #require(answer["rows"] as? [[String: Any]])
        #expect(rows.map { $0["row"] as? String } == Model.iosApp.definition.transitions.indices.map(Model.rowID))
        let taken = Dictionary(uniqueKeysWithValues: rows.map { ($0["row"] as? String ?? "?", $0["taken"] as? Int ?? -1) })
        #expect(taken["r2"] == 4 && taken["r4"] == 2 && taken["r5"] == 1 && taken["r10"] == 1 && taken["r11"] == 1)
        #expect(rows[1]["from"] as? String == "initializing" && rows[1]["event"] as? String == "didFinishLaunching" && rows[1]["to"] as? String == "launching")
        #expect(answer["neverTaken"] as? [String] == rows.filter { $0["taken"] as? Int == 0 }.compactMap { $0["row"] as? String })
        #expect((answer["neverTaken"] as? [String])?.contains("r1") == true)
        let states = try c.stateCounts()
        #expect(states["background"] == [1, 1, 0])
        #expect(states["launching"] == [2, 2, 1], "b and c are launching; b had two unexpected events there; c an incomplete launch")
        #expect(states["foreground"] == [0, 0, 0] && states["initializing"] == [0, 0, 0])
        let android = try c.coverage("android-activity")
        #expect(CountedCoverage(answer: android).taken.values.reduce(0, +) == 3, "each model counts its own rows")
        #expect(android["model"] as? String == "android-activity")

        // The incomplete launch moves with its instance.
        #expect(try c.event("c", #"{"event": "willConnectToWindow", "window": "main"}"#).status == 200)
        #expect(try c.stateCounts()["launching"]?[2] == 0 && c.stateCounts()["connected"] == [1, 0, 1])

        let before = try c.request("GET", "/v1/models/ios-app/coverage").body
        try server.restart()
        c = server.router()
        #expect(try c.request("GET", "/v1/models/ios-app/coverage").body == before, "the same after a restart")

        // A deleted instance's records stay counted; it leaves the instance counts.
        var deleted = CountedCoverage()
        deleted.count(try c.fullHistory("a"))
        #expect(try c.request("DELETE", "/v1/instances/a").status == 204)
        try Self.expectMatchesRecords(c, instances: ["b", "c"], deletedCounts: deleted)
        #expect(try c.stateCounts()["background"] == [0, 1, 0])
        deleted.count(try c.fullHistory("c"))
        #expect(try c.request("DELETE", "/v1/instances/c").status == 204)
        #expect(try c.stateCounts()["connected"] == [0, 0, 0], "the deleted instance's incomplete launch is no longer counted")

        try server.restart()
        c = server.router()
        try Self.expectMatchesRecords(c, instances: ["b"], deletedCounts: deleted)
        // Counting goes on from the stored counters.
        let r4 = try #require(CountedCoverage(answer: try c.coverage()).taken["r4"])
        #expect(try c.event("b", #"{"event": "willConnectToWindow", "window": "main"}"#).status == 200)
        try Self.expectMatchesRecords(c, instances: ["b"], deletedCounts: deleted)
        #expect(CountedCoverage(answer: try c.coverage()).taken["r4"] == r4 + 1)
    }

    @Test("divergent records are counted per row and per state (an unexpected event's in its from), match the records and survive a restart and a delete")
    func divergences() throws {
        let server = try TestServer(.router)
        var c = server.router()
        try c.makeInstance("d")
        // r2 taken with a belief that agrees: taken, not divergent.
        #expect(try c.event("d", #"{"event": "didFinishLaunching", "believedState": "launching"}"#).status == 200)
        // r4 with hooks the model does not run: divergent, in connected.
        let hooks = try c.event("d", #"{"event": "willConnectToWindow", "window": "main", "ranHooks": ["Connected.onTransition", "Connected.onTransition"]}"#)
        #expect(hooks.status == 200 && hooks.json["divergence"] != nil, "\(hooks.text)")
        // r5 with a wrong belief and hooks in another order: one divergent record, in foreground.
        let both = try c.event("d", #"{"event": "didBecomeActive", "believedState": "background", "ranHooks": ["Foreground.didReturn", "Foreground.onTransition"]}"#)
        #expect(both.status == 200 && both.json["row"] as? String == "r5")
        // An unexpected event with a wrong belief: no row, counted in its from (foreground).
        let unexpected = try c.event("d", #"{"event": "willEnterForeground", "believedState": "launching"}"#)
        #expect(unexpected.status == 409)
        // An action with a wrong belief: no row, counted in foreground.
        #expect(try c.request("POST", "/v1/instances/d/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com", "believedState": "background"}"#).status == 200)
        try c.makeInstance("e", events: ["didFinishLaunching"])
        #expect(try c.event("e", #"{"event": "willConnectToWindow", "window": "main", "believedState": "foreground"}"#).status == 200)

        let answer = try c.coverage()
        let counted = CountedCoverage(answer: answer)
        #expect(counted.divergent == ["r4": 2, "r5": 1], "\(counted)")
        #expect(counted.divergences == ["connected": 2, "foreground": 3], "\(counted)")
        #expect(counted.taken["r2"] == 2 && counted.taken["r5"] == 1)
        let rows = try #require(answer["rows"] as? [[String: Any]])
        #expect(rows.allSatisfy { $0["divergent"] is Int }, "every row has its divergent count")
        #expect(Array(rows[1].keys).sorted() == ["divergent", "event", "from", "row", "taken", "to"])
        let states = try #require(answer["states"] as? [[String: Any]])
        #expect(states.allSatisfy { $0["divergences"] is Int }, "every state has its divergences")
        try Self.expectMatchesRecords(c, instances: ["d", "e"])
        let devices = try c.request("GET", "/v1/instances/d").json["counters"] as? [String: Any]
        #expect(devices?["divergences"] as? Int == 4, "the instance counts its own")

        let before = try c.request("GET", "/v1/models/ios-app/coverage").body
        try server.restart()
        c = server.router()
        #expect(try c.request("GET", "/v1/models/ios-app/coverage").body == before, "the same after a restart")

        // A deleted instance's divergences stay counted, and counting goes on from the stored counters.
        var deleted = CountedCoverage()
        deleted.count(try c.fullHistory("e"))
        #expect(try c.request("DELETE", "/v1/instances/e").status == 204)
        #expect(try c.event("d", #"{"event": "willResignActive", "ranHooks": []}"#).status == 200)
        try Self.expectMatchesRecords(c, instances: ["d"], deletedCounts: deleted)
        try server.restart()
        c = server.router()
        try Self.expectMatchesRecords(c, instances: ["d"], deletedCounts: deleted)
        #expect(CountedCoverage(answer: try c.coverage()).divergences == ["connected": 2, "foreground": 4])
    }

    @Test("a fresh server has every row never taken; an unknown model is 404")
    func freshServer() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let answer = try c.coverage()
        #expect(answer["model"] as? String == "ios-app")
        #expect(answer["neverTaken"] as? [String] == Model.iosApp.definition.transitions.indices.map(Model.rowID))
        #expect((answer["states"] as? [[String: Any]])?.map { $0["state"] as? String } == Self.iosStates)
        #expect(try c.stateCounts().values.allSatisfy { $0 == [0, 0, 0] })
        let missing = try c.request("GET", "/v1/models/windows-95/coverage")
        #expect(missing.status == 404 && missing.header("content-type") == "application/problem+json")
    }

    @Test("group commits from concurrent clients count every record once")
    func concurrentWrites() throws {
        let server = try TestServer()
        let setup = try server.connect()
        for client in 0..<6 { try setup.makeInstance("app-\(client)", events: coldStart) }
        let failures = LockedValue<[String]>([])
        startClients(6, port: server.port) { client, c in
            for i in 0..<150 {
                // Alternating rows r10 and r9, and now and then an unexpected event in foreground.
                let event = i % 10 == 9 ? "willEnterForeground" : (i % 2 == 0 ? "willResignActive" : "didBecomeActive")
                guard let status = try? c.event("app-\(client)", #"{"event": "\#(event)"}"#).status, status == 200 || status == 409 else {
                    failures.withLock { $0.append("client \(client) event \(i)") }
                    return
                }
            }
        }.wait()
        #expect(failures.withLock { $0 } == [])
        try Self.expectMatchesRecords(setup, instances: (0..<6).map { "app-\($0)" })
        #expect(try setup.stateCounts()["foreground"] == [6, 6 * 15, 0])
    }
}

@Suite("conformance and scenarios")
struct ConformanceTests {
    @Test("a conforming trace: records, beliefs, rows exercised")
    func conforming() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let response = try c.conformance("ios-app", """
            {"steps": [
              {"event": "didFinishLaunching", "believedState": "launching"},
              {"event": "willConnectToWindow", "window": "main", "believedState": "connected"},
              {"action": "openURL", "url": "https://duckduckgo.com"},
              {"event": "didBecomeActive", "believedState": "foreground"},
              {"event": "willResignActive", "isTesting": null}
            ]}
            """)
        #expect(response.status == 200 && response.header("content-type") == "application/json")
        let answer = response.json
        #expect(answer["conforming"] as? Bool == true)
        #expect(answer.keys.contains("firstProblem") && answer["firstProblem"] is NSNull)
        #expect(answer["finalState"] as? String == "foreground")
        #expect(answer["exercisedRows"] as? [String] == ["r2", "r4", "r5", "r10"])
        let steps = try #require(answer["steps"] as? [[String: Any]])
        #expect(steps.count == 5)
        #expect(steps[0]["believedState"] as? String == "launching" && steps[0]["beliefCorrect"] as? Bool == true)
        #expect(steps[2]["believedState"] == nil && steps[2]["beliefCorrect"] == nil)
        let records = steps.compactMap { $0["record"] as? [String: Any] }
        #expect(records.count == 5)
        #expect(records.map { $0["version"] as? Int } == [1, 2, 3, 4, 5])
        #expect(records[2]["disposition"] as? String == "buffered")
        #expect(records[3]["hooks"] as? [String] == ["Foreground.onTransition", "Foreground.didReturn", "Foreground.handle(openURL)"])
        #expect(records[3]["deliveredAction"] != nil && records[1]["parameters"] as? [String: String] == ["window": "main"])
        #expect(records.allSatisfy { $0["instance"] == nil && $0["sequence"] as? Int == 0 }, "a replay's records belong to no instance")

        // Android, and a relaunch step.
        let android = try c.conformance("android-activity", #"{"steps": [{"event": "onCreate"}, {"relaunch": true, "believedState": "initialized"}]}"#)
        #expect(android.status == 200 && android.json["conforming"] as? Bool == true && android.json["finalState"] as? String == "initialized")
        let empty = try c.conformance("ios-app", #"{"steps": []}"#)
        #expect(empty.json["conforming"] as? Bool == true && empty.json["finalState"] as? String == "initializing")
        #expect(empty.json["exercisedRows"] as? [String] == [] && empty.json["steps"] as? [Any] != nil)
    }

    @Test("a wrong event, a belief mismatch and a bad parameter are each the first problem at their step")
    func problems() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let wrong = try c.conformance("ios-app", """
            {"steps": [{"event": "didFinishLaunching"}, {"event": "didBecomeActive"}, {"event": "willConnectToWindow", "window": "w", "believedState": "foreground"}]}
            """)
        #expect(wrong.status == 200)
        #expect(wrong.json["conforming"] as? Bool == false)
        let problem = try #require(wrong.json["firstProblem"] as? [String: Any])
        #expect(problem["kind"] as? String == "unexpectedEvent" && problem["step"] as? Int == 1)
        #expect((problem["detail"] as? String)?.contains("\"didBecomeActive\" is not expected in state \"launching\"") == true)
        let wrongSteps = try #require(wrong.json["steps"] as? [[String: Any]])
        #expect((wrongSteps[1]["record"] as? [String: Any])?["outcome"] as? String == "unexpected")
        #expect(wrongSteps[2]["beliefCorrect"] as? Bool == false, "later steps are still replayed and judged")
        #expect(wrong.json["finalState"] as? String == "connected")

        let belief = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching", "believedState": "launching"}, {"event": "willConnectToWindow", "window": "main", "believedState": "foreground"}]}"#)
        let mismatch = try #require(belief.json["firstProblem"] as? [String: Any])
        #expect(mismatch["kind"] as? String == "beliefMismatch" && mismatch["step"] as? Int == 1)
        #expect((mismatch["detail"] as? String)?.contains("\"foreground\", but the model is in \"connected\"") == true)
        #expect(belief.json["conforming"] as? Bool == false)

        let invalid = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching"}, {"event": "willConnectToWindow"}, {"event": "willConnectToWindow", "window": 3}]}"#)
        #expect(invalid.status == 200)
        let first = try #require(invalid.json["firstProblem"] as? [String: Any])
        #expect(first["kind"] as? String == "invalidInput" && first["step"] as? Int == 1)
        #expect(first["detail"] as? String == "\"willConnectToWindow\" requires parameter \"window\"")
        let invalidSteps = try #require(invalid.json["steps"] as? [[String: Any]])
        #expect(invalidSteps[1]["record"] == nil && invalidSteps[1]["error"] as? String == first["detail"] as? String)
        #expect((invalidSteps[2]["error"] as? String)?.contains("must be string, got integer") == true)
        #expect(invalid.json["finalState"] as? String == "launching", "a refused input changes nothing")
    }

    @Test("ranHooks in a trace: a missing hook, an extra one and the same hooks in another order are each a hookDivergence at their step, with the record's divergence")
    func hookDivergences() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let launch = #"{"event": "didFinishLaunching", "ranHooks": ["Launching.init"]}"#
        let connect = #"{"event": "willConnectToWindow", "window": "main", "ranHooks": ["Connected.init"]}"#
        // (kind of divergence, the step that diverges, what its detail says)
        let cases: [(String, String, String)] = [
            ("missing", #"{"event": "willConnectToWindow", "window": "main", "ranHooks": []}"#,
             "the app's code ran [] where the model runs [Connected.init]: missing [Connected.init]"),
            ("extra", #"{"event": "willConnectToWindow", "window": "main", "ranHooks": ["Connected.init", "Connected.init"]}"#,
             "the app's code ran [Connected.init, Connected.init] where the model runs [Connected.init]: extra [Connected.init]"),
        ]
        for (kind, step, detail) in cases {
            let answer = try c.conformance("ios-app", "{\"steps\": [\(launch), \(step), {\"event\": \"didBecomeActive\"}]}")
            #expect(answer.status == 200, "\(kind)")
            #expect(answer.json["conforming"] as? Bool == false, "\(kind)")
            let problem = try #require(answer.json["firstProblem"] as? [String: Any], "\(kind)")
            #expect(problem["kind"] as? String == "hookDivergence" && problem["step"] as? Int == 1, "\(kind): \(problem)")
            #expect(problem["detail"] as? String == detail, "\(kind)")
            let steps = try #require(answer.json["steps"] as? [[String: Any]])
            let record = try #require(steps[1]["record"] as? [String: Any])
            #expect((record["divergence"] as? [String: Any])?["hooks"] != nil && record["ranHooks"] != nil, "\(kind): the step's record shows it")
            #expect(answer.json["finalState"] as? String == "foreground", "\(kind): later steps are replayed")
        }

        // The same hooks in another order.
        let order = try c.conformance("ios-app", """
            {"steps": [\(launch), \(connect), {"event": "didBecomeActive", "ranHooks": ["Foreground.didReturn", "Foreground.onTransition"]}]}
            """)
        let reordered = try #require(order.json["firstProblem"] as? [String: Any])
        #expect(reordered["kind"] as? String == "hookDivergence" && reordered["step"] as? Int == 2)
        #expect(reordered["detail"] as? String == "the app's code ran [Foreground.didReturn, Foreground.onTransition] where the model runs [Foreground.onTransition, Foreground.didReturn]: the same hooks in another order")
        let hooks = ((order.json["steps"] as? [[String: Any]])?[2]["record"] as? [String: Any])?["divergence"] as? [String: Any]
        #expect((hooks?["hooks"] as? [String: Any])?["orderOnly"] as? Bool == true)

        // Hooks that agree conform.
        let agreeing = try c.conformance("ios-app", "{\"steps\": [\(launch), \(connect)]}")
        #expect(agreeing.json["conforming"] as? Bool == true && agreeing.json["firstProblem"] is NSNull)

        // The belief as before: a mismatch at the same step comes first, and an earlier problem wins either way.
        let both = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching", "believedState": "connected", "ranHooks": []}]}"#)
        let first = try #require(both.json["firstProblem"] as? [String: Any])
        #expect(first["kind"] as? String == "beliefMismatch" && first["step"] as? Int == 0)
        #expect(((both.json["steps"] as? [[String: Any]])?[0])?["beliefCorrect"] as? Bool == false)
        let hooksFirst = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching", "ranHooks": []}, {"event": "willConnectToWindow", "window": "main", "believedState": "foreground"}]}"#)
        #expect((hooksFirst.json["firstProblem"] as? [String: Any])?["kind"] as? String == "hookDivergence")
        #expect((hooksFirst.json["firstProblem"] as? [String: Any])?["step"] as? Int == 0)
        #expect(((hooksFirst.json["steps"] as? [[String: Any]])?[1])?["beliefCorrect"] as? Bool == false)
        let unexpectedFirst = try c.conformance("ios-app", #"{"steps": [{"event": "didBecomeActive", "ranHooks": ["Foreground.didReturn"]}]}"#)
        #expect((unexpectedFirst.json["firstProblem"] as? [String: Any])?["kind"] as? String == "unexpectedEvent", "an unexpected event is the problem before its hooks")

        // Hook names past the bounds are the step's invalid input, as a live event's are refused.
        let tooLong = try c.conformance("ios-app", "{\"steps\": [{\"event\": \"didFinishLaunching\", \"ranHooks\": [\"\(String(repeating: "h", count: 129))\"]}]}")
        let invalid = try #require(tooLong.json["firstProblem"] as? [String: Any])
        #expect(invalid["kind"] as? String == "invalidInput" && invalid["step"] as? Int == 0)
        #expect((invalid["detail"] as? String)?.contains("1 to 128 characters") == true, "\(invalid)")
        let notNames = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching", "ranHooks": [1]}]}"#)
        #expect(notNames.status == 400 && (notNames.json["detail"] as? String)?.contains("\"ranHooks\" of step 0") == true)
    }

    @Test("bad requests are refused with a problem; unknown names suggest the one meant; nothing is stored")
    func badRequests() throws {
        let server = try TestServer(.router) { $0.maxBodySize = 1 << 20 }
        let c = server.router()
        let unknownEvent = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching"}, {"event": "didBecomeActiv"}]}"#)
        #expect(unknownEvent.status == 422 && unknownEvent.header("content-type") == "application/problem+json")
        #expect((unknownEvent.json["detail"] as? String)?.hasPrefix(#"model "ios-app" has no event "didBecomeActiv"; did you mean "didBecomeActive"?"#) == true)
        #expect(unknownEvent.json["step"] as? Int == 1)
        let unknownAction = try c.conformance("ios-app", #"{"steps": [{"action": "openURI", "url": "x"}]}"#)
        #expect(unknownAction.status == 422 && (unknownAction.json["detail"] as? String)?.contains(#"did you mean "openURL"?"#) == true)
        let otherModel = try c.conformance("android-activity", #"{"steps": [{"action": "openURL", "url": "x"}]}"#)
        #expect(otherModel.status == 422 && (otherModel.json["detail"] as? String)?.contains("there are no actions") == true)
        let unknownState = try c.conformance("ios-app", #"{"steps": [{"event": "didFinishLaunching", "believedState": "lauching"}]}"#)
        #expect(unknownState.status == 422 && (unknownState.json["detail"] as? String)?.contains(#"has no state "lauching"; did you mean "launching"?"#) == true)

        let tooMany = "{\"steps\": [" + Array(repeating: #"{"event": "didBecomeActive"}"#, count: API.maxConformanceSteps + 1).joined(separator: ",") + "]}"
        let atLimit = "{\"steps\": [" + Array(repeating: #"{"event": "didBecomeActive"}"#, count: API.maxConformanceSteps).joined(separator: ",") + "]}"
        let cases: [(String, Int, String)] = [
            ("malformed JSON", 400, #"{"steps": ["#),
            ("not an object", 400, #"[{"event": "didFinishLaunching"}]"#),
            ("no steps", 400, #"{}"#),
            ("steps not an array", 400, #"{"steps": {"event": "didFinishLaunching"}}"#),
            ("an unknown field", 400, #"{"steps": [], "model": "ios-app"}"#),
            ("a step that is not an object", 400, #"{"steps": ["didFinishLaunching"]}"#),
            ("a step with neither", 400, #"{"steps": [{"window": "main"}]}"#),
            ("a step with both", 400, #"{"steps": [{"event": "didFinishLaunching", "action": "openURL"}]}"#),
            ("a name that is not a string", 400, #"{"steps": [{"event": 7}]}"#),
            ("a belief that is not a string", 400, #"{"steps": [{"event": "didFinishLaunching", "believedState": 1}]}"#),
            ("relaunch false", 400, #"{"steps": [{"relaunch": false}]}"#),
            ("a relaunch with a parameter", 400, #"{"steps": [{"relaunch": true, "fast": true}]}"#),
            ("a nested parameter", 422, #"{"steps": [{"event": "willConnectToWindow", "window": {"id": 1}}]}"#),
            ("too many steps", 400, tooMany),
        ]
        for (name, status, body) in cases {
            let response = try c.conformance("ios-app", body)
            #expect(response.status == status, "\(name)")
            #expect(response.header("content-type") == "application/problem+json", "\(name)")
            #expect(response.json["detail"] is String, "\(name)")
        }
        #expect(try c.conformance("ios-app", atLimit).json["steps"] as? [Any] != nil, "the limit itself is accepted")
        #expect(try c.conformance("windows-95", #"{"steps": []}"#).status == 404)
        #expect(try server.router().request("POST", "/v1/models/ios-app/conformance", body: Array(#"{"steps": []}"#.utf8), contentType: "text/plain").status == 415)
        #expect(try c.request("POST", "/v1/models/ios-app/conformance", body: [], contentType: nil).status == 400)

        // Checks and scenario runs are computations: nothing reached the store or the counters.
        #expect(try c.request("POST", "/v1/models/ios-app/scenarios/cold-start", body: [], contentType: nil).status == 200)
        #expect(server.service!.store.lastSequence == 0)
        #expect(try c.coverage()["neverTaken"] as? [String] == Model.iosApp.definition.transitions.indices.map(Model.rowID))
    }

    @Test("scenarios are listed per model and each built-in one passes")
    func scenarios() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let listed = try c.request("GET", "/v1/models/ios-app/scenarios")
        #expect(listed.status == 200)
        let items = try #require(listed.json["items"] as? [[String: Any]])
        #expect(items.map { $0["name"] as? String } == Scenario.iosApp.map(\.name))
        let coldStart = try #require(items.first)
        #expect(coldStart["title"] as? String == "Cold start" && (coldStart["setup"] as? [Any])?.isEmpty == true)
        let steps = try #require(coldStart["steps"] as? [[String: Any]])
        #expect(steps.count == 3 && steps[1]["event"] as? String == "willConnectToWindow" && steps[1]["window"] as? String == "main")
        #expect(try c.request("GET", "/v1/models/android-activity/scenarios").json["items"] as? [Any] != nil)
        #expect((try c.request("GET", "/v1/models/android-activity/scenarios").json["items"] as? [Any])?.isEmpty == true)
        #expect(try c.request("GET", "/v1/models/windows-95/scenarios").status == 404)

        for item in items {
            let name = try #require(item["name"] as? String)
            let run = try c.request("POST", "/v1/models/ios-app/scenarios/\(name)", body: [], contentType: nil)
            #expect(run.status == 200, "\(name)")
            #expect(run.json["name"] as? String == name)
            #expect(run.json["passing"] as? Bool == true, "\(name)")
            #expect(run.json["finalState"] as? String == item["expectedState"] as? String, "\(name)")
            #expect(run.json["hooks"] as? [String] == item["expectedHooks"] as? [String], "\(name)")
            let records = try #require(run.json["records"] as? [[String: Any]])
            #expect(records.count == (item["steps"] as? [Any])?.count, "\(name)")
            // The listed steps are conformance steps: replaying setup and steps reaches the same state.
            let trace = try JSONSerialization.data(withJSONObject: ["steps": (item["setup"] as? [Any] ?? []) + (item["steps"] as? [Any] ?? [])])
            let checked = try c.request("POST", "/v1/models/ios-app/conformance", body: Array(trace))
            #expect(checked.json["finalState"] as? String == item["expectedState"] as? String, "\(name)")
        }

        let typo = try c.request("POST", "/v1/models/ios-app/scenarios/cold-strat", body: [], contentType: nil)
        #expect(typo.status == 404 && (typo.json["detail"] as? String)?.contains(#"did you mean "cold-start"?"#) == true)
        #expect(try c.request("POST", "/v1/models/android-activity/scenarios/cold-start", body: [], contentType: nil).status == 404)
        #expect(try c.request("POST", "/v1/models/ios-app/scenarios/cold-start", json: #"{"fast": true}"#).status == 400)
        #expect(try c.request("POST", "/v1/models/ios-app/scenarios/cold-start", json: "{}").status == 200)
    }

    @Test("with a token, checks and scenario runs need it like writes; coverage like reads")
    func authentication() throws {
        let server = try TestServer(.router) { $0.token = AuthenticationTests.token }
        // A refused request with a body closes its connection: one connection each.
        #expect(try server.router().conformance("ios-app", #"{"steps": []}"#).status == 401)
        #expect(try server.router().request("POST", "/v1/models/ios-app/scenarios/cold-start", body: [], contentType: nil).status == 401)
        let c = server.router()
        #expect(try c.request("POST", "/v1/models/ios-app/conformance", json: #"{"steps": []}"#, headers: AuthenticationTests.bearer).status == 200)
        #expect(try c.request("POST", "/v1/models/ios-app/scenarios/cold-start", headers: AuthenticationTests.bearer, body: [], contentType: nil).status == 200)
        #expect(try c.request("GET", "/v1/models/ios-app/coverage").status == 200)
        #expect(try c.request("GET", "/v1/models/ios-app/scenarios").status == 200)
    }
}
