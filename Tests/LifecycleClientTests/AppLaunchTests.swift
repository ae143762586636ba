import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// Process starts reported by the adapter alone: each `run` is one process of the app on the
/// same device (its reporter's folder kept), driven by UIKit's notification names.
@Suite @MainActor struct AppLaunchTests {
    static let launch = "UIApplicationDidFinishLaunchingNotification", connect = "UISceneWillConnectNotification"
    static let active = "UIApplicationDidBecomeActiveNotification", resign = "UIApplicationWillResignActiveNotification"
    static let background = "UIApplicationDidEnterBackgroundNotification"

    /// The instance as the service has it, and its history's (kind, name) pairs.
    static func instance(_ device: AppDevice, _ id: String?) async throws -> (Instance, [String]) {
        let id = try #require(id)
        let records = try ReporterTests.history(device.server, id)
        return (try await device.server.client().instance(id), records.map { "\($0["event"] ?? $0["kind"] ?? "?")" })
    }

    @Test func theFirstLaunchCreatesAndASecondIsARelaunchBeforeItsDidFinishLaunching() async throws {
        let device = try AppDevice()
        let first = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }  // left in the foreground
        let second = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        #expect(second.instance == first.instance)
        let (instance, history) = try await Self.instance(device, first.instance)
        #expect(instance.model == "ios-app" && instance.launchCount == 2 && instance.state == "foreground")
        #expect(instance.counters.unexpected == 0 && instance.counters.incompleteLaunches == 0)
        #expect(history == [
            "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "relaunch", "didFinishLaunching", "willConnectToWindow", "didBecomeActive",
        ])
    }

    @Test func aLaunchThatNeverReachedTheForegroundIsFoundWithoutTheAppCallingAnything() async throws {
        let device = try AppDevice()
        let first = try await device.run { $0.post(Self.launch, Self.connect) }  // killed before it became active
        _ = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        let (instance, _) = try await Self.instance(device, first.instance)
        #expect(instance.counters.incompleteLaunches == 1 && instance.counters.unexpected == 0)
        let records = try ReporterTests.history(device.server, try #require(first.instance))
        #expect(records.filter { $0["incompleteLaunch"] != nil }.map { $0["event"] as? String } == ["didFinishLaunching"])
    }

    @Test func launchesIntoTheBackgroundAndProcessesEndedWhileSuspendedAreNotIncomplete() async throws {
        let device = try AppDevice()
        // Used, then sent to the background, suspended and ended by the OS.
        let first = try await device.run { $0.post(Self.launch, Self.connect, Self.active, Self.resign, Self.background) }
        // Launched into the background (a background fetch): no window, no didEnterBackground; ended there.
        _ = try await device.run { $0.post(Self.launch) }
        _ = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        let (instance, history) = try await Self.instance(device, first.instance)
        #expect(instance.launchCount == 3 && instance.state == "foreground")
        #expect(instance.counters.incompleteLaunches == 0 && instance.counters.unexpected == 0)
        #expect(history == [
            "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "didEnterBackground",
            "relaunch", "didFinishLaunching", "relaunch", "didFinishLaunching", "willConnectToWindow", "didBecomeActive",
        ])
    }

    /// A UI test passes a new `LIFECYCLED_RUN` each time and looks for its label; an update of the
    /// app or the OS changes its labels too. The service keeps an instance's labels as created.
    @Test func aStartWithOtherLabelsIsANewInstanceThatCarriesThem() async throws {
        let device = try AppDevice()
        let first = try await device.run(labels: ["run": "one"]) { $0.post(Self.launch, Self.connect, Self.active) }
        let again = try await device.run(labels: ["run": "one"]) { $0.post(Self.launch, Self.connect, Self.active) }
        #expect(again.instance == first.instance)
        let second = try await device.run(labels: ["run": "two"]) { $0.post(Self.launch, Self.connect, Self.active) }
        #expect(second.instance != nil && second.instance != first.instance)
        let (earlier, _) = try await Self.instance(device, first.instance)
        #expect(earlier.labels["run"] == "one" && earlier.launchCount == 2)
        let (instance, history) = try await Self.instance(device, second.instance)
        #expect(instance.labels["run"] == "two" && instance.launchCount == 1 && instance.counters.unexpected == 0)
        #expect(history == ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"])
        let found = try await device.server.client().instancePage(filter: InstanceFilter(labels: ["run": "two"])).items.map(\.id)
        #expect(found == [try #require(second.instance)])
    }

    /// Deleted on the dashboard, or a service whose data started over: without the create, every
    /// report of the install would be refused 404 from then on.
    @Test func anInstanceGoneFromTheServiceIsMadeAgainAtTheNextStart() async throws {
        let device = try AppDevice()
        let first = try await device.run(labels: ["team": "checkout"]) { $0.post(Self.launch, Self.connect, Self.active) }
        let id = try #require(first.instance)
        try await device.server.client().deleteInstance(id)
        let again = try await device.run(labels: ["team": "checkout"]) { $0.post(Self.launch, Self.connect, Self.active, Self.resign) }
        #expect(again.instance == id)
        let (instance, history) = try await Self.instance(device, id)
        #expect(instance.labels["team"] == "checkout" && instance.counters.unexpected == 0)
        #expect(history == ["relaunch", "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive"])
    }

    @Test func anAppExtensionIsNeverReportedAsTheApp() async throws {
        let device = try AppDevice()
        let app = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        let share = try device.start(bundle: AppDevice.extensionBundle)
        share.post(Self.launch, Self.connect, Self.active, Self.resign, Self.background)
        share.observer.windowConnected("share-sheet")
        #expect(share.observer.instance == nil)
        #expect(share.observer.reporter.status.pendingItems == 0)
        let again = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        #expect(again.instance == app.instance)
        let (instance, _) = try await Self.instance(device, app.instance)
        #expect(instance.launchCount == 2 && instance.counters.unexpected == 0)
        #expect(try await device.server.client().instancePage().items.count == 1)
    }

    /// Before the device's first unlock the reporter's folder cannot be read (here: moved away
    /// and a regular file put at its path, since tests run as root): the process start waits
    /// for it, rather than failing or taking the install for a new one.
    static func locked(_ device: AppDevice) throws -> () throws -> Void {
        let folder = URL(fileURLWithPath: device.folder.path)
        let aside = folder.appendingPathExtension("aside")
        try FileManager.default.moveItem(at: folder, to: aside)
        #expect(FileManager.default.createFile(atPath: folder.path, contents: Data("locked".utf8)))
        return {
            try FileManager.default.removeItem(at: folder)
            try FileManager.default.moveItem(at: aside, to: folder)
        }
    }

    @Test func aStartBeforeTheFolderCanBeReadIsARelaunchOnceItCan() async throws {
        let device = try AppDevice()
        let first = try await device.run { $0.post(Self.launch, Self.connect, Self.active) }
        let unlock = try Self.locked(device)
        let second = try await device.run { process in
            #expect(process.observer.instance == nil)
            process.post(Self.launch, Self.connect)
            try unlock()
            process.post(Self.active)
        }
        #expect(second.instance == first.instance)
        let (instance, history) = try await Self.instance(device, first.instance)
        #expect(instance.launchCount == 2 && instance.counters.unexpected == 0)
        #expect(history == [
            "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "relaunch", "didFinishLaunching", "willConnectToWindow", "didBecomeActive",
        ])
        #expect(try await device.server.client().instancePage().items.count == 1)
    }

    @Test func aFirstStartBeforeTheFolderCanBeReadCreatesOnceItCan() async throws {
        let device = try AppDevice()
        let unlock = try Self.locked(device)
        let app = try await device.run(labels: ["team": "checkout"]) { process in
            #expect(process.observer.instance == nil)
            process.post(Self.launch, Self.connect)
            try unlock()
            process.post(Self.active)
        }
        let (instance, history) = try await Self.instance(device, app.instance)
        #expect(instance.launchCount == 1 && instance.counters.unexpected == 0)
        #expect(instance.labels["team"] == "checkout", "created with the labels, though decided late")
        #expect(history == ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"])
        let again = try await device.run(labels: ["team": "checkout"]) { $0.post(Self.launch) }
        #expect(again.instance == app.instance)
        #expect(try await device.server.client().instancePage().items.count == 1)
    }
}
