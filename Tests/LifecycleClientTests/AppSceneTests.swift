import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// Apps without scenes and with several: the `ios-app` model sees the app's state, never an
/// event the app did not have.
@Suite @MainActor struct AppSceneTests {
    typealias Names = AppLaunchTests

    @Test func anAppWithoutScenesReportsItsWindowWhereItsCodeMakesIt() async throws {
        let device = try AppDevice()
        let process: (AppDevice.Process) -> Void = { process in
            process.post(Names.launch)
            // application(_:didFinishLaunchingWithOptions:) makes the window; UIKit posts no scene's.
            process.observer.windowConnected("main")
            process.post(Names.active, Names.resign, Names.background)
        }
        let first = try await device.run(process)
        _ = try await device.run(process)
        let (instance, history) = try await Names.instance(device, first.instance)
        #expect(instance.counters.unexpected == 0 && instance.counters.incompleteLaunches == 0)
        #expect(instance.launchCount == 2 && instance.state == "background" && instance.window == "main")
        let once = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "didEnterBackground"]
        #expect(history == once + ["relaunch"] + once)
    }

    /// UIKit posts its launch notification after `application(_:didFinishLaunchingWithOptions:)`
    /// returns, so a window made there is reported first: the adapter holds it until the launch.
    @Test func aWindowMadeBeforeUIKitPostsTheLaunchIsSentAfterIt() async throws {
        let device = try AppDevice()
        let first = try await device.run { process in
            process.observer.windowConnected("main")
            #expect(process.observer.reporter.status.pendingItems == 1, "only the create: the window waits for the launch")
            process.post(Names.launch)
            process.post(Names.active)
        }
        let (instance, history) = try await Names.instance(device, first.instance)
        #expect(instance.counters.unexpected == 0 && instance.state == "foreground" && instance.window == "main")
        #expect(history == ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"])
    }

    @Test func twoScenesMakeOneAppState() async throws {
        let device = try AppDevice()
        let a = NSString(string: "scene-A"), b = NSString(string: "scene-B")
        let first = try await device.run { process in
            process.post(Names.launch)
            process.post(Names.connect, "UISceneWillEnterForegroundNotification", object: a)
            process.post("UIApplicationWillEnterForegroundNotification")
            process.post("UISceneDidActivateNotification", object: a)
            process.post(Names.active)
            // A second window opens and becomes active; the first one is put away: the app stays active.
            process.post(Names.connect, "UISceneWillEnterForegroundNotification", "UISceneDidActivateNotification", object: b)
            process.post("UISceneWillDeactivateNotification", "UISceneDidEnterBackgroundNotification", object: a)
            #expect(process.observer.reporter.status.pendingItems == 5)
            // The last window leaves: so does the app.
            process.post("UISceneWillDeactivateNotification", object: b)
            process.post(Names.resign)
            process.post("UISceneDidEnterBackgroundNotification", object: b)
            process.post(Names.background)
        }
        let (instance, history) = try await Names.instance(device, first.instance)
        #expect(instance.counters.unexpected == 0 && instance.counters.incompleteLaunches == 0)
        #expect(instance.state == "background" && instance.window == "scene-A")
        #expect(history == [
            "didFinishLaunching", "willConnectToWindow", "willEnterForeground", "didBecomeActive", "willResignActive", "didEnterBackground",
        ])
    }
}
