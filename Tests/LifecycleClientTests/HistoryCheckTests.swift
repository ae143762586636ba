import Foundation
@testable import LifecycleClient
import LifecycleKit
import LifecycleTestSupport
import Testing

/// Records as the engine makes them: `inputs` applied in order on a fresh `ios-app` machine,
/// numbered from sequence 1 as a store would; and where its launch is afterwards.
private func recorded(_ inputs: [ReportedInput], model: Model = .iosApp) throws -> (records: [Record], breadcrumb: Breadcrumb) {
    var machine = Machine(model: model)
    var records: [Record] = []
    for (index, input) in inputs.enumerated() {
        var record = try machine.apply(reported: input, at: Date(timeIntervalSince1970: 0))
        record.sequence = Int64(index + 1)
        records.append(record)
    }
    return (records, machine.snapshot.breadcrumb)
}

private let connect = ReportedInput.event("willConnectToWindow", ["window": .string("main")])

@Suite("HistoryCheck: a recorded history into problems, without a service")
struct HistoryCheckTests {
    let check = HistoryCheck(model: Model.iosApp.definition)

    @Test("a cold start is clean; so is one that went to the background and back")
    func clean() throws {
        let (records, breadcrumb) = try recorded([.event("didFinishLaunching"), connect, .event("didBecomeActive"), .event("didEnterBackground"), .event("willEnterForeground")])
        #expect(check.problems(in: records, endingAt: breadcrumb).isEmpty)
        #expect(check.problems(in: records).isEmpty, "the records' own launch effects say the launch finished")
    }

    @Test("an unexpected event: its sequence number, the event and state, and the events the model has in that state")
    func unexpected() throws {
        let (records, _) = try recorded([.event("didFinishLaunching"), .event("didBecomeActive")])
        let problems = check.problems(in: records)
        let problem = try #require(problems.first)
        #expect(problem.kind == .unexpected && problem.position == .sequence(2))
        #expect(problem.happened == "didBecomeActive in launching")
        #expect(problem.expected == check.expectedInputs(in: "launching").joined(separator: ", ") + " in launching")
        #expect(check.expectedInputs(in: "launching").contains("willConnectToWindow") && !check.expectedInputs(in: "launching").contains("didBecomeActive"))
        #expect(problem.description == "seq 2: unexpected: didBecomeActive in launching; the model expects willConnectToWindow in launching", "\(problem)")
        // A launch that reached `launched` without a scene is no incomplete one, as the machine counts it.
        #expect(problems.count == 1, "\(problems)")
    }

    @Test("a divergence: the believed state beside the model's; the hooks missing and extra; order only")
    func divergence() throws {
        let (records, _) = try recorded([
            .event("didFinishLaunching"), connect,
            ReportedInput(.event("didBecomeActive"), report: AppReport(believedState: "background", ranHooks: ["Foreground.didReturn", "Extra.hook"])),
            ReportedInput(.event("didEnterBackground"), report: AppReport(ranHooks: ["Background.didReturn", "Background.onTransition"])),
        ])
        let problems = check.problems(in: records)
        #expect(problems.map(\.kind) == [.divergence, .divergence, .divergence], "\(problems)")
        #expect(problems.map(\.position) == [.sequence(3), .sequence(3), .sequence(4)])
        #expect(problems[0].happened == "after didBecomeActive the app believed it was in background" && problems[0].expected == "foreground")
        #expect(problems[1].happened == "for didBecomeActive the app ran Foreground.didReturn, Extra.hook (missing Foreground.onTransition; extra Extra.hook)")
        #expect(problems[1].expected == "Foreground.onTransition, Foreground.didReturn")
        #expect(problems[2].happened.hasSuffix("(the same hooks in another order)"), "\(problems[2])")
    }

    @Test("a launch left part-way: found by the relaunch, and where a history ends; a gap")
    func incompleteLaunchAndGap() throws {
        var (records, breadcrumb) = try recorded([.event("didFinishLaunching"), connect, .relaunch, .event("didFinishLaunching")])
        var problems = check.problems(in: records, endingAt: breadcrumb)
        // The relaunch keeps the breadcrumb; the next didFinishLaunching starts a launch and finds it.
        let found = try #require(problems.first)
        #expect(found.kind == .incompleteLaunch && found.position == .sequence(4), "\(problems)")
        #expect(found.happened.contains("ui-attached (a scene connected)") && found.expected == "the launch before to reach foreground or background", "\(found)")
        #expect(problems.count == 1, "ended at launched, no scene: finished as the machine sees it: \(problems)")
        // Ended with the scene connected and not active: part-way, at the last record.
        (records, breadcrumb) = try recorded([.event("didFinishLaunching"), connect])
        for ending in [breadcrumb, nil] {
            problems = check.problems(in: records, endingAt: ending)
            #expect(problems == [CheckProblem(
                kind: .incompleteLaunch, position: .sequence(2), happened: "it ends part-way through a launch, at step ui-attached (a scene connected)",
                expected: "the launch to reach foreground or background"
            )], "\(problems)")
        }

        (records, breadcrumb) = try recorded([.event("didFinishLaunching"), connect, .event("didBecomeActive")])
        var gap = Record(sequence: 9, version: 4, kind: .gap, name: "gap", dropped: 1, from: "foreground", to: "foreground", outcome: .stayed, time: Date())
        problems = check.problems(in: records + [gap], endingAt: breadcrumb)
        #expect(problems == [CheckProblem(kind: .gap, position: .sequence(9), happened: "the app's reporter dropped 1 input before delivering it", expected: "every input delivered")])
        gap.dropped = 3
        #expect(check.problems(of: gap, at: .sequence(9)).first?.happened.contains("dropped 3 inputs") == true)
    }

    @Test("a history retention cut: what the counters count beyond the records kept is a problem per kind, at the first record kept")
    func droppedByRetention() throws {
        let (records, _) = try recorded([.event("didFinishLaunching"), connect, .event("didBecomeActive"), .event("didFinishLaunching")])
        let kept = Array(records.dropFirst(2))
        let shown = Counters(unexpected: 1)
        #expect(check.dropped(by: shown, retained: kept).isEmpty, "the counters count only what the records kept show")
        let problems = check.dropped(by: Counters(unexpected: 3, ignored: 5, incompleteLaunches: 1, divergences: 2, dropped: 4), retained: kept)
        #expect(problems.map(\.kind) == [.unexpected, .incompleteLaunch, .divergence, .gap] && problems.allSatisfy { $0.position == .sequence(3) }, "\(problems)")
        #expect(problems.map(\.happened) == [
            "2 unexpected events in older records retention dropped (counted on the instance)",
            "1 incomplete launch in older records retention dropped (counted on the instance)",
            "2 divergent records in older records retention dropped (counted on the instance)",
            "4 inputs the app's reporter dropped in older records retention dropped (counted on the instance)",
        ])
    }

    @Test("a history naming a state or input the model lacks is another model's")
    func foreignNames() throws {
        let (records, _) = try recorded([.event("didFinishLaunching"), connect])
        #expect(check.foreignName(in: records) == nil)
        let android = HistoryCheck(model: try #require(Model.builtins["android-activity"]).definition)
        #expect(android.foreignName(in: records)?.hasPrefix("seq 1 names the ") == true, "\(String(describing: android.foreignName(in: records)))")
    }

    @Test("the breadcrumb the records' effects leave is the machine's own, input after input")
    func breadcrumbFollowsTheMachine() throws {
        let inputs: [ReportedInput] = [
            .event("didFinishLaunching"), connect, .event("didBecomeActive"), .event("didEnterBackground"), .relaunch,
            .event("didFinishLaunching", ["isTesting": .bool(true)]), .relaunch, .event("didFinishLaunching"), .event("didEnterBackground"),
        ]
        for count in 0...inputs.count {
            let (records, breadcrumb) = try recorded(Array(inputs.prefix(count)))
            #expect(check.breadcrumb(after: records) == breadcrumb, "after \(count) inputs")
        }
    }
}

@Suite("InstanceFilter's labels")
struct InstanceFilterLabelTests {
    @Test("labels go as one label=KEY=VALUE each, in key order, escaped: GET /v1/instances?label=run=a&label=…")
    func labelQuery() throws {
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:1")!))
        let filter = InstanceFilter(model: "ios-app", labels: ["run": "a&b=c", "app.version": "1.2"])
        let url = try client.url(for: APIRequest("GET", "/v1/instances", query: filter.query))
        #expect(url.query == "model=ios-app&label=app.version%3D1.2&label=run%3Da%26b%3Dc", "\(url)")
        #expect(InstanceFilter().query.isEmpty)
    }
}

@Suite("LifecycleClient.check and waitForDelivery against a real server")
struct ClientCheckTests {
    @Test("check(instances:) lists each instance's problems at their sequence numbers; a clean one has none; a missing one is its 404")
    func checkInstances() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        try await client.putInstance("clean")
        for (event, parameters) in coldStart { try await client.postEvent(event, to: "clean", parameters: parameters) }
        try await client.putInstance("stuck")
        try await client.postEvent("didFinishLaunching", to: "stuck")
        try await client.postEvent("willConnectToWindow", to: "stuck", parameters: ["window": .string("main")])
        let unexpected = try await client.postEvent("didFinishLaunching", to: "stuck")

        let checks = try await client.check(instances: ["clean", "stuck"])
        #expect(checks.map(\.instance) == ["clean", "stuck"] && checks.map(\.records) == [3, 3])
        #expect(checks[0].isClean && checks[0].model == "ios-app")
        #expect(checks[1].problems.map(\.kind) == [.unexpected, .incompleteLaunch], "\(checks[1].problems)")
        #expect(checks[1].problems.allSatisfy { $0.position == .sequence(unexpected.sequence) })
        #expect(checks[1].problemLines.first == "stuck seq \(unexpected.sequence): unexpected: didFinishLaunching in connected; the model expects "
            + "didBecomeActive, didEnterBackground, willEnterForeground, willConnectToWindow in connected", "\(checks[1].problemLines)")
        #expect(await problem { try await client.check(instances: ["nobody"]) }?.status == 404)
    }

    @Test("each error's localizedDescription, which an app shows or logs, is its one line")
    func localizedDescriptions() async throws {
        let server = try ClientTestServer()
        do {
            _ = try await server.client().instance("nobody")
            Issue.record("a missing instance is a problem")
        } catch let error as LifecycleClientError {
            #expect(error.localizedDescription == error.description && error.description.hasPrefix("lifecycled refused: "), "\(error.localizedDescription)")
            #expect(error.problem?.localizedDescription == error.problem?.description)
        }
        let timeout = DeliveryTimeout(condition: .quiet(1), timeout: 2, waitingFor: ["a"])
        #expect(timeout.localizedDescription == "not quiet for 1 s within 2 s: still waiting for a")
        let closed = LifecycleReporter.ReportError.closed
        #expect(closed.localizedDescription == closed.description)
    }

    @Test("waitForDelivery: until a marker input arrives (posted after the wait began), until quiet, and its bound")
    func waitForDelivery() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        async let waited: Void = client.waitForDelivery(.ids(["late"]), until: .input("didEnterBackground"), timeout: 30, pollInterval: 0.05)
        // The instance does not exist yet when the wait begins: its creation may still be queued.
        try await client.putInstance("late")
        for (event, parameters) in coldStart { try await client.postEvent(event, to: "late", parameters: parameters) }
        try await client.postEvent("didEnterBackground", to: "late")
        try await waited
        #expect(try await client.check(instances: ["late"]).first?.records == 4, "the wait ended with the marker recorded")

        let start = Date()
        try await client.waitForDelivery(.ids(["late"]), until: .quiet(0.3), timeout: 10, pollInterval: 0.05)
        #expect(Date().timeIntervalSince(start) >= 0.3, "quiet means unchanged for the whole time")

        // Quiet counts from when the instances are there: a creation may still be queued.
        async let quietAfterCreation: Void = client.waitForDelivery(.ids(["later"]), until: .quiet(0.3), timeout: 30, pollInterval: 0.05)
        async let quietByLabel: Void = client.waitForDelivery(.labels(["run": "later"]), until: .quiet(0.3), timeout: 30, pollInterval: 0.05)
        try await Task.sleep(nanoseconds: 800_000_000)
        _ = try await client.createInstance(id: "later", labels: ["run": "later"])
        let created = Date()
        try await quietAfterCreation
        try await quietByLabel
        #expect(Date().timeIntervalSince(created) >= 0.3, "not quiet before the instance was there")
        do {
            try await client.waitForDelivery(.ids(["nobody"]), until: .quiet(0.1), timeout: 0.4, pollInterval: 0.05)
            Issue.record("an instance that never comes must end in the bound")
        } catch let timeout as DeliveryTimeout {
            #expect(timeout.waitingFor == ["nobody"] && timeout.description == "not quiet for 0.1 s within 0.4 s: still waiting for nobody", "\(timeout)")
        }

        do {
            try await client.waitForDelivery(.ids(["late"]), until: .input("never"), timeout: 0.3, pollInterval: 0.05)
            Issue.record("a marker that never comes must end in the bound")
        } catch let timeout as DeliveryTimeout {
            #expect(timeout.waitingFor == ["late"] && timeout.description == "not never recorded within 0.3 s: still waiting for late", "\(timeout)")
        }
    }
}
