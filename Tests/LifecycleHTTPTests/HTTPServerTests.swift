import LifecycleLog
import Testing
@testable import LifecycleHTTP

/// What a server tells before, while and after it runs. (How it serves is tested through
/// the service's suites, which drive it over sockets.)
@Suite("HTTP server")
struct HTTPServerTests {
    static func server(maxConnections: Int?) -> HTTPServer {
        HTTPServer(
            configuration: ServerConfiguration(port: 0, threads: 1, maxConnections: maxConnections), logger: LineLogger(level: .error),
            pipeline: Pipeline(router: Router())
        )
    }

    @Test("the connection limit is fixed when the server is made; the port when it starts, and kept once it stops")
    func settings() throws {
        let server = Self.server(maxConnections: 7)
        #expect(server.maxConnections == 7)
        #expect(server.port == 0)
        server.stop()
        try server.start()
        let port = server.port
        #expect(port != 0)
        server.stop()
        server.stop()
        #expect(server.port == port)
    }

    @Test("a connection limit past the open-file limit is lowered to fit it")
    func lowered() {
        let server = Self.server(maxConnections: Int.max)
        #expect(server.maxConnections > 0 && server.maxConnections < Int.max)
        #expect(server.maxConnections == Self.server(maxConnections: nil).maxConnections)
    }
}
