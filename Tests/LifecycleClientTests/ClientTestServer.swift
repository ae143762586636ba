import Foundation
import LifecycleClient
import LifecycleTestSupport
@testable import LifecycleService

/// The real service on a loopback port with its own data folder (on the store `TestStore`
/// picks), and a ``LifecycleClient`` of it.
final class ClientTestServer {
    let root = TemporaryDirectory()
    private(set) var service: Service?
    private(set) var configuration: Configuration

    init(configure: (inout Configuration) -> Void = { _ in }) throws {
        configuration = Configuration()
        configuration.port = 0
        configuration.dataDirectory = root.path + "/data"
        configuration.publicDirectory = root.path
        configuration.logLevel = .warning
        configure(&configuration)
        if configuration.databaseURL == nil { configuration.databaseURL = try TestStore.databaseURL(for: configuration.dataDirectory) }
        service = try Service(configuration: configuration)
        // A restart comes back on the same port, where the client's URL points.
        configuration.port = service!.port
    }

    deinit { service?.stop() }

    var port: UInt16 { configuration.port }
    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A client of this server.
    func client(token: String? = nil, timeout: TimeInterval = 10) -> LifecycleClient {
        LifecycleClient(configuration: .init(server: url, token: token ?? configuration.token, timeout: timeout))
    }

    /// Stops the service; its port is free until ``start()``.
    func stop() {
        service?.stop()
        service = nil
    }

    /// Starts the service again on the same data folder and port.
    func start() throws {
        service = try Service(configuration: configuration)
    }
}
