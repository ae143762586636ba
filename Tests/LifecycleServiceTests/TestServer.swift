import Foundation
import TestSupport
import Synchronization
import Testing
@testable import LifecycleService

/// Which store the service tests run on: SQLite in each server's data folder, or, with
/// `LIFECYCLED_TEST_STORE=postgres` (`make postgres-test`), a fresh PostgreSQL database per
/// data folder on the test cluster (see ``PostgresCluster``), kept across restarts.
enum TestStore {
    static let isPostgres = ProcessInfo.processInfo.environment["LIFECYCLED_TEST_STORE"] == "postgres"

    private static let databases = Mutex<[String: String]>([:])

    /// For a test that works on the SQLite file itself (a trigger that fails writes, a page
    /// cap for a full disk, an old schema): it runs in the SQLite pass of `make test` and not in
    /// the PostgreSQL pass, where there is no such file.
    static let sqliteFileOnly = Testing.ConditionTrait.enabled(if: !isPostgres, "works on the SQLite file; runs in the SQLite pass")

    /// The database URL for a server on `dataDirectory`: the same one each time, so a restart
    /// finds what was committed; `nil` on SQLite.
    static func databaseURL(for dataDirectory: String) throws -> String? {
        guard isPostgres else { return nil }
        if let url = databases.withLock({ $0[dataDirectory] }) { return url }
        let url = try PostgresCluster.shared.makeDatabase()
        return databases.withLock { databases in
            if let existing = databases[dataDirectory] { return existing }
            databases[dataDirectory] = url
            return url
        }
    }
}

/// The real service on a free loopback port, with its own data folder and a small
/// public folder (plus a secret beside it and a symlink pointing at it).
final class TestServer {
    let root: TemporaryDirectory
    var service: Service?
    var configuration: Configuration

    var dataDirectory: String { configuration.dataDirectory }
    var port: UInt16 { service!.port }

    init(configure: (inout Configuration) -> Void = { _ in }) throws {
        root = TemporaryDirectory()
        let publicDirectory = root.path + "/Public"
        try FileManager.default.createDirectory(atPath: publicDirectory + "/js", withIntermediateDirectories: true)
        try "<!doctype html><title>test dashboard</title>".write(toFile: publicDirectory + "/index.html", atomically: true, encoding: .utf8)
        try "console.log('hi')".write(toFile: publicDirectory + "/js/app.js", atomically: true, encoding: .utf8)
        try "top secret".write(toFile: root.path + "/secret.txt", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: publicDirectory + "/leak.txt", withDestinationPath: root.path + "/secret.txt")

        configuration = Configuration()
        configuration.port = 0
        configuration.dataDirectory = root.path + "/data"
        configuration.publicDirectory = publicDirectory
        configuration.logLevel = .warning
        configure(&configuration)
        if configuration.databaseURL == nil { configuration.databaseURL = try TestStore.databaseURL(for: configuration.dataDirectory) }
        service = try Service(configuration: configuration)
    }

    deinit { service?.stop() }

    /// Stops the service and starts a new one on the same data folder.
    func restart() throws {
        service?.stop()
        service = nil
        service = try Service(configuration: configuration)
    }

    func connect() throws -> WireClient { try WireClient(port: port) }
}

extension WireClient {
    /// Creates an instance with PUT and walks it through the given events.
    @discardableResult
    func makeInstance(_ id: String, model: String = "ios-app", events: [String] = []) throws -> HTTPResponse {
        var last = try request("PUT", "/v1/instances/\(id)", json: #"{"model": "\#(model)"}"#)
        for event in events {
            let body = event == "willConnectToWindow" ? #"{"event": "willConnectToWindow", "window": "main"}"# : #"{"event": "\#(event)"}"#
            last = try request("POST", "/v1/instances/\(id)/events", json: body)
        }
        return last
    }

    func event(_ id: String, _ json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request("POST", "/v1/instances/\(id)/events", json: json, headers: headers)
    }

    /// Every record of an instance, through all history pages.
    func fullHistory(_ id: String, pageSize: Int = 1000) throws -> [[String: Any]] {
        var records: [[String: Any]] = []
        var after = 0
        while true {
            let page = try request("GET", "/v1/instances/\(id)/history?after=\(after)&limit=\(pageSize)").json
            records += page["items"] as? [[String: Any]] ?? []
            guard let next = page["nextAfter"] as? Int else { return records }
            after = next
        }
    }
}

let coldStart = ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"]
