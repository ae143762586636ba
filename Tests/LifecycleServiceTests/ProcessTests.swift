import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService
@testable import LifecycleStore

@Suite("lifecycled executable", .serialized)
struct ProcessTests {
    @Test("--help prints usage and exits 0")
    func help() throws {
        let run = try LifecycledProcess(arguments: ["--help"]).finish()
        #expect(run.status == 0)
        #expect(run.stdout.contains("usage: lifecycled"))
        for flag in ["--host", "--port", "--data-dir", "--public-dir", "--log-level", "--sync", "--history-limit", "LIFECYCLED_PORT"] {
            #expect(run.stdout.contains(flag), "\(flag)")
        }
    }

    @Test("a bad flag or value exits 2 with a clear message", arguments: [
        (["--bogus"], [String: String](), "unknown option --bogus"),
        (["--port", "eighty"], [:], "invalid value \"eighty\" for --port"),
        (["--port"], [:], "option --port needs a value"),
        (["--sync=sometimes"], [:], "invalid value \"sometimes\" for --sync"),
        ([], ["LIFECYCLED_LOG_LEVEL": "loud"], "invalid value \"loud\" for LIFECYCLED_LOG_LEVEL"),
    ])
    func badFlags(arguments: [String], environment: [String: String], message: String) throws {
        let run = try LifecycledProcess(arguments: arguments, environment: environment).finish()
        #expect(run.status == 2)
        #expect(run.stderr.contains(message), "\(run.stderr)")
    }

    @Test("a port in use exits 1 with a clear message; a corrupt database too")
    func startFailures() throws {
        let data = TemporaryDirectory()
        let first = try LifecycledProcess.serving(dataDirectory: data.path + "/a")
        defer { first.signal(SIGKILL); first.finish() }
        let second = try LifecycledProcess(arguments: ["--port", String(first.port), "--data-dir", data.path + "/b"]).finish()
        #expect(second.status == 1)
        #expect(second.stderr.contains("address already in use"), "\(second.stderr)")

        try FileManager.default.createDirectory(atPath: data.path + "/c", withIntermediateDirectories: true)
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: data.path + "/c/" + SQLiteStore.fileName))
        let corrupt = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path + "/c"]).finish()
        #expect(corrupt.status == 1)
        #expect(corrupt.stderr.contains("file is not a database"), "\(corrupt.stderr)")
    }

    @Test("SIGTERM and SIGINT stop it cleanly; settings come from the environment", arguments: [SIGTERM, SIGINT])
    func signals(signal: Int32) throws {
        let data = TemporaryDirectory()
        let port = freePort()
        let server = try LifecycledProcess(arguments: [], environment: ["LIFECYCLED_PORT": String(port), "LIFECYCLED_DATA_DIR": data.path, "LIFECYCLED_LOG_LEVEL": "debug"])
        var answered = false
        for _ in 0..<500 where !answered {
            answered = (try? WireClient(port: port).request("GET", "/healthz"))?.status == 200
            if !answered { usleep(20_000) }
        }
        #expect(answered)
        server.signal(signal)
        let run = server.finish()
        #expect(run.status == 0)
        #expect(run.stderr.contains("lifecycled stopped"))
        #expect(run.stderr.contains("level=info msg=request method=GET route=/healthz status=200"), "one line per request")
    }

    @Test("a stop signal sent the moment the port answers is never lost")
    func earlySignal() throws {
        let data = TemporaryDirectory()
        for round in 0..<40 {
            // Polling tightly sends the signal as close to the first answer as possible.
            let server = try LifecycledProcess.serving(dataDirectory: data.path, pollMicroseconds: 500)
            server.signal(SIGTERM)
            let run = server.finish(within: 15)
            #expect(run.status == 0, "round \(round): \(run.stderr)")
            #expect(run.stderr.contains("lifecycled stopped"), "round \(round)")
        }
    }
}
