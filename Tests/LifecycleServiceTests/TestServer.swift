import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

/// The real service, on a free loopback port or reached in-process (``Mode``), with its own
/// data folder and a small public folder (plus a secret beside it and a symlink pointing at it).
final class TestServer {
    let root: TemporaryDirectory
    var service: Service?
    var configuration: Configuration

    var dataDirectory: String { configuration.dataDirectory }
    var port: UInt16 {
        precondition(mode == .live, "a TestServer(.router) opens no port: start it .live to reach it over the wire")
        return service!.port
    }

    /// How the tests reach the service, as Hummingbird's `app.test(.router)` and `app.test(.live)`.
    enum Mode {
        /// No port is opened: requests go in-process through the service's own middlewares and
        /// router (``router()``), as `Request` values. For what the API answers.
        case router
        /// The service listens on a free loopback port (``connect()``; ``router()`` too). For
        /// what needs the wire: sockets, framing, streams, limits on connections, processes.
        case live
    }

    let mode: Mode

    init(_ mode: Mode = .live, configure: (inout Configuration) -> Void = { _ in }) throws {
        self.mode = mode
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
        service = try Service(configuration: configuration, listening: mode == .live)
    }

    deinit { service?.stop() }

    /// Stops the service and starts a new one on the same data folder.
    func restart() throws {
        service?.stop()
        service = nil
        service = try Service(configuration: configuration, listening: mode == .live)
    }

    func connect() throws -> WireClient { try WireClient(port: port) }

    /// A client of this service's middlewares and router, without a socket: request in,
    /// response out (with either mode).
    func router() -> RouterClient { RouterClient(self) }
}

/// What the API tests ask of a client: a ``WireClient`` over the wire, or a ``RouterClient``
/// straight through the service's middlewares and router.
protocol APIClient {
    func request(_ method: String, _ path: String, headers: [(String, String)], body: [UInt8]?, contentType: String?) throws -> HTTPResponse
}

extension WireClient: APIClient {}

extension APIClient {
    func request(_ method: String, _ path: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, headers: headers, body: nil, contentType: nil)
    }

    func request(_ method: String, _ path: String, json: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request(method, path, headers: headers, body: Array(json.utf8), contentType: "application/json")
    }

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
