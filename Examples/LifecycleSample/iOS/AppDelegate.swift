// The sample's app delegate: an Xcode app target's file, not built by any package here (no
// Apple SDK where the tests run). A UIKit app keeps the `@main` below; a SwiftUI app adds
// SampleApp.swift instead and removes it.
#if canImport(UIKit)
import UIKit
import SampleAdapter

@main
final class AppDelegate: UIResponder, UIApplicationDelegate {
    /// The app's own lifecycle state machine, which its delegates drive.
    let stateMachine = AppStateMachine()
    #if DEBUG
    /// Set when a server is configured: the reporting, kept for the app's life.
    var lifecycle: LifecycleWiring?
    #endif
    /// A scene-less app's window (when the Info.plist has no scene manifest).
    var window: UIWindow?

    private var usesScenes: Bool { Bundle.main.object(forInfoDictionaryKey: "UIApplicationSceneManifest") != nil }

    func application(_ application: UIApplication, willFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        // Before UIKit posts didFinishLaunching, so that the adapter sees the launch itself.
        #if DEBUG
        lifecycle = LifecycleWiring.start(stateMachine: stateMachine)
        #endif
        return true
    }

    func application(_ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        stateMachine.handle(.didFinishLaunching)
        if !usesScenes {
            let window = UIWindow(frame: UIScreen.main.bounds)
            window.rootViewController = UIViewController()
            window.makeKeyAndVisible()
            self.window = window
            stateMachine.handle(.willConnectToWindow)
            // No scene, so no UISceneWillConnectNotification: the app says where its window is.
            #if DEBUG
            lifecycle?.observer.windowConnected("main")
            #endif
        }
        return true
    }

    // A scene-less app's activation and backgrounding; a scene-based app gets these from
    // its SceneDelegate instead.
    func applicationDidBecomeActive(_ application: UIApplication) { stateMachine.handle(.didBecomeActive) }
    func applicationWillResignActive(_ application: UIApplication) { stateMachine.handle(.willResignActive) }
    func applicationWillEnterForeground(_ application: UIApplication) { stateMachine.handle(.willEnterForeground) }
    func applicationDidEnterBackground(_ application: UIApplication) { stateMachine.handle(.didEnterBackground) }

    func application(_ app: UIApplication, open url: URL, options: [UIApplication.OpenURLOptionsKey: Any] = [:]) -> Bool {
        #if DEBUG
        lifecycle?.report(openURL: url)
        #endif
        return true
    }

    func application(_ application: UIApplication, configurationForConnecting session: UISceneSession,
                     options: UIScene.ConnectionOptions) -> UISceneConfiguration {
        UISceneConfiguration(name: "Default Configuration", sessionRole: session.role)
    }
}
#endif
