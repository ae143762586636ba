import Foundation
import LifecycleClient
import LifecycleKit

// docs/REPORTER.md's adapter wiring, as an app compiles it: Swift 6 language mode, complete strict
// concurrency, warnings as errors, the app's state machine on the main actor as UIKit code is.
// UIKit is not here (Linux), so the delegate is a plain class with its methods' bodies; on iOS
// it is `UIResponder, UIApplicationDelegate` and the same bodies go in the same methods.

/// The app's own state machine: main-actor state, read by the adapter when a notification arrives.
@MainActor final class AppStateMachine {
    var currentStateName = "initializing"
    var ranHooks: [String] = []

    /// The hooks run since the last report, handed over once.
    func takeRanHooks() -> [String] {
        defer { ranHooks = [] }
        return ranHooks
    }
}

/// Where an `AppDelegate` sets the adapter up.
@MainActor final class AppDelegate {
    let appStateMachine = AppStateMachine()
    var lifecycle: LifecycleAppObserver?

    /// `application(_:willFinishLaunchingWithOptions:)`: before UIKit posts didFinishLaunching.
    func applicationWillFinishLaunching() {
        let client = LifecycleClient(configuration: .init(server: URL(string: "http://192.168.1.20:8080")!, token: "qa-token"))
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        do {
            lifecycle = try LifecycleAppObserver(
                client: client, configuration: .init(directory: support.appendingPathComponent("lifecycle-queue")),
                onEvent: { event in print("lifecycle reporter:", event) },
                report: { [appStateMachine] _ in
                    LifecycleAppObserver.Report(believedState: appStateMachine.currentStateName, ranHooks: appStateMachine.takeRanHooks())
                }
            )
        } catch {
            print("lifecycle reporting is off:", error)
        }
    }

    /// `application(_:didFinishLaunchingWithOptions:)` of an app without scenes, where it makes its window.
    func applicationDidFinishLaunching() {
        lifecycle?.windowConnected("main")
    }

    /// `application(_:open:options:)`: an action the app's code handled.
    func open(_ url: URL) {
        do {
            try lifecycle?.report(action: "openURL", parameters: ["url": .string(url.absoluteString)])
        } catch {
            print("lifecycle report not queued:", error)
        }
    }
}
