// swift-tools-version:6.0
import PackageDescription

// The sample app's reporting, as a module of its own: the part of the sample that builds
// everywhere, Linux included (`make examples-test`), so that the wiring the guide
// (docs/IOS-GUIDE.md) shows is compiled as Swift 6 with complete strict concurrency and no
// warning allowed. The UIKit and SwiftUI files in iOS/ are an app target's in Xcode: no
// package builds them (no Apple SDK here).
let package = Package(
    name: "LifecycleSample",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [.library(name: "SampleAdapter", targets: ["SampleAdapter"])],
    // Named, so the product is found whatever the checkout's folder is called (a path
    // dependency's identity is otherwise its folder's name).
    dependencies: [.package(name: "lifecycled", path: "../..")],
    targets: [
        .target(
            name: "SampleAdapter",
            dependencies: [.product(name: "LifecycleClient", package: "lifecycled")],
            swiftSettings: [.unsafeFlags(["-strict-concurrency=complete", "-warnings-as-errors"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)
