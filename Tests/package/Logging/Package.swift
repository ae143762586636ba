// swift-tools-version:6.0
// Stands for swift-log: a library whose module is named `Logging`.
import PackageDescription

let package = Package(
    name: "Logging",
    products: [.library(name: "Logging", targets: ["Logging"])],
    targets: [.target(name: "Logging")]
)
