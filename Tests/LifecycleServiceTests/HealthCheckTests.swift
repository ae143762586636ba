import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService
#if canImport(Glibc)
import Glibc
#endif

@Suite("lifecycled healthcheck")
struct HealthCheckTests {
    @Test("a serving lifecycled: exit 0, found from the same variables the service reads (0.0.0.0 asks loopback)")
    func healthy() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path)
        defer { server.signal(SIGTERM); server.finish() }

        let fromEnvironment = try LifecycledProcess(
            arguments: ["healthcheck"], environment: ["LIFECYCLED_HOST": "0.0.0.0", "LIFECYCLED_PORT": String(server.port)]
        ).finish()
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        #expect(fromEnvironment.stdout == "GET http://127.0.0.1:\(server.port)/healthz answered 200\n")

        let fromFlags = try LifecycledProcess(arguments: ["healthcheck", "--host", "127.0.0.1", "--port", String(server.port)]).finish()
        #expect(fromFlags.status == 0, "\(fromFlags.stderr)")
        #expect(server.waitForLogLine(containing: ["route=/healthz", "status=200"]) != nil, "the probe reached the service")
    }

    @Test("nothing listening: exit 1 with a one-line reason")
    func nothingListening() throws {
        let port = freePort()
        let run = try LifecycledProcess(arguments: ["healthcheck"], environment: ["LIFECYCLED_PORT": String(port)]).finish()
        #expect(run.status == 1)
        #expect(run.stderr == "lifecycled healthcheck: cannot connect to 127.0.0.1:\(port): Connection refused\n")
        #expect(run.stdout.isEmpty)
    }

    @Test("a bad flag after healthcheck exits 2, as for the service")
    func badFlag() throws {
        let run = try LifecycledProcess(arguments: ["healthcheck", "--port", "eighty"]).finish()
        #expect(run.status == 2)
        #expect(run.stderr.contains("invalid value \"eighty\" for --port"), "\(run.stderr)")
    }

    @Test("storage that cannot commit: unhealthy, with the service's reason", .sqliteOnly("a page cap on the SQLite file fills the disk"))
    func storageFailing() throws {
        let server = try TestServer { $0.maxDatabasePages = 19 }  // the schema (a page a table and index) and a few records
        let c = try server.connect()
        try c.makeInstance("app", events: ["didFinishLaunching"])
        var refused = false
        for i in 0..<2000 where !refused {
            refused = try c.event("app", #"{"event": "willConnectToWindow", "window": "\#(String(repeating: "w", count: 200))-\#(i)"}"#).status == 503
        }
        try #require(refused, "the database filled up")
        var configuration = server.configuration
        configuration.port = server.port
        #expect {
            _ = try HealthCheck(configuration: configuration).run()
        } throws: { error in
            let text = "\(error)"
            return text.hasPrefix("GET http://127.0.0.1:\(server.port)/healthz answered 503: ")
                && text.contains("storage cannot commit writes") && !text.contains("\n")
        }
    }

    @Test("a listener that never answers: unhealthy once the timeout has passed, not waited on")
    func noAnswer() throws {
        // Accepted by the kernel's backlog, never read: connect succeeds, no answer comes.
        let listener = try LoopbackListener()
        defer { withExtendedLifetime(listener) {} }

        var configuration = Configuration()
        configuration.port = listener.port
        #expect {
            _ = try HealthCheck(configuration: configuration, timeout: .milliseconds(300)).run()
        } throws: { error in
            "\(error)" == "127.0.0.1:\(configuration.port) did not answer GET /healthz in time"
        }
    }

    @Test("the address asked: loopback for a wildcard, else the one listened on", arguments: [
        ("0.0.0.0", "127.0.0.1"), ("::", "::1"), ("[::]", "::1"), ("127.0.0.1", "127.0.0.1"), ("::1", "::1"), ("[::1]", "::1"), ("localhost", "localhost"),
    ])
    func address(listening: String, asked: String) {
        var configuration = Configuration()
        configuration.host = listening
        #expect(HealthCheck(configuration: configuration).host == asked)
    }
}
