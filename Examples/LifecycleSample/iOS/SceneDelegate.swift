// The sample's scene delegate (a scene-based app): an Xcode app target's file, not built here.
// It needs no reporting code: the adapter observes the first UISceneWillConnectNotification
// for the app's window and the app-level notifications for activation and backgrounding.
#if canImport(UIKit)
import UIKit
import SampleAdapter

final class SceneDelegate: UIResponder, UIWindowSceneDelegate {
    var window: UIWindow?

    private var stateMachine: AppStateMachine? { (UIApplication.shared.delegate as? AppDelegate)?.stateMachine }

    func scene(_ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions) {
        guard let scene = scene as? UIWindowScene else { return }
        let window = UIWindow(windowScene: scene)
        window.rootViewController = UIViewController()
        window.makeKeyAndVisible()
        self.window = window
        stateMachine?.handle(.willConnectToWindow)
    }

    // One window in this sample. With several, drive the app's machine by the app's state
    // (active while any scene is, background once all are), as the adapter's app-level
    // notifications do: one window leaving while another stays is no event of the app's.
    func sceneDidBecomeActive(_ scene: UIScene) { stateMachine?.handle(.didBecomeActive) }
    func sceneWillResignActive(_ scene: UIScene) { stateMachine?.handle(.willResignActive) }
    func sceneWillEnterForeground(_ scene: UIScene) { stateMachine?.handle(.willEnterForeground) }
    func sceneDidEnterBackground(_ scene: UIScene) { stateMachine?.handle(.didEnterBackground) }

    func scene(_ scene: UIScene, openURLContexts contexts: Set<UIOpenURLContext>) {
        #if DEBUG
        for context in contexts { (UIApplication.shared.delegate as? AppDelegate)?.lifecycle?.report(openURL: context.url) }
        #endif
    }
}
#endif
