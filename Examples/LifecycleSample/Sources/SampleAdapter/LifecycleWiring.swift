// Debug builds only: a release build of the app compiles none of this, so nothing in it
// refers to the library (docs/IOS-GUIDE.md, "Debug builds only").
#if DEBUG
import Foundation
import LifecycleClient

/// Everything the sample app does to report its lifecycle, in one place: the client, the
/// offline reporter and the adapter, made once in
/// `application(_:willFinishLaunchingWithOptions:)` and kept for the app's life. Debug builds
/// only, as the whole file is.
@MainActor
public final class LifecycleWiring {
    /// The queue the adapter reports through; the app's own inputs (a deep link) go here too.
    public let reporter: LifecycleReporter
    /// The adapter: UIKit's notifications as the `ios-app` model's events.
    public let observer: LifecycleAppObserver
    /// This install's instance id.
    public let instance: String
    private let stateMachine: AppStateMachine

    /// Wires `stateMachine` to the service at `server`, queueing in `folder`.
    /// - Parameters:
    ///   - usesScenes: whether the app has a scene manifest (a SwiftUI app does).
    ///   - center: where UIKit posts its notifications (`.default` in the app).
    public init(
        server: URL, token: String?, folder: URL, stateMachine: AppStateMachine, usesScenes: Bool,
        center: NotificationCenter = .default
    ) throws {
        self.stateMachine = stateMachine
        let client = LifecycleClient(configuration: .init(server: server, token: token))
        reporter = try LifecycleReporter(
            client: client, configuration: .init(directory: folder),
            // Each reason is one line: what a developer looks at first when nothing arrives.
            onEvent: { event in print("lifecycled reporter:", event) }
        )
        instance = try Self.installID(in: folder)
        observer = LifecycleAppObserver(
            reporter: reporter, instance: instance, center: center, usesScenes: usesScenes,
            report: { _ in
                LifecycleAppObserver.Report(believedState: stateMachine.currentStateName, ranHooks: stateMachine.takeRanHooks())
            }
        )
    }

    /// The wiring from the app's Info.plist (`LifecycledServer`, `LifecycledToken`, filled from
    /// the Debug configuration's build settings), queueing under Application Support; `nil`,
    /// and one line saying why, when no server is configured (a Release build) or the folder
    /// cannot be made.
    public static func start(stateMachine: AppStateMachine, usesScenes: Bool) -> LifecycleWiring? {
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
                server: server, token: token, folder: support.appendingPathComponent("lifecycle-queue"),
                stateMachine: stateMachine, usesScenes: usesScenes)
        } catch {
            print("lifecycled: not reporting: \(error)")
            return nil
        }
    }

    /// Reports a deep link the app was handed, with what the app's code made of it.
    public func report(openURL url: URL) {
        do {
            try reporter.report(
                action: "openURL", parameters: ["url": .string(url.absoluteString)], instance: instance,
                believedState: stateMachine.currentStateName, ranHooks: stateMachine.takeRanHooks())
        } catch {
            print("lifecycled: openURL not queued: \(error)")
        }
    }

    /// This install's instance id: a UUID made on the first launch and kept in `folder`, the
    /// reporter's, which is excluded from backups, so that a backup restored onto another
    /// device does not report as this one.
    public static func installID(in folder: URL) throws -> String {
        let file = folder.appendingPathComponent("instance-id")
        if FileManager.default.fileExists(atPath: file.path) { return try String(contentsOf: file, encoding: .utf8) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let id = "sample-" + UUID().uuidString.lowercased()
        try id.write(to: file, atomically: true, encoding: .utf8)
        return id
    }
}
#endif
