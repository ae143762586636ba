// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "lifecycled",
    // What the client library (LifecycleClient, LifecycleKit, LifecycleLocks) supports: an app
    // that supports iOS 15 can link it. The platforms apply to every target, but the server
    // targets (LifecycleLog, LifecycleHTTP, LifecycleStore, LifecycleGraph, LifecycleService,
    // lifecycled and their C modules) are Linux-only: they link Debian's C libraries and are
    // neither built nor supported on Apple platforms. Linux has no version to declare.
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "LifecycleKit", targets: ["LifecycleKit"]),
        .library(name: "LifecycleClient", targets: ["LifecycleClient"]),
        // For an app's test targets only: it imports XCTest, which an app target must not link.
        .library(name: "LifecycleTesting", targets: ["LifecycleTesting"]),
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
        // The VFS the store opens SQLite with: the default one, with WAL and database writes
        // gathered into fewer system calls (gathered_writes.c says why and what it keeps true).
        .target(name: "CLifecycleSQLiteVFS", dependencies: ["CLifecycleSQLite"]),

        // The codebase's one lock, LockedValue: a pthread mutex, which iOS 15 and macOS 12 have
        // (Synchronization's Mutex needs iOS 18). No dependencies.
        .target(name: "LifecycleLocks"),
        // The engine: models, machine, records, scenarios, conformance. No I/O.
        .target(name: "LifecycleKit"),
        // Structured log lines, for the whole service.
        .target(name: "LifecycleLog", dependencies: ["LifecycleLocks"]),
        // Swift over libmicrohttpd: server, request, response, router, JSON.
        .target(name: "LifecycleHTTP", dependencies: ["CLifecycleMicroHTTPD", "LifecycleLog", "LifecycleLocks"]),
        // Durable storage.
        .target(name: "LifecycleStore", dependencies: ["LifecycleKit", "LifecycleLog", "LifecycleLocks", "CLifecycleSQLite", "CLifecycleSQLiteVFS", "CLifecycleLibPQ"]),
        // Graphviz over its C library: DOT to SVG.
        .target(name: "LifecycleGraph", dependencies: ["CLifecycleGraphviz", "LifecycleLocks"]),
        // The API: handlers, instance registry, metrics.
        .target(name: "LifecycleService", dependencies: ["LifecycleKit", "LifecycleLog", "LifecycleLocks", "LifecycleHTTP", "LifecycleStore", "LifecycleGraph"]),
        .executableTarget(name: "lifecycled", dependencies: ["LifecycleService", "LifecycleLog", "LifecycleLocks", "LifecycleHTTP", "LifecycleClient"]),
        // The Swift client an app or a script uses: the API, history, streams. Foundation only
        // (FoundationNetworking on Linux), so it builds for Apple platforms and Linux alike; it
        // depends on nothing server-side (Tests/package/run.sh builds it inside an app's package).
        .target(name: "LifecycleClient", dependencies: ["LifecycleKit", "LifecycleLocks"]),
        // One assertion for an app's tests, XCTest's or Swift Testing's: `lifecycled check` of
        // instances, failing the running test with the problems.
        .target(name: "LifecycleTesting", dependencies: ["LifecycleClient"]),

        // Benchmarks (make bench), never run by make test.
        .executableTarget(
            name: "lifecycle-bench",
            dependencies: ["LifecycleKit", "LifecycleStore"],
            path: "Benchmarks/lifecycle-bench"
        ),

        // lifecycled's HTTP layer with nothing on it (Benchmarks/http-bench.sh), never run by make test.
        .executableTarget(name: "http-layer", dependencies: ["LifecycleHTTP"], path: "Benchmarks/http-layer"),
        // lifecycled's service over an HTTP/1.1 loop of its own instead of libmicrohttpd
        // (Benchmarks/http-bench.sh): what replacing libmicrohttpd would buy. Never run by make test.
        .target(name: "OwnLoopEpoll", path: "Benchmarks/own-loop-epoll"),
        .executableTarget(
            name: "own-loop", dependencies: ["LifecycleService", "LifecycleHTTP", "LifecycleLocks", "OwnLoopEpoll"], path: "Benchmarks/own-loop"
        ),

        // The reporter's benchmark (Benchmarks/reporter-bench.sh), never run by make test.
        .executableTarget(
            name: "reporter-bench",
            dependencies: ["LifecycleClient", "LifecycleKit", "LifecycleLocks"],
            path: "Benchmarks/reporter-bench"
        ),

        // Test support: the tests' one HTTP client (raw bytes out; responses, chunked bodies and
        // event streams in), their one `eventually`, a real PostgreSQL (Tests/postgres/cluster.sh),
        // and a small real disk that fills (a tmpfs).
        .target(name: "LifecycleTestSupport", dependencies: ["LifecycleLocks"], path: "Tests/LifecycleTestSupport"),

        .testTarget(name: "LifecycleLocksTests", dependencies: ["LifecycleLocks"]),
        // Audits LifecycleClient's and LifecycleKit's sources for APIs newer than iOS 15 and
        // macOS 12 (the list, NewerAPIs.txt, beside it): no Apple SDK builds them here.
        .testTarget(name: "LifecyclePlatformTests", exclude: ["NewerAPIs.txt"]),
        .testTarget(name: "LifecycleKitTests", dependencies: ["LifecycleKit"]),
        .testTarget(name: "LifecycleHTTPTests", dependencies: ["LifecycleHTTP", "LifecycleLog"]),
        .testTarget(name: "LifecycleStoreTests", dependencies: ["LifecycleStore", "LifecycleKit", "LifecycleLog", "LifecycleLocks", "LifecycleTestSupport"]),
        .testTarget(name: "LifecycleGraphTests", dependencies: ["LifecycleGraph", "LifecycleKit", "LifecycleLocks"]),
        .testTarget(
            name: "LifecycleServiceTests",
            dependencies: ["LifecycleService", "LifecycleStore", "LifecycleKit", "LifecycleLog", "LifecycleLocks", "LifecycleHTTP", "LifecycleTestSupport"]
        ),
        .testTarget(
            name: "LifecycleClientTests",
            dependencies: ["LifecycleClient", "LifecycleTesting", "LifecycleService", "LifecycleKit", "LifecycleLocks", "LifecycleTestSupport"]
        ),
    ]
)
