import Foundation
import LifecycleClient
import LifecycleKit
import LifecycleTestSupport
import Testing

/// Polls `condition` until it holds or `seconds` pass, without holding a thread of the
/// cooperative pool (a stream's reader needs one).
func until(_ seconds: Double = 10, _ condition: () -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if condition() { return true }
        try await Task.sleep(nanoseconds: 20_000_000)
    } while Date() < deadline
    return false
}

/// The problem `body` throws, or a recorded issue when it throws something else or nothing.
func problem(_ body: () async throws -> some Any) async -> LifecycleProblem? {
    do {
        _ = try await body()
        Issue.record("expected a problem, got an answer")
    } catch let error as LifecycleClientError {
        if let problem = error.problem { return problem }
        Issue.record("expected a problem, got \(error)")
    } catch {
        Issue.record("expected a LifecycleClientError, got \(error)")
    }
    return nil
}

let coldStart: [(String, [String: Value])] = [("didFinishLaunching", [:]), ("willConnectToWindow", ["window": .string("main")]), ("didBecomeActive", [:])]

@Suite("LifecycleClient operations against a real server")
struct OperationsTests {
    @Test("health, metrics, a problem page")
    func serviceDocuments() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let health = try await client.health()
        #expect(health.status == "ok" && !health.writesNeedToken && !health.readsNeedToken)
        try await client.putInstance("m-1")
        try await client.postEvent("didFinishLaunching", to: "m-1")
        let metrics = try await client.metrics()
        #expect(metrics.contains(#"lifecycled_transitions_total{model="ios-app",from="initializing",event="didFinishLaunching""#), "\(metrics.prefix(300))")
        let page = try await client.problemPage("not-found")
        #expect(page.localizedCaseInsensitiveContains("not found") || page.contains("not-found"))
    }

    @Test("the token goes as a bearer: refused without it (401 problem), accepted with it")
    func token() async throws {
        let server = try ClientTestServer { $0.token = "s3cret" }
        #expect(try await server.client().health().writesNeedToken)
        let anonymous = LifecycleClient(configuration: .init(server: server.url))
        let refused = await problem { try await anonymous.putInstance("t-1") }
        #expect(refused?.status == 401)
        #expect(try await server.client(token: "s3cret").putInstance("t-1").created)
    }

    @Test("models, one model, its graphs, coverage, scenarios and a scenario run")
    func models() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let models = try await client.models()
        let ios = try #require(models.first { $0.name == "ios-app" })
        #expect(ios.initialState == "initializing")
        #expect(ios.rowIDs.count == ios.definition.transitions.count && ios.rowIDs.first == "r1")
        #expect(try await client.model("ios-app") == ios)
        #expect(await problem { try await client.model("no-such-model") }?.status == 404)
        let dot = try await client.graphDOT(of: "ios-app")
        #expect(dot.hasPrefix("digraph") && dot.contains("initializing"))
        let svg = try await client.graphSVG(of: "ios-app")
        #expect(svg.contains("<svg") && svg.contains("initializing"))

        try await client.putInstance("c-1")
        let launch = try await client.postEvent("didFinishLaunching", to: "c-1")
        let coverage = try await client.coverage(of: "ios-app")
        #expect(coverage.model == "ios-app" && coverage.rows.count == ios.rowIDs.count)
        let taken = try #require(coverage.rows.first { $0.row == launch.row })
        #expect(taken.taken == 1 && taken.from == "initializing" && taken.event == "didFinishLaunching")
        #expect(!coverage.neverTaken.contains(taken.row) && coverage.neverTaken.count == coverage.rows.count - 1)
        #expect(coverage.states.first { $0.state == launch.to }?.instances == 1)

        let scenarios = try await client.scenarios(of: "ios-app")
        let scenario = try #require(scenarios.first)
        #expect(!scenario.steps.isEmpty && !scenario.title.isEmpty)
        let run = try await client.runScenario(scenario.name, of: "ios-app")
        #expect(run.name == scenario.name && run.passing && run.finalState == scenario.expectedState)
        #expect(run.hooks == scenario.expectedHooks && run.records.count == scenario.steps.count)
        #expect(await problem { try await client.runScenario("no-such-scenario", of: "ios-app") }?.status == 404)
    }

    @Test("a conformance check reports its steps with the belief and the hooks the app ran")
    func conformance() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let good = try await client.checkConformance(of: "ios-app", steps: coldStart.map { Conformance.Step(.event($0.0, $0.1)) })
        #expect(good.conforming && good.firstProblem == nil && good.finalState == "foreground" && good.steps.count == 3)
        #expect(good.steps.allSatisfy { $0.record != nil && $0.error == nil })
        #expect(!good.exercisedRows.isEmpty)

        let steps = [
            Conformance.Step(.event("didFinishLaunching"), believedState: "launching", ranHooks: ["made.up"]),
            Conformance.Step(.event("willConnectToWindow", ["window": .string("main")]), believedState: "foreground"),
        ]
        let bad = try await client.checkConformance(of: "ios-app", steps: steps)
        #expect(!bad.conforming)
        #expect(bad.firstProblem?.step == 0 && bad.firstProblem?.kind == "hookDivergence", "\(String(describing: bad.firstProblem))")
        #expect(bad.steps[0].record?.ranHooks == ["made.up"] && bad.steps[0].record?.divergence?.hooks?.extra == ["made.up"])
        #expect(bad.steps[0].believedState == "launching" && bad.steps[0].beliefCorrect == true)
        #expect(bad.steps[1].beliefCorrect == false)
    }

    @Test("create (POST and PUT), get, list with filters, delete with If-Match")
    func instances() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let generated = try await client.createInstance()
        #expect(UUID(uuidString: generated.id) != nil && generated.id == generated.id.lowercased() && generated.model == "ios-app")
        let named = try await client.createInstance(id: "i-2", model: "ios-app")
        #expect(named.id == "i-2" && named.version == 0 && named.launchCount == 1 && named.bufferedAction == nil)
        #expect(await problem { try await client.createInstance(id: "i-2") }?.status == 409)
        let replayed = try await client.createInstance(id: "i-3", idempotencyKey: "create-3")
        #expect(try await client.createInstance(id: "i-3", idempotencyKey: "create-3") == replayed, "a replay answers the first create")

        let put = try await client.putInstance("i-4")
        #expect(put.created && put.instance.state == "initializing")
        #expect(try await client.putInstance("i-4").created == false)
        let otherModel = try #require(try await client.models().first { $0.name != "ios-app" })
        #expect(await problem { try await client.putInstance("i-4", model: otherModel.name) }?.status == 409)

        // i-2 gets an unexpected event, i-3 a divergence, i-4 an incomplete launch.
        for (event, parameters) in coldStart { try await client.postEvent(event, to: "i-2", parameters: parameters) }
        try await client.postEvent("didFinishLaunching", to: "i-2")
        try await client.postEvent("didFinishLaunching", to: "i-3", believedState: "foreground")
        try await client.postEvent("didFinishLaunching", to: "i-4")
        try await client.relaunch("i-4")
        try await client.postEvent("didFinishLaunching", to: "i-4")

        let got = try await client.instance("i-2")
        #expect(got.state == "foreground" && got.version == 4 && got.window == "main" && got.counters.unexpected == 1)
        #expect(got.updatedAt >= got.createdAt)

        var all: [String] = []
        for try await instance in client.instances(pageSize: 2) { all.append(instance.id) }
        #expect(all == [generated.id, "i-2", "i-3", "i-4"].sorted(), "every instance once, in id order, across pages of 2")
        func ids(_ filter: InstanceFilter) async throws -> [String] {
            var ids: [String] = []
            for try await instance in client.instances(filter: filter, pageSize: 1) { ids.append(instance.id) }
            return ids
        }
        #expect(try await ids(InstanceFilter(hasUnexpected: true)) == ["i-2"])
        #expect(try await ids(InstanceFilter(hasDivergence: true)) == ["i-3"])
        var incomplete: [String] = []
        for try await instance in client.instances() where instance.counters.incompleteLaunches > 0 { incomplete.append(instance.id) }
        #expect(try await ids(InstanceFilter(hasIncompleteLaunch: true)) == incomplete)
        #expect(try await ids(InstanceFilter(state: "foreground", model: "ios-app")) == ["i-2"])
        let page = try await client.instancePage(limit: 3)
        #expect(page.items.count == 3 && page.nextCursor == page.items.last?.id)
        #expect(await problem { try await client.instancePage(filter: InstanceFilter(state: "nowhere")) }?.status == 400)

        let stale = await problem { try await client.deleteInstance("i-2", expectedVersion: 3) }
        #expect(stale?.status == 412 && stale?.kind == "precondition-failed", "\(String(describing: stale))")
        try await client.deleteInstance("i-2", expectedVersion: 4)
        let gone = await problem { try await client.instance("i-2") }
        #expect(gone?.status == 404 && gone?.kind == "not-found")
        #expect(await problem { try await client.deleteInstance("i-2") }?.status == 404)
    }

    @Test("events, actions and relaunches with parameters, report, occurredAt and If-Match; an unexpected event is a record")
    func inputs() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        try await client.putInstance("e-1")
        let at = DeviceTime(rfc3339: "2026-12-02T04:59:59.250-05:30")!
        let launch = try await client.postEvent("didFinishLaunching", to: "e-1", parameters: ["isTesting": .bool(false)], occurredAt: at, expectedVersion: 0)
        #expect(launch.kind == .event && launch.name == "didFinishLaunching" && launch.outcome == .transitioned && launch.version == 1)
        #expect(launch.parameters == ["isTesting": .bool(false)] && launch.occurredAt == at && launch.instance == "e-1")
        #expect(abs(launch.time.timeIntervalSinceNow) < 60, "the server time decodes, milliseconds and all")

        let window = try await client.postEvent(
            "willConnectToWindow", to: "e-1", parameters: ["window": .string("main")], believedState: "background", ranHooks: ["Scene.willConnect", "extra"]
        )
        #expect(window.believedState == "background" && window.ranHooks == ["Scene.willConnect", "extra"])
        #expect(window.divergence?.state?.believed == "background" && window.divergence?.state?.actual == window.to)
        #expect(window.divergence?.hooks?.extra.contains("extra") == true)

        let action = try await client.postAction("openURL", to: "e-1", parameters: ["url": .string("https://duckduckgo.com")])
        #expect(action.kind == .action && action.name == "openURL" && action.disposition != nil)

        let stale = await problem { try await client.postEvent("didBecomeActive", to: "e-1", expectedVersion: 1) }
        #expect(stale?.status == 412)

        let active = try await client.postEvent("didBecomeActive", to: "e-1")
        let unexpected = try await client.postEvent("didFinishLaunching", to: "e-1")
        #expect(unexpected.outcome == .unexpected && unexpected.version == active.version + 1, "recorded, not thrown")
        #expect(unexpected.from == "foreground" && unexpected.to == "foreground")

        let relaunch = try await client.relaunch("e-1", occurredAt: at, expectedVersion: unexpected.version)
        #expect(relaunch.kind == .relaunch && relaunch.name == "relaunch" && relaunch.to == "initializing" && relaunch.occurredAt == at)

        let gap = try await client.reportGap("e-1", dropped: 7, occurredAt: at, expectedVersion: relaunch.version)
        #expect(gap.kind == .gap && gap.dropped == 7 && gap.from == "initializing" && gap.to == "initializing" && gap.version == relaunch.version + 1)
        #expect(try await client.instance("e-1").counters.dropped == 7)
        #expect(await problem { try await client.reportGap("e-1", dropped: 0) }?.status == 422)

        let unknown = await problem { try await client.postEvent("didExplode", to: "e-1") }
        #expect(unknown?.status == 422 && unknown?.type.hasPrefix("/problems/") == true)
        #expect(unknown?.detail.contains("didExplode") == true && unknown?.document["status"] == .integer(422))
        let badParameter = await problem { try await client.postEvent("didFinishLaunching", to: "e-1", parameters: ["isTesting": .string("yes")]) }
        #expect(badParameter?.status == 422 && badParameter?.detail.contains("isTesting") == true)
        #expect(await problem { try await client.postEvent("didFinishLaunching", to: "absent") }?.status == 404)

        // The key is sent: the same key replays the stored record; with another body it is refused.
        let first = try await client.postEvent("didFinishLaunching", to: "e-1", idempotencyKey: "key-1")
        #expect(try await client.postEvent("didFinishLaunching", to: "e-1", idempotencyKey: "key-1") == first)
        #expect(try await client.instance("e-1").version == first.version, "applied once")
        let reused = await problem { try await client.postEvent("didBecomeActive", to: "e-1", idempotencyKey: "key-1") }
        #expect(reused?.status == 422)
    }
}
