import Foundation
import LifecycleKit
import LifecycleLocks

/// Reports an iOS app's lifecycle as the `ios-app` model's events, by observing UIKit's
/// notifications on a `NotificationCenter` by their raw names (so it needs no UIKit, and is
/// driven on Linux by posting the same names on the main actor, as UIKit does).
///
/// Made once, in `application(_:willFinishLaunchingWithOptions:)`, it is the whole wiring: it
/// opens the ``LifecycleReporter`` and reports this process start (see ``init(client:configuration:center:bundleURL:onEvent:window:report:parameters:onError:)``).
///
/// What counts, and the events each notification makes (the app's state, not a scene's):
/// - The first process start of an install creates its instance (``instance``, a UUID kept in the
///   reporter's folder) with the `ios-app` model and labels (``labels(bundleURL:environment:adding:)``);
///   every later one is a relaunch, reported before
///   its `didFinishLaunching`, so the service finds a launch that never finished by itself. A
///   start with other labels (a new test run, an update of the app or the OS) creates a new
///   instance, and an instance deleted on the service is made again at the next start.
/// - A launch into the background is a process start like any other: a relaunch, then
///   `didFinishLaunching`, and nothing more until a window connects (UIKit posts no
///   `didEnterBackground` for it). Left there it is not an incomplete launch: the model counts
///   one only if the launch reached a window. A process the OS ended while suspended had
///   reported `didEnterBackground`, which ends the launch: not an incomplete launch either.
/// - An app extension (a bundle ending in `.appex`) is never reported as the app: nothing is
///   created, relaunched or observed (``instance`` is `nil`); ``reporter`` is still there for
///   what the extension reports itself.
/// - `didFinishLaunching`, `didBecomeActive`, `willResignActive`, `willEnterForeground` and
///   `didEnterBackground` come from the `UIApplication…` notifications, which UIKit posts for the
///   app as a whole in a scene-based app too (the first scene active: active; the last one
///   in the background: background). The `UIScene…` activation names are not observed: with
///   several windows they describe one scene, not the app.
/// - `willConnectToWindow` is the first window of the process: the first
///   `UISceneWillConnectNotification`, or, in an app without scenes (which UIKit posts none
///   for), ``windowConnected(_:)`` where the app's code makes its window. Later scenes are
///   not reported: the app is already connected.
///
/// `didBecomeActive` and `willEnterForeground` also call ``LifecycleReporter/retryNow()``: the
/// network is often back when the app is.
public final class LifecycleAppObserver: Sendable {
    /// What the app says of one event, from its own state objects; read when the event is observed.
    public struct Report: Sendable {
        /// The state the app's code believes it is in after the event (`nil`: not reported).
        public var believedState: String?
        /// The hooks the app's code ran for it, in order (`nil`: not reported).
        public var ranHooks: [String]?

        /// A report of the app's belief and hooks; both optional.
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
        ("UIApplicationWillResignActiveNotification", "willResignActive"),
        ("UIApplicationWillEnterForegroundNotification", "willEnterForeground"),
        ("UIApplicationDidEnterBackgroundNotification", "didEnterBackground"),
    ]

    /// The file in the reporter's folder that holds the install's instance id.
    static let instanceFile = "app-instance"

    /// The reporter the events go to, for what the notifications do not carry (an action, an
    /// event the app's code sees itself).
    public let reporter: LifecycleReporter
    /// This install's instance id; `nil` in an app extension, and while the reporter's folder
    /// cannot be read yet (before the device's first unlock the files are protected): the
    /// process start is then decided at the next notification that finds it readable.
    public var instance: String? { resolved.withLock { $0 } }
    private let resolved = LockedValue<String?>(nil)
    private let center: NotificationCenter
    private let handler: Handler?
    // Observer tokens are not Sendable; they are written once here and only read, to remove them.
    private nonisolated(unsafe) let tokens: [any NSObjectProtocol]

    /// Opens the reporter, reports this process start (the install's first, or one with other
    /// labels: an instance created; any later one: a relaunch) and starts observing `center`. While the folder
    /// cannot be read yet, the start is decided at the first notification that finds it
    /// readable, and what was observed before is reported then. Throws what the reporter
    /// throws when the process start cannot be queued (nothing observed then).
    /// - Parameters:
    ///   - bundleURL: the running bundle; one ending in `.appex` (an app extension) reports nothing.
    ///   - onEvent: what the reporter tells the app (``LifecycleReporter/Event``).
    ///   - window: the `window` parameter of `willConnectToWindow` from its scene's notification
    ///     (default: the notification's object's description).
    ///   - report: the app's belief and hooks for an event or action (by its `ios-app` name),
    ///     read on the main actor from its own state objects when the notification arrives.
    ///   - parameters: other parameters of an event (such as `didFinishLaunching`'s `isTesting`).
    ///   - onError: what a report that could not be queued tells the app (a full disk, say).
    public init(
        client: LifecycleClient, configuration: LifecycleReporter.Configuration, center: NotificationCenter = .default,
        bundleURL: URL = Bundle.main.bundleURL, onEvent: (@Sendable (LifecycleReporter.Event) -> Void)? = nil,
        window: @escaping @MainActor (Notification) -> String = { $0.object.map { String(describing: $0) } ?? "main" },
        report: @escaping @MainActor (_ event: String) -> Report = { _ in Report() },
        parameters: @escaping @MainActor (_ event: String, Notification) -> [String: Value] = { _, _ in [:] },
        onError: @escaping @MainActor (any Error) -> Void = { _ in }
    ) throws {
        reporter = try LifecycleReporter(client: client, configuration: configuration, onEvent: onEvent)
        self.center = center
        guard bundleURL.pathExtension != "appex" else {
            (handler, tokens) = (nil, [])
            return
        }
        let launchedAt = DeviceTime.now()
        let labels = Self.labels(bundleURL: bundleURL, adding: configuration.labels)
        if let id = try Self.startProcess(reporter, in: configuration.directory, launchedAt: launchedAt, labels: labels) { resolved.withLock { $0 = id } }
        let handler = Handler(
            reporter: reporter, directory: configuration.directory, resolved: resolved, launchedAt: launchedAt, labels: labels, window: window,
            report: report, parameters: parameters, onError: onError
        )
        // UIKit posts these on the main thread and, with no queue, they are handled there before
        // `post` returns, so the app's main-actor state is read as the event happens (a queue
        // would defer it, or, posted on the main thread, wait on itself in swift-corelibs).
        tokens = Self.events.map { name, event in
            center.addObserver(forName: Notification.Name(name), object: nil, queue: nil) { notification in
                // Not Sendable, but it never leaves the main thread it is posted on.
                nonisolated(unsafe) let notification = notification
                MainActor.assumeIsolated { handler.observe(event, notification) }
            }
        }
        self.handler = handler
    }

    deinit {
        for token in tokens { center.removeObserver(token) }
    }

    /// Reports the window of an app without scenes, where its code makes it (typically in
    /// `application(_:didFinishLaunchingWithOptions:)`), as `willConnectToWindow` with `window`
    /// as its parameter; a no-op when a window was already reported in this process, and in an
    /// app extension. A window reported before UIKit posts its launch notification (which it
    /// does after that method returns) is held and sent right after `didFinishLaunching`.
    @MainActor public func windowConnected(_ window: String = "main") {
        handler?.connect(window: window, notification: nil)
    }

    /// Queues an action the app's code handled (`openURL`, `handleShortcutItem`,
    /// `handleUserActivity`), with the belief and hooks ``Report`` reads for it; a no-op in an
    /// app extension. Throws what ``LifecycleReporter/report(action:parameters:instance:believedState:ranHooks:occurredAt:)`` throws.
    @MainActor public func report(action: String, parameters: [String: Value] = [:]) throws {
        try handler?.send(action: action, parameters)
    }

    /// The install's instance id. Its first process start creates the instance, and so does a
    /// start whose labels are not those it was created with (a new `LIFECYCLED_RUN`, an update of
    /// the app or of the OS): the service never changes an instance's labels, so they would no
    /// longer say who it is, and a test that looks for its run's label would find nothing. Any
    /// other start reports a relaunch (at `launchedAt`), after a create that does nothing while
    /// the instance exists and makes it again when it is gone (deleted on the dashboard, or a
    /// service whose data started over), where every later report would be refused 404.
    ///
    /// `nil` while the folder cannot be read: an id file that cannot be read yet is no first
    /// launch, and taking it for one would clone the install. The file holds the id, then the
    /// labels as JSON (one written before labels were kept has no such line: its install starts
    /// a new instance once). It is written after the create is queued: a kill in between leaves
    /// an instance with no launch behind and the next start makes another, rather than an id the
    /// service never heard of.
    static func startProcess(_ reporter: LifecycleReporter, in directory: URL, launchedAt: DeviceTime, labels: [String: String]) throws -> String? {
        guard reporter.status.journalUnavailable == nil else { return nil }
        let file = directory.appendingPathComponent(instanceFile)
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            data = Data()
        } catch {
            return nil
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let written = String(decoding: try encoder.encode(labels), as: UTF8.self)
        let newline: Character = "\n"
        let lines = String(decoding: data, as: UTF8.self).split(separator: newline, maxSplits: 1, omittingEmptySubsequences: false)
        let kept = lines[0].trimmingCharacters(in: .whitespaces)
        if !kept.isEmpty, lines.count == 2, lines[1].trimmingCharacters(in: .whitespacesAndNewlines) == written {
            try reporter.create(instance: kept, model: "ios-app", labels: labels)
            try reporter.reportRelaunch(instance: kept, occurredAt: launchedAt)
            return kept
        }
        let id = UUID().uuidString.lowercased()
        try reporter.create(instance: id, model: "ios-app", labels: labels)
        try Data("\(id)\n\(written)\n".utf8).write(to: file, options: .atomic)
        return id
    }

    /// The labels the install's instance is created with: `app.version` and `app.build` from the
    /// bundle's `CFBundleShortVersionString` and `CFBundleVersion`, `os.version` from
    /// `ProcessInfo`, `device.model` from `uname` (a simulator's from `SIMULATOR_MODEL_IDENTIFIER`),
    /// `run` from `LIFECYCLED_RUN` when set (a UI test passes it through
    /// `XCUIApplication.launchEnvironment`), then the app's own (`adding`), which win. A value the
    /// service would refuse is trimmed to what it takes (control characters dropped, 256
    /// characters at most); a label still invalid, and any past 16, is left out: a refused create
    /// would leave the install unreported.
    public static func labels(
        bundleURL: URL = Bundle.main.bundleURL, environment: [String: String] = ProcessInfo.processInfo.environment, adding own: [String: String] = [:]
    ) -> [String: String] {
        var found: [String: String] = [:]
        let info = Bundle(url: bundleURL)?.infoDictionary ?? [:]
        found["app.version"] = info["CFBundleShortVersionString"] as? String
        found["app.build"] = info["CFBundleVersion"] as? String
        let os = ProcessInfo.processInfo.operatingSystemVersion
        found["os.version"] = "\(os.majorVersion).\(os.minorVersion).\(os.patchVersion)"
        found["device.model"] = environment["SIMULATOR_MODEL_IDENTIFIER"] ?? machine()
        found["run"] = environment["LIFECYCLED_RUN"]
        found.merge(own) { _, app in app }
        var labels: [String: String] = [:]
        // The app's own first when there are too many.
        for key in own.keys.sorted() + found.keys.filter({ own[$0] == nil }).sorted() {
            let value = String(String.UnicodeScalarView(found[key]!.unicodeScalars.filter { $0.properties.generalCategory != .control }.prefix(256)))
            guard labels.count < 16, isValidLabelKey(key), !value.isEmpty else { continue }
            labels[key] = value
        }
        return labels
    }

    /// Whether the service takes `key` as a label's: 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
    static func isValidLabelKey(_ key: String) -> Bool {
        (1...64).contains(key.utf8.count) && key.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    /// The hardware's model name as `uname` says it (`iPhone15,2` on a device); `nil` when it says none.
    static func machine() -> String? {
        var system = utsname()
        guard uname(&system) == 0 else { return nil }
        let name = withUnsafeBytes(of: &system.machine) { bytes in String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self) }
        return name.isEmpty ? nil : name
    }
}

/// What each observed notification runs, on the main actor: the event reported, with what the
/// app says of it.
@MainActor private final class Handler {
    let reporter: LifecycleReporter
    let directory: URL
    /// The instance id, once the process start is decided (the observer's ``LifecycleAppObserver/instance``).
    let resolved: LockedValue<String?>
    /// When the process started: its relaunch's time, even when decided later.
    let launchedAt: DeviceTime
    /// What the instance is created with, even when that is decided later.
    let labels: [String: String]
    /// What was observed before the process start could be decided, in order, with its time.
    var waiting: [(name: String, isAction: Bool, parameters: [String: Value], said: LifecycleAppObserver.Report, at: DeviceTime)] = []
    let window: @MainActor (Notification) -> String
    let report: @MainActor (String) -> LifecycleAppObserver.Report
    let parameters: @MainActor (String, Notification?) -> [String: Value]
    let onError: @MainActor (any Error) -> Void
    /// Whether this process reported its window: later scenes are not the app's connection.
    var isConnected = false
    /// Whether `didFinishLaunching` was observed. UIKit posts it after
    /// `application(_:didFinishLaunchingWithOptions:)` returns, where a scene-less app makes its
    /// window, so a window reported before it waits for it (else it would be unexpected).
    var hasLaunched = false
    var heldWindow: [String: Value]?

    nonisolated init(
        reporter: LifecycleReporter, directory: URL, resolved: LockedValue<String?>, launchedAt: DeviceTime, labels: [String: String],
        window: @escaping @MainActor (Notification) -> String,
        report: @escaping @MainActor (String) -> LifecycleAppObserver.Report,
        parameters: @escaping @MainActor (String, Notification) -> [String: Value], onError: @escaping @MainActor (any Error) -> Void
    ) {
        self.reporter = reporter
        self.directory = directory
        self.resolved = resolved
        self.launchedAt = launchedAt
        self.labels = labels
        self.window = window
        self.report = report
        self.parameters = { event, notification in notification.map { parameters(event, $0) } ?? [:] }
        self.onError = onError
    }

    /// Decides the process start when it is not yet (the folder was unreadable), then reports
    /// what waited for it; the instance id, `nil` while it still cannot be decided.
    private func instance() -> String? {
        if let id = resolved.withLock({ $0 }) { return id }
        do {
            guard let id = try LifecycleAppObserver.startProcess(reporter, in: directory, launchedAt: launchedAt, labels: labels) else { return nil }
            resolved.withLock { $0 = id }
        } catch {
            // Decided again at the next notification.
            onError(error)
            return nil
        }
        let waited = waiting
        waiting = []
        for item in waited { deliver(item.name, isAction: item.isAction, item.parameters, item.said, at: item.at) }
        return resolved.withLock { $0 }
    }

    func observe(_ event: String, _ notification: Notification) {
        // Before the event, so that a folder readable again (the device unlocked) decides the launch first.
        if resolved.withLock({ $0 }) == nil && (event == "didBecomeActive" || event == "willEnterForeground") { reporter.retryNow() }
        if event == "willConnectToWindow" {
            connect(window: window(notification), notification: notification)
            return
        }
        send(event, parameters(event, notification))
        if event == "didFinishLaunching" {
            hasLaunched = true
            if let held = heldWindow {
                heldWindow = nil
                send("willConnectToWindow", held)
            }
        }
        if event == "didBecomeActive" || event == "willEnterForeground" { reporter.retryNow() }
    }

    func connect(window: String, notification: Notification?) {
        guard !isConnected else { return }
        isConnected = true
        var parameters = parameters("willConnectToWindow", notification)
        parameters["window"] = .string(window)
        guard hasLaunched else { return heldWindow = parameters }
        send("willConnectToWindow", parameters)
    }

    func send(action: String, _ parameters: [String: Value]) throws {
        let said = report(action)
        guard let instance = instance() else { return waiting.append((action, true, parameters, said, DeviceTime.now())) }
        try reporter.report(action: action, parameters: parameters, instance: instance, believedState: said.believedState, ranHooks: said.ranHooks)
    }

    private func send(_ event: String, _ parameters: [String: Value]) {
        let said = report(event)
        guard instance() != nil else { return waiting.append((event, false, parameters, said, DeviceTime.now())) }
        deliver(event, isAction: false, parameters, said, at: nil)
    }

    /// Queues one event or action of the decided instance; a failure goes to `onError`.
    private func deliver(_ name: String, isAction: Bool, _ parameters: [String: Value], _ said: LifecycleAppObserver.Report, at time: DeviceTime?) {
        guard let instance = resolved.withLock({ $0 }) else { return }
        do {
            if isAction {
                try reporter.report(action: name, parameters: parameters, instance: instance, believedState: said.believedState, ranHooks: said.ranHooks, occurredAt: time)
            } else {
                try reporter.report(event: name, parameters: parameters, instance: instance, believedState: said.believedState, ranHooks: said.ranHooks, occurredAt: time)
            }
        } catch {
            onError(error)
        }
    }
}
