import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("open-file limit")
struct OpenFileLimitTests {
    /// lifecycled started from a shell that lowered its soft limit, as a default login shell's 1024 would.
    @Test("at start the soft open-file limit is raised to the hard limit, and the connection limit sized from it")
    func raisedAtStart() throws {
        var limit = rlimit()
        #if os(Linux)
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        #endif
        let hard = Int(limit.rlim_max)
        let data = TemporaryDirectory()
        let port = freePort()
        let errors = PipeCollector()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ulimit -Sn 1024 && exec \"$0\" \"$@\"", lifecycledPath, "--port", String(port), "--data-dir", data.path]
        if let url = try TestStore.databaseURL(for: data.path) {
            process.environment = ProcessInfo.processInfo.environment.merging(["LIFECYCLED_DATABASE_URL": url]) { $1 }
        }
        process.standardError = errors.writeEnd
        try process.run()
        try errors.writeEnd.close()
        #expect(eventually(within: 20) { (try? WireClient(port: port).request("GET", "/healthz"))?.status == 200 })
        let limits = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)) ?? ""
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        let log = errors.finish()
        #expect(process.terminationStatus == 0)

        let openFiles = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ").compactMap { Int($0) } ?? []
        #expect(openFiles == [hard, hard], "\(limits)")
        let started = log.split(separator: "\n").first { $0.contains("lifecycled started") } ?? ""
        let maxConnections = started.split(separator: " ").first { $0.hasPrefix("maxConnections=") }.flatMap { Int($0.dropFirst("maxConnections=".count)) }
        #expect(maxConnections == hard - 256, "\(log)")
        // On a machine whose hard limit is 20,000: room for 10,000 streams and as many other clients.
        if hard >= 20_000 { #expect((maxConnections ?? 0) >= 19_000) }
    }
}
