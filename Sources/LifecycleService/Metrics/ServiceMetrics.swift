import Foundation
import LifecycleHTTP
import LifecycleStore

/// What `GET /metrics` answers, gathered at each scrape from where each number lives: the
/// request counters (``RequestMetrics``), the committer's (``CommitMetrics``), the instance
/// cache's index, the stream hub and the database files.
///
/// A scrape never waits behind a commit: it takes only locks that are held for an update or
/// a look-up (the counters' own, the instance cache's lock, which the committer takes to
/// publish after a commit, and the hub's), never the store's, which a transaction holds.
final class ServiceMetrics: Sendable {
    let requests: RequestMetrics
    let registry: InstanceRegistry
    /// The SQLite file; its WAL is beside it with `-wal` appended.
    let databaseFile: String?
    /// Seconds since 1970 when the service started: counters "since the process started" reset then.
    let startTime: Double

    init(requests: RequestMetrics, registry: InstanceRegistry, databaseFile: String?, startTime: Date = Date()) {
        self.requests = requests
        self.registry = registry
        self.databaseFile = databaseFile
        self.startTime = (startTime.timeIntervalSince1970 * 1000).rounded() / 1000
        registry.metrics.start(models: registry.models.keys)
    }

    /// The whole exposition, as `GET /metrics` answers it.
    func response() -> Response {
        Response(status: 200, headers: [("Content-Type", Exposition.contentType)], body: Array(exposition().utf8))
    }

    func exposition() -> String {
        var out = Exposition()
        out.family("lifecycled_process_start_time_seconds", .gauge, help: "When the process started, in seconds since 1970: counters that are not kept across restarts start again from 0 then.")
        out.sample("lifecycled_process_start_time_seconds", [], startTime)

        requests.write(to: &out)

        out.family("lifecycled_instances", .gauge, help: "Instances by model and state, from the stored instances (so right after a restart too); every state of every loaded model is listed.")
        var counts: [String: [String: Int]] = [:]
        for (model, state, count) in registry.instanceCounts { counts[model, default: [:]][state] = count }
        for model in registry.models.keys.sorted() {
            for state in registry.models[model]!.definition.states.map(\.name).sorted() {
                out.sample("lifecycled_instances", [("model", model), ("state", state)], counts[model]?[state] ?? 0)
            }
        }

        out.family("lifecycled_findings", .gauge, help: "Findings (signatures of GET /v1/findings) by kind, from the stored findings (so right after a restart too); every kind is listed.")
        let findings = registry.findingCounts
        for kind in FindingKind.allCases { out.sample("lifecycled_findings", [("kind", kind.rawValue)], findings[kind] ?? 0) }

        registry.metrics.write(to: &out)

        out.family("lifecycled_stream_subscribers", .gauge, help: "Stream subscriptions open now.")
        out.sample("lifecycled_stream_subscribers", [], registry.hub.subscriberCount)
        out.family("lifecycled_stream_subscribers_dropped_total", .counter, help: "Stream subscriptions closed (with event: overflow) for falling further behind than their buffer allows, since the process started. Not kept across restarts.")
        out.sample("lifecycled_stream_subscribers_dropped_total", [], registry.hub.overflowCount)

        out.family("lifecycled_store_wal_bytes", .gauge, help: "Size of the SQLite write-ahead log file, in bytes (0 when there is none).")
        if let databaseFile, let size = Self.fileSize(databaseFile + "-wal") { out.sample("lifecycled_store_wal_bytes", [], size) }
        out.family("lifecycled_store_database_bytes", .gauge, help: "Size of the SQLite database file, in bytes (without its write-ahead log).")
        if let databaseFile, let size = Self.fileSize(databaseFile) { out.sample("lifecycled_store_database_bytes", [], size) }
        return out.text
    }

    /// A file's size; 0 for a file that is not there (SQLite removes an empty WAL at a clean
    /// close); `nil`, and no sample, if it cannot be read for another reason.
    static func fileSize(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return errno == ENOENT ? 0 : nil }
        return Int(info.st_size)
    }
}
