// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "lifecycled",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "LifecycleKit", targets: ["LifecycleKit"]),
        .library(name: "LifecycleClient", targets: ["LifecycleClient"]),
        .executable(name: "lifecycled", targets: ["lifecycled"]),
    ],
    targets: [
        // C modules: the only places that see libmicrohttpd, SQLite, libpq and Graphviz.
        .systemLibrary(
            name: "CLifecycleMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CLifecycleSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CLifecycleLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLifecycleGraphviz",
            pkgConfig: "libgvc",
            providers: [.apt(["libgraphviz-dev"])]
        ),

        // The engine: models, machine, records, scenarios, conformance. No I/O.
        .target(name: "LifecycleKit"),
        // Structured log lines, for the whole service. No dependencies.
        .target(name: "LifecycleLog"),
        // Swift over libmicrohttpd: server, request, response, router, JSON.
        .target(name: "LifecycleHTTP", dependencies: ["CLifecycleMicroHTTPD", "LifecycleLog"]),
        // Durable storage.
        .target(name: "LifecycleStore", dependencies: ["LifecycleKit", "LifecycleLog", "CLifecycleSQLite", "CLifecycleLibPQ"]),
        // Graphviz over its C library: DOT to SVG.
        .target(name: "LifecycleGraph", dependencies: ["CLifecycleGraphviz"]),
        // The API: handlers, instance registry, metrics.
        .target(name: "LifecycleService", dependencies: ["LifecycleKit", "LifecycleLog", "LifecycleHTTP", "LifecycleStore", "LifecycleGraph"]),
        .executableTarget(name: "lifecycled", dependencies: ["LifecycleService", "LifecycleLog", "LifecycleClient"]),
        // The Swift client an app or a script uses: the API, history, streams. Foundation only
        // (FoundationNetworking on Linux), so it builds for Apple platforms and Linux alike.
        .target(name: "LifecycleClient", dependencies: ["LifecycleKit"]),

        // Benchmarks (make bench), never run by make test.
        .executableTarget(
            name: "lifecycle-bench",
            dependencies: ["LifecycleKit", "LifecycleStore"],
            path: "Benchmarks/lifecycle-bench"
        ),

        // The reporter's benchmark (Benchmarks/reporter-bench.sh), never run by make test.
        .executableTarget(
            name: "reporter-bench",
            dependencies: ["LifecycleClient", "LifecycleKit"],
            path: "Benchmarks/reporter-bench"
        ),

        // Test support: the tests' one HTTP client (raw bytes out; responses, chunked bodies and
        // event streams in), their one `eventually`, a real PostgreSQL (Tests/postgres/cluster.sh),
        // and a small real disk that fills (a tmpfs).
        .target(name: "LifecycleTestSupport", path: "Tests/LifecycleTestSupport"),

        .testTarget(name: "LifecycleKitTests", dependencies: ["LifecycleKit"]),
        .testTarget(name: "LifecycleHTTPTests", dependencies: ["LifecycleHTTP", "LifecycleLog"]),
        .testTarget(name: "LifecycleStoreTests", dependencies: ["LifecycleStore", "LifecycleKit", "LifecycleLog", "LifecycleTestSupport"]),
        .testTarget(name: "LifecycleGraphTests", dependencies: ["LifecycleGraph", "LifecycleKit"]),
        .testTarget(
            name: "LifecycleServiceTests",
            dependencies: ["LifecycleService", "LifecycleStore", "LifecycleKit", "LifecycleLog", "LifecycleHTTP", "LifecycleTestSupport"]
        ),
        .testTarget(
            name: "LifecycleClientTests",
            dependencies: ["LifecycleClient", "LifecycleService", "LifecycleKit", "LifecycleTestSupport"]
        ),
    ]
)
