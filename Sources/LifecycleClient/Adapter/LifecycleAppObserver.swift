import Foundation
import LifecycleKit
import LifecycleLocks

/// Reports an iOS app's lifecycle to a ``LifecycleReporter`` as the `ios-app` model's events, by
/// observing UIKit's notifications on a `NotificationCenter` by their raw names (so it needs no
/// UIKit, and is driven on Linux by posting the same names).
///
/// ```swift
/// // AppDelegate.application(_:willFinishLaunchingWithOptions:) (or earlier), so that
/// // didFinishLaunching is observed:
/// observer = LifecycleAppObserver(reporter: reporter, instance: deviceID)
/// ```
///
/// `didBecomeActive` and `willEnterForeground` also call ``LifecycleReporter/retryNow()``: the
/// network is often back when the app is. What the app's own state machine believed and ran is
/// read, per event, from ``Context`` closures the app gives (its own state objects).
public final class LifecycleAppObserver: Sendable {
    /// What the app says of one event, from its own state objects; read when the event is observed.
    public struct Report: Sendable {
        /// The state the app's code believes it is in after the event (`nil`: not reported).
        public var believedState: String?
        /// The hooks the app's code ran for it, in order (`nil`: not reported).
        public var ranHooks: [String]?

        public init(believedState: String? = nil, ranHooks: [String]? = nil) {
            self.believedState = believedState
            self.ranHooks = ranHooks
        }
    }

    /// The notification names observed and the `ios-app` event each one reports.
    public static let events: [(notification: String, event: String)] = [
        ("UIApplicationDidFinishLaunchingNotification", "didFinishLaunching"),
        ("UISceneWillConnectNotification", "willConnectToWindow"),
        ("UIApplicationDidBecomeActiveNotification", "didBecomeActive"),
        ("UISceneDidActivateNotification", "didBecomeActive"),
        ("UIApplicationWillResignActiveNotification", "willResignActive"),
        ("UISceneWillDeactivateNotification", "willResignActive"),
        ("UIApplicationWillEnterForegroundNotification", "willEnterForeground"),
        ("UISceneWillEnterForegroundNotification", "willEnterForeground"),
        ("UIApplicationDidEnterBackgroundNotification", "didEnterBackground"),
        ("UISceneDidEnterBackgroundNotification", "didEnterBackground"),
    ]

    private let center: NotificationCenter
    // NotificationCenter's observer tokens are not Sendable; they are only read, to remove them.
    private let tokens: LockedValue<[NSObjectProtocol]>

    /// Starts observing `center`.
    /// - Parameters:
    ///   - instance: the instance the events are for (one per device or install).
    ///   - usesScenes: `true` for a scene-based app: the `UIScene…` names are observed for
    ///     activation and backgrounding, `false` (default) the `UIApplication…` ones; a scene's
    ///     connection (`UISceneWillConnectNotification`) is observed in both.
    ///   - window: the `window` parameter of `willConnectToWindow`, from its notification
    ///     (default: the notification's object's description, such as a scene's).
    ///   - report: the app's belief and hooks for an event (by its `ios-app` name), read from its
    ///     own state objects when the notification is observed.
    ///   - parameters: other parameters of an event (such as `didFinishLaunching`'s `isTesting`).
    ///   - onError: what a report that could not be queued tells the app (a full disk, say).
    public init(
        reporter: LifecycleReporter, instance: String, center: NotificationCenter = .default, usesScenes: Bool = false,
        window: @escaping @Sendable (Notification) -> String = { $0.object.map { String(describing: $0) } ?? "main" },
        report: @escaping @Sendable (_ event: String) -> Report = { _ in Report() },
        parameters: @escaping @Sendable (_ event: String, Notification) -> [String: Value] = { _, _ in [:] },
        onError: @escaping @Sendable (any Error) -> Void = { _ in }
    ) {
        self.center = center
        let handler = Handler(reporter: reporter, instance: instance, window: window, report: report, parameters: parameters, onError: onError)
        let observed = Self.events.filter { name, _ in
            name == "UIApplicationDidFinishLaunchingNotification" || name == "UISceneWillConnectNotification"
                || name.hasPrefix(usesScenes ? "UIScene" : "UIApplication")
        }
        var tokens: [NSObjectProtocol] = []
        for (name, event) in observed {
            tokens.append(center.addObserver(forName: Notification.Name(name), object: nil, queue: nil) { handler.observe(event, $0) })
        }
        self.tokens = LockedValue(tokens)
    }

    deinit {
        for token in tokens.withLock({ $0 }) { center.removeObserver(token) }
    }

}

/// What each observed notification runs: the event reported, with what the app says of it.
private final class Handler: Sendable {
    let reporter: LifecycleReporter
    let instance: String
    let window: @Sendable (Notification) -> String
    let report: @Sendable (String) -> LifecycleAppObserver.Report
    let parameters: @Sendable (String, Notification) -> [String: Value]
    let onError: @Sendable (any Error) -> Void

    init(
        reporter: LifecycleReporter, instance: String, window: @escaping @Sendable (Notification) -> String,
        report: @escaping @Sendable (String) -> LifecycleAppObserver.Report,
        parameters: @escaping @Sendable (String, Notification) -> [String: Value], onError: @escaping @Sendable (any Error) -> Void
    ) {
        self.reporter = reporter
        self.instance = instance
        self.window = window
        self.report = report
        self.parameters = parameters
        self.onError = onError
    }

    func observe(_ event: String, _ notification: Notification) {
        var parameters = parameters(event, notification)
        if event == "willConnectToWindow" { parameters["window"] = .string(window(notification)) }
        let said = report(event)
        do {
            try reporter.report(event: event, parameters: parameters, instance: instance, believedState: said.believedState, ranHooks: said.ranHooks)
        } catch {
            onError(error)
        }
        if event == "didBecomeActive" || event == "willEnterForeground" { reporter.retryNow() }
    }
}
