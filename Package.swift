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
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CGraphviz",
            pkgConfig: "libgvc",
            providers: [.apt(["libgraphviz-dev"])]
        ),

        // The engine: models, machine, records, scenarios, conformance. No I/O.
        .target(name: "LifecycleKit"),
        // Structured log lines, for the whole service. No dependencies.
        .target(name: "Logging"),
        // Swift over libmicrohttpd: server, request, response, router, JSON.
        .target(name: "MicroHTTP", dependencies: ["CMicroHTTPD", "Logging"]),
        // Durable storage.
        .target(name: "LifecycleStore", dependencies: ["LifecycleKit", "Logging", "CSQLite", "CLibPQ"]),
        // Graphviz over its C library: DOT to SVG.
        .target(name: "LifecycleGraph", dependencies: ["CGraphviz"]),
        // The API: handlers, instance registry, metrics.
        .target(name: "LifecycleService", dependencies: ["LifecycleKit", "Logging", "MicroHTTP", "LifecycleStore", "LifecycleGraph"]),
        .executableTarget(name: "lifecycled", dependencies: ["LifecycleService", "Logging", "LifecycleClient"]),
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
        .target(name: "TestSupport", path: "Tests/TestSupport"),

        .testTarget(name: "LifecycleKitTests", dependencies: ["LifecycleKit"]),
        .testTarget(name: "MicroHTTPTests", dependencies: ["MicroHTTP", "Logging"]),
        .testTarget(name: "LifecycleStoreTests", dependencies: ["LifecycleStore", "LifecycleKit", "Logging", "TestSupport"]),
        .testTarget(name: "LifecycleGraphTests", dependencies: ["LifecycleGraph", "LifecycleKit"]),
        .testTarget(
            name: "LifecycleServiceTests",
            dependencies: ["LifecycleService", "LifecycleStore", "LifecycleKit", "Logging", "MicroHTTP", "TestSupport"]
        ),
        .testTarget(
            name: "LifecycleClientTests",
            dependencies: ["LifecycleClient", "LifecycleService", "LifecycleKit", "TestSupport"]
        ),
    ]
)
