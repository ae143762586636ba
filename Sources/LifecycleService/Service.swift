import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleLog
import LifecycleHTTP

/// Why the service could not start. `lifecycled` prints it and exits 1.
public struct StartError: Error, CustomStringConvertible {
    public var description: String
}

/// The running service: store, registry, router and HTTP server wired together.
public final class Service: Sendable {
    public let configuration: Configuration
    let server: HTTPServer
    let registry: InstanceRegistry
    /// Committed records for the streams.
    let hub: StreamHub
    /// What `GET /metrics` reports; `nil` with `--metrics off`.
    let metrics: ServiceMetrics?
    public let store: any InstanceStore
    public let logger: LineLogger

    /// The port the server is bound to.
    public var port: UInt16 { server.port }

    /// What the service runs for each request: the API's router and the middlewares around it.
    public var pipeline: Pipeline { server.pipeline }

    /// Opens the store, restores every instance and starts serving.
    public convenience init(configuration: Configuration) throws(StartError) {
        try self.init(configuration: configuration, listening: true)
    }

    /// Opens the store and restores every instance; starts serving only when `listening`.
    /// A service that does not listen answers only through its ``pipeline``, called in-process: for tests
    /// of what the API answers, without a socket, and for `Benchmarks/own-loop`, which serves it over
    /// another HTTP layer.
    public init(configuration: Configuration, listening: Bool) throws(StartError) {
        self.configuration = configuration
        let logger = LineLogger(level: configuration.logLevel, format: configuration.logFormat)
        self.logger = logger
        let started = DispatchTime.now().uptimeNanoseconds
        // Before the store is opened: a service meant to be guarded does not start unguarded.
        let token = try configuration.resolvedToken()

        var models = Model.builtins
        if let directory = configuration.modelsDirectory {
            for (name, model) in try Self.loadModels(from: directory) {
                guard models[name] == nil else { throw StartError(description: "model \"\(name)\" in \(directory) is already defined") }
                models[name] = model
            }
        }
        let report: @Sendable (ServiceEvent) -> Void = { logger.log($0) }
        store = try Self.openStore(configuration, report: report)
        hub = StreamHub(store: store, lastSequence: store.lastSequence, settings: configuration.streamSettings, logger: logger)
        do {
            registry = try InstanceRegistry(
                models: models, store: store, hub: hub, maxInstances: configuration.maxInstances, pollInterval: configuration.pollInterval,
                report: report
            )
        } catch {
            hub.stop()
            throw StartError(description: ((store as? SQLiteStore)?.reason(for: error) ?? error).message)
        }
        let staticFiles = Self.dashboard(configuration.publicDirectory, logger: logger)
        let requestMetrics = configuration.metrics ? RequestMetrics() : nil
        metrics = requestMetrics.map { [registry, store] in ServiceMetrics(requests: $0, registry: registry, databaseFile: (store as? SQLiteStore)?.path) }
        let router = API(
            registry: registry, staticFiles: staticFiles, metrics: metrics, tokenScope: token.map(Authentication.idempotencyScope),
            readsNeedToken: token != nil && configuration.protectReads, logger: logger, pageBytes: configuration.pageBytes,
            graphLimits: ModelGraphs.Limits(maxElements: configuration.graphMaxSize, wait: configuration.graphWait)
        ).makeRouter()
        server = HTTPServer(
            configuration: ServerConfiguration(
                host: configuration.host, port: configuration.port, threads: configuration.threads, maxBodySize: configuration.maxBodySize,
                requestTimeout: configuration.requestTimeout, maxConnections: configuration.maxConnections,
                maxConnectionsPerClient: configuration.maxConnectionsPerClient, trustedProxies: configuration.trustedProxies,
                maxBodySizeByPath: [API.batchPath: configuration.maxBatchBodySize]
            ),
            logger: logger,
            pipeline: Pipeline(router: router, middlewares: Self.middlewares(configuration, token: token, logger: logger, metrics: requestMetrics))
        )
        do {
            if listening { try server.start() }
        } catch {
            registry.stop()
            hub.stop()
            throw StartError(description: error.description)
        }
        // Once serving: a restart waits for the instances, not for every page to be read. What the check finds is
        // reported as the store's damage (`/healthz` says 503 until a restart).
        (store as? SQLiteStore)?.checkIntegrity { [registry] damage in registry.storageDamaged(damage) }
        let millis = (DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        logger.info("lifecycled started", [
            "address": "\(configuration.host):\(server.port)", "instances": String(registry.count),
            "lastSequence": String(store.lastSequence), "models": models.keys.sorted().joined(separator: ","),
            "sync": configuration.sync.rawValue, "maxConnections": String(server.maxConnections), "startupMillis": String(millis),
            "auth": token == nil ? "off" : configuration.protectReads ? "all" : "writes", "dashboard": staticFiles?.root ?? "none",
            "version": Configuration.version,
        ])
        if token == nil, !isLoopback(configuration.host) {
            logger.warning("writes are open to anyone who can reach the port: no token is set (--token or --token-file)", [
                "address": "\(configuration.host):\(server.port)",
            ])
        }
    }

    /// The store the configuration names: PostgreSQL shared with other replicas, or SQLite in the data folder.
    static func openStore(_ configuration: Configuration, report: @escaping @Sendable (ServiceEvent) -> Void) throws(StartError) -> any InstanceStore {
        if let url = configuration.databaseURL {
            do {
                return try PostgresStore(
                    url: url,
                    options: .init(
                        historyLimit: configuration.historyLimit, listenURL: configuration.databaseListenURL,
                        timeout: .milliseconds(Int64((configuration.databaseTimeout * 1000).rounded())),
                        readTimeout: .milliseconds(Int64((configuration.databaseReadTimeout * 1000).rounded()))
                    ),
                    report: report
                )
            } catch {
                throw StartError(description: error.message)
            }
        }
        do {
            return try SQLiteStore(
                directory: configuration.dataDirectory,
                options: .init(
                    sync: configuration.sync, historyLimit: configuration.historyLimit, maxPageCount: configuration.maxDatabasePages,
                    maxWALSize: configuration.maxWALSize, acceptDataLoss: configuration.acceptDataLoss
                ),
                report: report
            )
        } catch {
            let hint = error.kind == .dataLoss ? "; if the loss is known and accepted, start once with --accept-data-loss" : ""
            throw StartError(description: error.message + hint)
        }
    }

    /// What runs around the router for every request, outermost first: the id and the log
    /// line cover everything inside, refusals included; a request by a name the service does
    /// not answer to, and a write from another site's page, are refused before anything else
    /// looks at them; CORS answers preflights before any check that a browser's preflight
    /// could not pass; the rate limit comes before authentication so that guessing tokens is
    /// limited too; the body's type is checked last, for a client that may write. Metrics
    /// are outside all of them, so that refusals are counted, and outside the 304s
    /// ``Caching`` makes of 200s, so that those are counted and logged as 304.
    static func middlewares(_ configuration: Configuration, token: String?, logger: LineLogger, metrics: RequestMetrics?) -> [any Middleware] {
        var middlewares: [any Middleware] = [RequestIDs()] + (metrics.map { [$0] } ?? []) + [AccessLog(logger: logger), SecurityHeaders(), Caching()]
        if let names = configuration.allowedHostNames { middlewares.append(AllowedHosts(names: names)) }
        middlewares.append(CrossOrigin(origins: configuration.corsOrigins))
        if let policy = configuration.rateLimitPolicy { middlewares.append(RateLimit(limiter: RateLimiter(policy: policy))) }
        if let token { middlewares.append(Authentication(token: token, protectsReads: configuration.protectReads)) }
        middlewares.append(JSONBodies())
        return middlewares
    }

    /// Stops serving: open streams end cleanly, in-flight requests finish first (for up to
    /// ``stopDrainSeconds``; those still running then are abandoned, their connections closed).
    public func stop() {
        server.stop(drainSeconds: Self.stopDrainSeconds)
        registry.stop()
        hub.stop()
        store.close()
        logger.info("lifecycled stopped", [:])
        // Lines wait in memory for their writer (see LogSink): a clean stop writes them all.
        logger.flush()
    }

    /// How long a stop waits for requests in flight and for streams to deliver their end:
    /// short enough that the process exits within 5 s even when a stream's client has
    /// stopped reading (a stuck stream cannot send its end).
    static let stopDrainSeconds = 3.0

    /// The dashboard's files: the folder `--public-dir` names, or else the first candidate
    /// (``dashboardCandidates(executable:workingDirectory:)``) that holds an `index.html`;
    /// `nil`, and a warning naming where it looked, when there is none (`GET /` then says how
    /// to point at it).
    static func dashboard(_ directory: String?, logger: LineLogger) -> StaticFiles? {
        if let directory {
            let files = StaticFiles(root: directory)
            if files == nil { logger.warning("no dashboard folder", ["path": directory]) }
            return files
        }
        let candidates = dashboardCandidates(executable: executablePath(), workingDirectory: FileManager.default.currentDirectoryPath)
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate + "/index.html") {
            return StaticFiles(root: candidate)
        }
        logger.warning("no dashboard folder found; give its path with --public-dir or LIFECYCLED_PUBLIC_DIR", ["searched": candidates.joined(separator: ",")])
        return nil
    }

    /// Where the dashboard is looked for, in order: where an installation puts it beside the
    /// binary's `bin` folder (`/usr/local/bin/lifecycled` finds `/usr/local/share/lifecycled/Public`,
    /// as the container has it), the binary's own folder (an unpacked archive), and last the
    /// working directory (`swift run` or `make run` in the repository). The working directory
    /// comes last so that an unrelated `Public` folder where the binary happens to be started
    /// (a home folder's) is not served over the dashboard that came with it.
    static func dashboardCandidates(executable: String, workingDirectory: String) -> [String] {
        let binary = URL(fileURLWithPath: executable).deletingLastPathComponent()
        return [
            binary.deletingLastPathComponent().appendingPathComponent("share/lifecycled/Public").standardizedFileURL.path,
            binary.appendingPathComponent("Public").path,
            URL(fileURLWithPath: workingDirectory).appendingPathComponent("Public").path,
        ]
    }

    /// The running executable's own path, symlinks resolved (so a link in `/usr/local/bin`
    /// to an installation elsewhere finds that installation's files).
    static func executablePath() -> String {
        do {
            return try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        } catch {
            // Without /proc (a sandbox): the path the process was started by.
            return URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        }
    }

    static func loadModels(from directory: String) throws(StartError) -> [String: Model] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }.sorted()
        } catch {
            throw StartError(description: "cannot read models folder \(directory): \(error.localizedDescription)")
        }
        var models: [String: Model] = [:]
        for file in files {
            let path = directory + "/" + file
            guard let data = FileManager.default.contents(atPath: path) else { throw StartError(description: "cannot read \(path)") }
            do {
                let model = try Model(json: data)
                models[model.name] = model
            } catch {
                throw StartError(description: "\(path): \(error.description)")
            }
        }
        return models
    }
}
