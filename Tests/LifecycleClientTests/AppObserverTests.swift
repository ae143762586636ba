import Foundation
import LifecycleKit
import LifecycleLocks
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// The app adapter driven by posting UIKit's notification names on a `NotificationCenter`, as
/// UIKit would, against a real service.
@Suite struct AppObserverTests {
    /// The app's own state object: what its machine believes and the hooks it ran.
    final class AppState: Sendable {
        let state = LockedValue<(believed: String, ran: [String])>(("initializing", []))
        func set(_ believed: String, _ ran: [String]) { state.withLock { $0 = (believed, ran) } }
    }

    @Test func postedNotificationsAreReportedAsTheIOSAppModelsEvents() async throws {
        let server = try ClientTestServer()
        let temporary = TemporaryDirectory()
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: URL(fileURLWithPath: temporary.path), deliversAutomatically: false)
        )
        try reporter.create(instance: "phone")
        let center = NotificationCenter()
        let app = AppState()
        let observer = LifecycleAppObserver(
            reporter: reporter, instance: "phone", center: center,
            report: { _ in app.state.withLock { LifecycleAppObserver.Report(believedState: $0.believed, ranHooks: $0.ran) } }
        )
        let posted: [(String, Any?, believed: String, ran: [String])] = [
            ("UIApplicationDidFinishLaunchingNotification", nil, "launching", ["Launching.init"]),
            ("UISceneWillConnectNotification", NSString(string: "scene-1"), "connected", ["Connected.init"]),
            ("UIApplicationDidBecomeActiveNotification", nil, "foreground", ["Foreground.onTransition", "Foreground.didReturn"]),
            ("UIApplicationWillResignActiveNotification", nil, "foreground", ["Foreground.willLeave"]),
            // The app's code thinks it is still in foreground here: a divergence.
            ("UIApplicationDidEnterBackgroundNotification", nil, "foreground", ["Background.onTransition", "Background.didReturn"]),
            ("UIApplicationWillEnterForegroundNotification", nil, "background", ["Background.willLeave"]),
            ("UISceneDidActivateNotification", nil, "ignored", []),  // a scene name, not observed by an app without scenes
        ]
        for (name, object, believed, ran) in posted {
            app.set(believed, ran)
            center.post(name: Notification.Name(name), object: object)
        }
        #expect(reporter.status.pendingItems == 7)
        #expect(try await reporter.flush() == 7)
        withExtendedLifetime(observer) {}

        let records = try ReporterTests.history(server, "phone")
        #expect(records.map { $0["event"] as? String } == [
            "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground",
        ])
        #expect(records.map { $0["to"] as? String } == ["launching", "connected", "foreground", "foreground", "background", "background"])
        #expect((records[1]["parameters"] as? [String: Any])?["window"] as? String == "scene-1")
        #expect(records.map { $0["believedState"] as? String } == posted.prefix(6).map(\.believed))
        #expect(records.map { $0["ranHooks"] as? [String] } == posted.prefix(6).map(\.ran))
        #expect(records.map { $0["divergence"] != nil } == [false, false, false, false, true, false])
    }

    @Test func becomingActiveRetriesAtOnce() async throws {
        let server = try ClientTestServer()
        server.stop()
        let temporary = TemporaryDirectory()
        let events = ReporterTests.Events()
        // A failure waits up to 10 minutes: only the notification brings the next attempt soon.
        let reporter = try LifecycleReporter(
            client: server.client(timeout: 2),
            configuration: .init(directory: URL(fileURLWithPath: temporary.path), initialBackoff: 600, maxBackoff: 600), onEvent: events.record
        )
        let center = NotificationCenter()
        let observer = LifecycleAppObserver(reporter: reporter, instance: "wakes", center: center, usesScenes: true)
        try reporter.create(instance: "wakes")
        #expect(await ReporterTests.soon(within: 5) { !events.retries.isEmpty })
        try server.start()
        center.post(name: Notification.Name("UISceneWillEnterForegroundNotification"), object: nil)
        #expect(await ReporterTests.soon(within: 10) { reporter.status.pendingItems == 0 })
        #expect(events.delivered.map(\.0) == [.create, .event])
        withExtendedLifetime(observer) {}
    }
}
