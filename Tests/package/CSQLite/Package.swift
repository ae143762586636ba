// swift-tools-version:6.0
// Stands for sqlite-nio's C module: a C target named `CSQLite`.
import PackageDescription

let package = Package(
    name: "CSQLite",
    products: [.library(name: "CSQLite", targets: ["CSQLite"])],
    targets: [.target(name: "CSQLite")]
)
