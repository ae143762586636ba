import Foundation
import LifecycleKit
import LifecycleTestSupport
import Testing
@testable import LifecycleClient

/// The app adapter driven by posting UIKit's notification names on a private `NotificationCenter`
/// on the main actor, as UIKit does, against a real service.
@Suite @MainActor struct AppObserverTests {
    @Test func postedNotificationsAreReportedWithTheMainActorStatesBelief() async throws {
        let device = try AppDevice()
        let app = AppStateMachine()
        let process = try device.start(app)
        let posted: [(String, Any?, believed: String, ran: [String])] = [
            ("UIApplicationDidFinishLaunchingNotification", nil, "launching", ["Launching.init"]),
            ("UISceneWillConnectNotification", NSString(string: "scene-1"), "connected", ["Connected.init"]),
            ("UIApplicationDidBecomeActiveNotification", nil, "foreground", ["Foreground.onTransition", "Foreground.didReturn"]),
            ("UIApplicationWillResignActiveNotification", nil, "foreground", ["Foreground.willLeave"]),
            // The app's code thinks it is still in foreground here: a divergence.
            ("UIApplicationDidEnterBackgroundNotification", nil, "foreground", ["Background.onTransition", "Background.didReturn"]),
            ("UIApplicationWillEnterForegroundNotification", nil, "background", ["Background.willLeave"]),
            ("UISceneDidActivateNotification", nil, "ignored", []),  // a scene's, not the app's: not observed
        ]
        for (name, object, believed, ran) in posted {
            app.currentStateName = believed
            app.ranHooks = ran
            process.center.post(name: Notification.Name(name), object: object)
        }
        #expect(process.observer.reporter.status.pendingItems == 7)  // the create and six events
        #expect(try await process.observer.reporter.flush() == 7)

        let records = try ReporterTests.history(device.server, try #require(process.observer.instance))
        #expect(records.map { $0["event"] as? String } == [
            "didFinishLaunching", "willConnectToWindow", "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground",
        ])
        #expect(records.map { $0["to"] as? String } == ["launching", "connected", "foreground", "foreground", "background", "background"])
        #expect((records[1]["parameters"] as? [String: Any])?["window"] as? String == "scene-1")
        #expect(records.map { $0["believedState"] as? String } == posted.prefix(6).map(\.believed))
        #expect(records.map { $0["ranHooks"] as? [String] } == posted.prefix(6).map(\.ran))
        #expect(records.map { $0["divergence"] != nil } == [false, false, false, false, true, false])
    }

    @Test nonisolated func becomingActiveRetriesAtOnce() async throws {
        let server = try ClientTestServer()
        server.stop()
        let temporary = TemporaryDirectory()
        let events = ReporterTests.Events()
        let center = NotificationCenter()
        // A failure waits up to 10 minutes: only the notification brings the next attempt soon.
        let observer = try LifecycleAppObserver(
            client: server.client(timeout: 2),
            configuration: .init(directory: URL(fileURLWithPath: temporary.path), initialBackoff: 600, maxBackoff: 600),
            center: center, bundleURL: AppDevice.appBundle, onEvent: events.record
        )
        #expect(await ReporterTests.soon(within: 30) { !events.retries.isEmpty })
        try server.start()
        await MainActor.run { center.post(name: Notification.Name("UIApplicationWillEnterForegroundNotification"), object: nil) }
        // `.delivered` is told once its answer is journaled, after the queue has let the item go.
        #expect(await ReporterTests.soon(within: 10) { observer.reporter.status.pendingItems == 0 && events.delivered.count == 2 })
        #expect(events.delivered.map(\.0) == [.create, .event])
    }
}

/// An app's own state machine as UIKit code has it: main-actor state the adapter reads when a
/// notification arrives.
@MainActor final class AppStateMachine {
    var currentStateName = "initializing"
    var ranHooks: [String] = []
}

/// One install of an app on a device: its reporter's folder, kept across process starts, and
/// the service it reports to.
@MainActor final class AppDevice {
    /// An app's bundle, and an extension's.
    nonisolated static let appBundle = URL(fileURLWithPath: "/private/var/containers/Bundle/Application/A/App.app")
    nonisolated static let extensionBundle = URL(fileURLWithPath: "/private/var/containers/Bundle/Application/A/App.app/PlugIns/Share.appex")

    let server: ClientTestServer
    let folder = TemporaryDirectory()

    init() throws { server = try ClientTestServer() }

    /// One process of the app: its notification center (UIKit's) and the adapter, set up as
    /// docs/REPORTER.md shows.
    struct Process {
        let center: NotificationCenter
        let observer: LifecycleAppObserver

        /// Posts UIKit's notifications by name, on the main actor.
        @MainActor func post(_ names: String..., object: Any? = nil) {
            for name in names { center.post(name: Notification.Name(name), object: object) }
        }
    }

    /// Starts a process of the app (or of `bundle`, an extension's) with only the adapter set up,
    /// and the app's own `labels`.
    func start(_ app: AppStateMachine = AppStateMachine(), bundle: URL = appBundle, labels: [String: String] = [:]) throws -> Process {
        let center = NotificationCenter()
        let observer = try LifecycleAppObserver(
            client: server.client(),
            configuration: .init(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false, labels: labels),
            center: center, bundleURL: bundle,
            report: { _ in LifecycleAppObserver.Report(believedState: app.currentStateName, ranHooks: app.ranHooks) }
        )
        return Process(center: center, observer: observer)
    }

    /// Runs one process of the app through `body`, then delivers what it queued, as its sender would have.
    func run(bundle: URL = appBundle, labels: [String: String] = [:], _ body: (Process) throws -> Void) async throws -> LifecycleAppObserver {
        let process = try start(bundle: bundle, labels: labels)
        try body(process)
        try await process.observer.reporter.flush()
        return process.observer
    }
}

/// docs/REPORTER.md's adapter snippet is the wiring `Tests/package/run.sh` compiles in Swift 6 mode.
@Suite struct AppWiringDocumentationTests {
    @Test func everyLineOfTheReporterPagesAdapterSnippetIsInWiringSwift() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/REPORTER.md"), encoding: .utf8)
        let wiring = try String(contentsOf: root.appendingPathComponent("Tests/package/App/Sources/App/Wiring.swift"), encoding: .utf8)
        let wiringLines = Set(wiring.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let start = try #require(page.range(of: "lifecycle = try LifecycleAppObserver("))
        let block = try #require(page[..<start.lowerBound].range(of: "```swift\n", options: .backwards))
        let end = try #require(page[start.lowerBound...].range(of: "```"))
        let snippet = page[block.upperBound..<end.lowerBound].split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(snippet.count > 5)
        for line in snippet where !line.hasPrefix("//") {
            #expect(wiringLines.contains(line), "docs/REPORTER.md's adapter snippet line not in Wiring.swift: \(line)")
        }
    }
}
