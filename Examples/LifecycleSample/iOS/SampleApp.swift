// The sample as a SwiftUI app: an Xcode app target's file, not built here. Use it instead of
// AppDelegate.swift's `@main` (remove that one): SwiftUI has no app delegate of its own, so
// the adaptor gives it the sample's, which sets the reporting up in
// application(_:willFinishLaunchingWithOptions:). A SwiftUI app is scene-based (WindowGroup).
#if canImport(SwiftUI) && canImport(UIKit)
import SwiftUI

@main
struct SampleApp: App {
    @UIApplicationDelegateAdaptor(AppDelegate.self) var appDelegate

    var body: some Scene {
        WindowGroup {
            Text("lifecycled sample")
                .onOpenURL { url in
                    #if DEBUG
                    appDelegate.lifecycle?.report(openURL: url)
                    #endif
                }
        }
    }
}
#endif
