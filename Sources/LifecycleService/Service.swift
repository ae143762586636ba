import Foundation
import LifecycleKit
import LifecycleStore
import MicroHTTP

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
    public let logger: Logger

    /// The port the server is bound to.
    public var port: UInt16 { server.port }

    /// Opens the store, restores every instance and starts serving.
    public init(configuration: Configuration) throws(StartError) {
        self.configuration = configuration
        let logger = Logger(level: configuration.logLevel, format: configuration.logFormat)
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
        let report: @Sendable (StoreEvent) -> Void = { event in logger.log(Logger.Level(event.level), event.message, fields: event.fields.map { ($0.key, $0.value) }) }
        store = try Self.openStore(configuration, report: report)
        hub = StreamHub(store: store, lastSequence: store.lastSequence, settings: configuration.streamSettings, logger: logger)
        do {
            registry = try InstanceRegistry(
                models: models, store: store, hub: hub, maxInstances: configuration.maxInstances, pollInterval: configuration.pollInterval,
                report: report
            )
        } catch {
            hub.stop()
            throw StartError(description: store.reason(for: error).message)
        }
        do {
            // Nothing is served from a database that has not passed its check.
            try store.verifyIntegrity()
        } catch {
            registry.stop()
            hub.stop()
            throw StartError(description: error.message)
        }

        let staticFiles = StaticFiles(root: configuration.publicDirectory)
        if staticFiles == nil { logger.warning("no dashboard folder", ["path": configuration.publicDirectory]) }
        let requestMetrics = configuration.metrics ? RequestMetrics() : nil
        metrics = requestMetrics.map { [registry, store] in ServiceMetrics(requests: $0, registry: registry, databaseFile: store.databaseFile) }
        let router = API(
            registry: registry, staticFiles: staticFiles, metrics: metrics, tokenScope: token.map(Authentication.idempotencyScope), logger: logger,
            graphLimits: ModelGraphs.Limits(maxElements: configuration.graphMaxSize, wait: configuration.graphWait)
        ).makeRouter()
        server = HTTPServer(
            configuration: ServerConfiguration(
                host: configuration.host, port: configuration.port, threads: configuration.threads, maxBodySize: configuration.maxBodySize,
                requestTimeout: configuration.requestTimeout, maxConnections: configuration.maxConnections,
                maxConnectionsPerClient: configuration.maxConnectionsPerClient
            ),
            logger: logger,
            pipeline: Pipeline(router: router, middlewares: Self.middlewares(configuration, token: token, logger: logger, metrics: requestMetrics))
        )
        do {
            try server.start()
        } catch {
            registry.stop()
            hub.stop()
            throw StartError(description: error.description)
        }
        let millis = (DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        logger.info("lifecycled started", [
            "address": "\(configuration.host):\(server.port)", "instances": String(registry.count),
            "lastSequence": String(store.lastSequence), "models": models.keys.sorted().joined(separator: ","),
            "sync": configuration.sync.rawValue, "maxConnections": String(server.maxConnections), "startupMillis": String(millis),
            "auth": token == nil ? "off" : configuration.protectReads ? "all" : "writes",
            "version": Configuration.version,
        ])
        if token == nil, !isLoopback(configuration.host) {
            logger.warning("writes are open to anyone who can reach the port: no token is set (--token or --token-file)", [
                "address": "\(configuration.host):\(server.port)",
            ])
        }
    }

    /// The store the configuration names: PostgreSQL shared with other replicas, or SQLite in the data folder.
    static func openStore(_ configuration: Configuration, report: @escaping @Sendable (StoreEvent) -> Void) throws(StartError) -> any InstanceStore {
        if let url = configuration.databaseURL {
            do {
                return try PostgresStore(
                    url: url, options: .init(historyLimit: configuration.historyLimit, listenURL: configuration.databaseListenURL), report: report
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
            let hint = error.isDataLoss ? "; if the loss is known and accepted, start once with --accept-data-loss" : ""
            throw StartError(description: error.message + hint)
        }
    }

    /// What runs around the router for every request, outermost first: the id and the log
    /// line cover everything inside, refusals included; CORS answers preflights before any
    /// check that a browser's preflight could not pass; the rate limit comes before
    /// authentication so that guessing tokens is limited too. Metrics are outside both, so
    /// that refusals are counted.
    static func middlewares(_ configuration: Configuration, token: String?, logger: Logger, metrics: RequestMetrics?) -> [any Middleware] {
        var middlewares: [any Middleware] = [RequestIDs()] + (metrics.map { [$0] } ?? []) + [AccessLog(logger: logger), SecurityHeaders()]
        if !configuration.corsOrigins.isEmpty { middlewares.append(CrossOrigin(origins: configuration.corsOrigins)) }
        if let policy = configuration.rateLimitPolicy { middlewares.append(RateLimit(limiter: RateLimiter(policy: policy))) }
        if let token { middlewares.append(Authentication(token: token, protectsReads: configuration.protectReads)) }
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
    }

    /// How long a stop waits for requests in flight and for streams to deliver their end:
    /// short enough that the process exits within 5 s even when a stream's client has
    /// stopped reading (a stuck stream cannot send its end).
    static let stopDrainSeconds = 3.0

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

extension Logger.Level {
    /// The level a store's or the registry's event is logged at.
    init(_ level: StoreEvent.Level) {
        self = switch level {
        case .info: .info
        case .warning: .warning
        case .error: .error
        }
    }
}
