import Foundation
import Testing
@testable import LifecycleKit

@Suite("launch breadcrumb and relaunch")
struct BreadcrumbTests {
    @Test("a launch under tests leaves no breadcrumb")
    func testingLaunch() throws {
        var m = try iosMachine(in: "simulated")
        #expect(m.snapshot.breadcrumb == Breadcrumb())
        _ = m.relaunch(at: t0)
        let record = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(record.incompleteLaunch == nil)
    }

    @Test("a launch left at `launched` without a scene is not reported")
    func launchedWithoutScene() throws {
        var m = try iosMachine(in: "launching")
        #expect(m.snapshot.breadcrumb == Breadcrumb(step: "launched", isSceneConnected: false))
        _ = m.relaunch(at: t0)
        let record = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(record.incompleteLaunch == nil)
        #expect(m.snapshot.counters.incompleteLaunches == 0)
        #expect(m.snapshot.breadcrumb.step == "launched")
    }

    @Test("a launch left at `launched` with a scene connected is reported once")
    func launchedWithScene() throws {
        var m = try iosMachine(in: "launching")
        _ = m.relaunch(at: t0)
        // The new process connects a scene before it finishes launching: unexpected, but it marks the scene.
        let early = try m.apply(event: "willConnectToWindow", parameters: window, at: t0)
        #expect(early.outcome == .unexpected)
        #expect(m.snapshot.breadcrumb == Breadcrumb(step: "launched", isSceneConnected: true))
        let record = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(record.incompleteLaunch == IncompleteLaunch(step: "launched", isSceneConnected: true))
        #expect(m.snapshot.counters.incompleteLaunches == 1)
        // The scene flag is forgotten; a clean foreground clears the breadcrumb; nothing more is reported.
        _ = try m.apply(event: "willConnectToWindow", parameters: window, at: t0)
        _ = try m.apply(event: "didBecomeActive", at: t0)
        _ = m.relaunch(at: t0)
        #expect(try m.apply(event: "didFinishLaunching", at: t0).incompleteLaunch == nil)
        #expect(m.snapshot.counters.incompleteLaunches == 1)
    }

    @Test("a launch left at any other step is reported once at the next launch")
    func leftAtOtherStep() throws {
        var m = try iosMachine(in: "connected")
        #expect(m.snapshot.breadcrumb == Breadcrumb(step: "ui-attached", isSceneConnected: true))
        _ = m.relaunch(at: t0)
        #expect(m.snapshot.breadcrumb.step == "ui-attached", "a relaunch keeps the breadcrumb")
        let first = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(first.incompleteLaunch == IncompleteLaunch(step: "ui-attached", isSceneConnected: true))
        #expect(m.snapshot.breadcrumb == Breadcrumb(step: "launched", isSceneConnected: false))
        _ = m.relaunch(at: t0)
        let second = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(second.incompleteLaunch == nil)
        #expect(m.snapshot.counters.incompleteLaunches == 1)
    }

    @Test("a critical setup failure leaves the `terminating` step, reported next launch")
    func terminatingStep() throws {
        var m = try iosMachine(in: "terminating")
        #expect(m.snapshot.breadcrumb.step == "terminating")
        _ = m.relaunch(at: t0)
        let record = try m.apply(event: "didFinishLaunching", at: t0)
        #expect(record.incompleteLaunch == IncompleteLaunch(step: "terminating", isSceneConnected: false))
    }

    @Test("reaching foreground or background clears the breadcrumb", arguments: ["foreground", "background"])
    func reachingRestClears(state: String) throws {
        let m = try iosMachine(in: state)
        #expect(m.snapshot.breadcrumb == Breadcrumb())
    }

    @Test("a relaunch resets state, action and window, keeps counters, counts launches")
    func relaunch() throws {
        var m = try iosMachine(in: "connected")
        _ = try m.perform(action: "openURL", parameters: ["url": .string("https://a")], at: t0)
        _ = try m.apply(event: "willEnterForeground", at: t0)
        let before = m.snapshot
        let record = m.relaunch(at: t0)
        #expect(record.kind == .relaunch && record.outcome == .transitioned)
        #expect(record.from == "connected" && record.to == "initializing")
        #expect(record.clearedAction?.name == "openURL")
        let after = m.snapshot
        #expect(after.state == "initializing")
        #expect(after.bufferedAction == nil && after.window == nil)
        #expect(after.launchCount == before.launchCount + 1)
        #expect(after.counters == before.counters)
        #expect(after.version == before.version + 1)
        #expect(m.relaunch(at: t0).outcome == .stayed)
    }

    @Test("restoring a snapshot gives an identical machine")
    func restore() throws {
        let m = try iosMachine(in: "connected")
        let restored = try #require(Machine(model: .iosApp, restoring: m.snapshot))
        #expect(restored.snapshot == m.snapshot)
        var bad = m.snapshot
        bad.state = "nowhere"
        #expect(Machine(model: .iosApp, restoring: bad) == nil)
    }
}

@Suite("actions")
struct ActionTests {
    let url: [String: Value] = ["url": .string("https://duckduckgo.com")]

    @Test("handled at once in foreground")
    func handledInForeground() throws {
        var m = try iosMachine(in: "foreground")
        let record = try m.perform(action: "openURL", parameters: url, at: t0)
        #expect(record.disposition == .handled)
        #expect(record.hooks == ["Foreground.handle(openURL)"])
        #expect(record.outcome == .stayed && record.kind == .action)
        #expect(m.snapshot.bufferedAction == nil)
    }

    @Test("buffered elsewhere; the latest replaces the earlier", arguments: ["initializing", "launching", "connected", "background", "simulated"])
    func bufferedElsewhere(state: String) throws {
        var m = try iosMachine(in: state)
        let first = try m.perform(action: "openURL", parameters: url, at: t0)
        #expect(first.disposition == .buffered && first.hooks.isEmpty && first.replacedAction == nil)
        let second = try m.perform(action: "handleShortcutItem", parameters: ["type": .string("newTab")], at: t0)
        #expect(second.replacedAction == PendingAction(name: "openURL", parameters: url))
        #expect(m.snapshot.bufferedAction?.name == "handleShortcutItem")
        #expect(m.stateName == state)
    }

    @Test("delivered with Foreground.handle on entering foreground", arguments: ["connected", "background"])
    func deliveredOnForeground(state: String) throws {
        var m = try iosMachine(in: state)
        _ = try m.perform(action: "handleUserActivity", parameters: ["activityType": .string("search")], at: t0)
        let record = try m.apply(event: "didBecomeActive", at: t0)
        #expect(record.hooks == ["Foreground.onTransition", "Foreground.didReturn", "Foreground.handle(handleUserActivity)"])
        #expect(record.deliveredAction?.name == "handleUserActivity")
        #expect(m.snapshot.bufferedAction == nil)
    }

    @Test("cleared on entering or staying in background")
    func clearedOnBackground() throws {
        var m = try iosMachine(in: "connected")
        _ = try m.perform(action: "openURL", parameters: url, at: t0)
        let entering = try m.apply(event: "didEnterBackground", at: t0)
        #expect(entering.clearedAction?.name == "openURL")
        #expect(m.snapshot.bufferedAction == nil)
        _ = try m.perform(action: "openURL", parameters: url, at: t0)
        let staying = try m.apply(event: "didEnterBackground", at: t0)
        #expect(staying.clearedAction?.name == "openURL")
        #expect(try m.apply(event: "didBecomeActive", at: t0).deliveredAction == nil)
    }

    @Test("lost on relaunch")
    func lostOnRelaunch() throws {
        var m = try iosMachine(in: "launching")
        _ = try m.perform(action: "openURL", parameters: url, at: t0)
        _ = m.relaunch(at: t0)
        for input in iosPaths["foreground"]! { _ = try m.apply(input, at: t0) }
        #expect(m.stateName == "foreground")
        #expect(m.snapshot.bufferedAction == nil)
    }

    @Test("a required action parameter is enforced")
    func requiredParameter() throws {
        var m = try iosMachine(in: "foreground")
        #expect(throws: InputError.missingParameter(input: "openURL", parameter: "url")) {
            try m.perform(action: "openURL", at: t0)
        }
    }
}
