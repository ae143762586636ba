// swift-tools-version:6.0
// An app's package as an iOS developer would write it: this repository (by path) beside two
// packages whose modules are named like well-known ones (swift-log's `Logging`, sqlite-nio's
// `CSQLite`). Swift 6 language mode (complete strict concurrency) with warnings as errors.
// Its tests use LifecycleTesting under XCTest and Swift Testing. Tests/package/run.sh copies it
// to a temporary folder and builds it, tests included; it is not built in place.
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.iOS(.v15), .macOS(.v12)],
    dependencies: [
        .package(path: "../lifecycled"),
        .package(path: "../Logging"),
        .package(path: "../CSQLite"),
    ],
    targets: [
        .executableTarget(
            name: "App",
            dependencies: [
                .product(name: "LifecycleClient", package: "lifecycled"),
                .product(name: "Logging", package: "Logging"),
                .product(name: "CSQLite", package: "CSQLite"),
            ],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors", "-strict-concurrency=complete"])]
        ),
        // The app's tests: LifecycleTesting (which imports XCTest) is linked here only.
        .testTarget(
            name: "AppTests",
            dependencies: [.product(name: "LifecycleTesting", package: "lifecycled")],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors", "-strict-concurrency=complete"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)
