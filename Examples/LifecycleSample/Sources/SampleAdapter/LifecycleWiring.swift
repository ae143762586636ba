// Debug builds only: a release build of the app compiles none of this, so nothing in it
// refers to the library (docs/IOS-GUIDE.md, "Debug builds only").
#if DEBUG
import Foundation
import LifecycleClient

/// Everything the sample app does to report its lifecycle, in one place: the adapter (which
/// opens the offline reporter and keeps the install's instance id), made once in
/// `application(_:willFinishLaunchingWithOptions:)` and kept for the app's life. Debug builds
/// only, as the whole file is.
@MainActor
public final class LifecycleWiring {
    /// The adapter: UIKit's notifications as the `ios-app` model's events; its `report(action:)`
    /// takes the app's own inputs (a deep link), its `windowConnected` a scene-less app's window.
    public let observer: LifecycleAppObserver
    private let stateMachine: AppStateMachine

    /// Wires `stateMachine` to the service at `server`, queueing in `folder`.
    /// - Parameter center: where UIKit posts its notifications (`.default` in the app).
    public init(server: URL, token: String?, folder: URL, stateMachine: AppStateMachine, center: NotificationCenter = .default) throws {
        self.stateMachine = stateMachine
        observer = try LifecycleAppObserver(
            client: LifecycleClient(configuration: .init(server: server, token: token)),
            configuration: .init(directory: folder), center: center,
            // Each reason is one line: what a developer looks at first when nothing arrives.
            onEvent: { event in print("lifecycled reporter:", event) },
            report: { _ in
                LifecycleAppObserver.Report(believedState: stateMachine.currentStateName, ranHooks: stateMachine.takeRanHooks())
            },
            onError: { error in print("lifecycled: an event not queued:", error) }
        )
    }

    /// The wiring from the app's Info.plist (`LifecycledServer`, `LifecycledToken`, filled from
    /// the Debug configuration's build settings), queueing under Application Support; `nil`,
    /// and one line saying why, when no server is configured (a Release build) or the reporter
    /// cannot start.
    public static func start(stateMachine: AppStateMachine) -> LifecycleWiring? {
        let info = Bundle.main.infoDictionary ?? [:]
        guard let address = info["LifecycledServer"] as? String, !address.isEmpty, let server = URL(string: address) else {
            print("lifecycled: no LifecycledServer in Info.plist; not reporting")
            return nil
        }
        let token = (info["LifecycledToken"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        do {
            let support = try FileManager.default.url(
                for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
            return try LifecycleWiring(
                server: server, token: token, folder: support.appendingPathComponent("lifecycle-queue"), stateMachine: stateMachine)
        } catch {
            print("lifecycled: not reporting: \(error)")
            return nil
        }
    }

    /// Reports a deep link the app was handed, with what the app's code made of it (the
    /// observer's `report` closure reads it, as for an event; a no-op in an app extension).
    public func report(openURL url: URL) {
        do {
            try observer.report(action: "openURL", parameters: ["url": .string(url.absoluteString)])
        } catch {
            print("lifecycled: openURL not queued: \(error)")
        }
    }
}
#endif
