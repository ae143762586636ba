import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// `believedState`, `ranHooks` and `occurredAt` in event, action and relaunch bodies.
@Suite("reported beliefs, hooks and device time")
struct ReportedInputTests {
    /// A server with `my-iphone` in the background.
    static func background() throws -> (TestServer, RouterClient) {
        let server = try TestServer()
        let c = server.router()
        try c.makeInstance("my-iphone", events: ["didFinishLaunching"])
        _ = try c.event("my-iphone", #"{"event": "willConnectToWindow", "window": "main"}"#)
        _ = try c.event("my-iphone", #"{"event": "didEnterBackground"}"#)
        return (server, c)
    }

    @Test("a divergent report is recorded beside what the model did; the answer is 200 as without it")
    func divergentEvent() throws {
        let (_, c) = try Self.background()
        let answer = try c.event("my-iphone", """
            {"event": "didBecomeActive", "believedState": "background", "occurredAt": "2026-12-02T05:00:00.123+01:00",
             "ranHooks": ["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"]}
            """)
        #expect(answer.status == 200)
        #expect(answer.text.contains(#""to":"foreground","outcome":"transitioned","hooks":["Foreground.onTransition","Foreground.didReturn"]"#), "\(answer.text)")
        #expect(answer.text.contains(#""believedState":"background","ranHooks":["Foreground.onTransition","Foreground.onTransition","Foreground.didReturn"],"divergence":{"state":{"believed":"background","actual":"foreground"},"hooks":{"expected":["Foreground.onTransition","Foreground.didReturn"],"ran":["Foreground.onTransition","Foreground.onTransition","Foreground.didReturn"],"missing":[],"extra":["Foreground.onTransition"],"orderOnly":false}},"time":"#), "\(answer.text)")
        #expect(answer.text.hasSuffix(#","occurredAt":"2026-12-02T05:00:00.123+01:00"}"# + "\n"), "\(answer.text)")
        #expect(answer.json["parameters"] == nil, "the reserved members are not parameters")
        let instance = try c.request("GET", "/v1/instances/my-iphone")
        #expect((instance.json["counters"] as? [String: Any])?["divergences"] as? Int == 1)
        #expect(try c.fullHistory("my-iphone").last?["occurredAt"] as? String == "2026-12-02T05:00:00.123+01:00")
    }

    @Test("an unexpected event keeps its 409, with the divergence in its record; an action and a relaunch carry reports too")
    func otherInputs() throws {
        let (_, c) = try Self.background()
        let unexpected = try c.event("my-iphone", #"{"event": "didFinishLaunching", "ranHooks": ["Launching.init"]}"#)
        #expect(unexpected.status == 409)
        let record = try #require(unexpected.json["record"] as? [String: Any])
        #expect((record["divergence"] as? [String: Any])?["hooks"] != nil)
        let action = try c.request("POST", "/v1/instances/my-iphone/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com", "believedState": "foreground"}"#)
        #expect(action.status == 200 && (action.json["divergence"] as? [String: Any])?["state"] != nil)
        let relaunch = try c.request("POST", "/v1/instances/my-iphone/relaunches", json: #"{"occurredAt": "2026-12-01T23:00:00Z"}"#)
        #expect(relaunch.status == 200 && relaunch.json["occurredAt"] as? String == "2026-12-01T23:00:00.000Z")
        let bad = try c.request("POST", "/v1/instances/my-iphone/relaunches", json: #"{"believedState": "initializing"}"#)
        #expect(bad.status == 400, "a relaunch reports no belief: the app's machine starts again")
    }

    @Test("bad reports and device times are refused with 422 and change nothing")
    func refused() throws {
        let (_, c) = try Self.background()
        let before = try c.request("GET", "/v1/instances/my-iphone").text
        let ahead = Date().addingTimeInterval(24 * 3600 + 120)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let nearlyAhead = formatter.string(from: Date().addingTimeInterval(23 * 3600))
        for body in [
            #"{"event": "didBecomeActive", "believedState": "foregrund"}"#,
            #"{"event": "didBecomeActive", "believedState": 3}"#,
            #"{"event": "didBecomeActive", "ranHooks": "Foreground.didReturn"}"#,
            #"{"event": "didBecomeActive", "ranHooks": [1]}"#,
            #"{"event": "didBecomeActive", "ranHooks": [""]}"#,
            #"{"event": "didBecomeActive", "occurredAt": "yesterday"}"#,
            #"{"event": "didBecomeActive", "occurredAt": "2026-12-02T05:00:00"}"#,
            "{\"event\": \"didBecomeActive\", \"occurredAt\": \"\(formatter.string(from: ahead))\"}",
        ] {
            let answer = try c.event("my-iphone", body)
            #expect(answer.status == 422, "\(body): \(answer.text)")
            #expect(answer.headers.first { $0.0.lowercased() == "content-type" }?.1 == "application/problem+json")
        }
        #expect(try c.request("GET", "/v1/instances/my-iphone").text == before)
        let soon = try c.event("my-iphone", "{\"event\": \"didBecomeActive\", \"occurredAt\": \"\(nearlyAhead)\"}")
        #expect(soon.status == 200, "23 hours ahead is a clock a little wrong, and kept: \(soon.text)")
    }
}

extension ReportedInputTests {
    @Test("every kind of divergence on live events: state, missing hook, extra hook, order only; an agreeing report is none")
    func everyKind() throws {
        let (_, c) = try Self.background()
        let cases: [(String, [String])] = [
            (#""believedState": "background""#, ["state"]),
            (#""ranHooks": ["Foreground.didReturn"]"#, ["missingHook"]),
            (#""ranHooks": ["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"]"#, ["extraHook"]),
            (#""ranHooks": ["Foreground.didReturn", "Foreground.onTransition"]"#, ["hookOrder"]),
            (#""believedState": "foreground", "ranHooks": ["Foreground.onTransition", "Foreground.didReturn"]"#, []),
        ]
        for (index, (report, kinds)) in cases.enumerated() {
            // Back to the background, then the event the report is about: didBecomeActive from background.
            #expect(try c.event("my-iphone", #"{"event": "didEnterBackground"}"#).status == 200)
            let answer = try c.event("my-iphone", #"{"event": "didBecomeActive", "# + report + "}")
            #expect(answer.status == 200, "\(report): \(answer.text)")
            let divergence = answer.json["divergence"] as? [String: Any]
            var seen: [String] = []
            if divergence?["state"] != nil { seen.append("state") }
            if let hooks = divergence?["hooks"] as? [String: Any] {
                if (hooks["missing"] as? [Any])?.isEmpty == false { seen.append("missingHook") }
                if (hooks["extra"] as? [Any])?.isEmpty == false { seen.append("extraHook") }
                if hooks["orderOnly"] as? Bool == true { seen.append("hookOrder") }
            }
            #expect(seen == kinds, "\(report): \(answer.text)")
            let counters = try c.request("GET", "/v1/instances/my-iphone").json["counters"] as? [String: Any]
            #expect(counters?["divergences"] as? Int == min(index + 1, 4))
        }
        let divergent = try c.request("GET", "/v1/instances/my-iphone/history?divergent=true").json["items"] as? [[String: Any]]
        #expect(divergent?.count == 4 && divergent?.allSatisfy { $0["divergence"] != nil } == true)
    }
}
