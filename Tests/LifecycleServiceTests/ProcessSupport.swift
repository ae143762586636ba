import Foundation
import LifecycleTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The repository's root, from this file's place in it (Tests/LifecycleServiceTests/): where the
/// tests read the docs, the Makefile and the Dockerfile, and find what the build made.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The `lifecycled` executable built beside the tests.
let lifecycledPath: String = {
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lifecycled").path
    if FileManager.default.isExecutableFile(atPath: beside) { return beside }
    return repositoryRoot.appendingPathComponent(".build/debug/lifecycled").path
}()

/// `lifecycled` running as its own process.
final class LifecycledProcess {
    let process = Process()
    let port: UInt16
    private let errors = PipeCollector()
    private let output = PipeCollector()

    /// `executable`: another copy of lifecycled (one installed elsewhere); `directory`: the
    /// working directory to start it in, else the tests' own.
    init(arguments: [String], environment: [String: String] = [:], port: UInt16 = 0, executable: String = lifecycledPath, directory: String? = nil) throws {
        self.port = port
        process.executableURL = URL(fileURLWithPath: executable)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        process.standardError = errors.writeEnd
        process.standardOutput = output.writeEnd
        try process.run()
        // Only the child writes to these now.
        try errors.writeEnd.close()
        try output.writeEnd.close()
    }

    /// A test that throws before stopping its server must not leave the process running.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Starts a server on a free port and waits until it answers.
    /// `port`: a given one (to start again where a stopped server listened), else a free one.
    static func serving(
        dataDirectory: String, extra: [String] = [], port: UInt16? = nil, pollMicroseconds: UInt32 = 20_000, executable: String = lifecycledPath,
        directory: String? = nil
    ) throws -> LifecycledProcess {
        let port = port ?? freePort()
        var environment: [String: String] = [:]
        if let url = try TestStore.databaseURL(for: dataDirectory) { environment["LIFECYCLED_DATABASE_URL"] = url }
        let server = try LifecycledProcess(
            arguments: ["--port", String(port), "--data-dir", dataDirectory] + extra, environment: environment, port: port, executable: executable,
            directory: directory
        )
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard server.process.isRunning else { break }
            // Its own start line as well as an answer: another server on the port must not pass for this one.
            if server.standardErrorSoFar.contains("lifecycled started"), let c = try? WireClient(port: port),
                (try? c.request("GET", "/healthz"))?.status == 200
            {
                return server
            }
            usleep(pollMicroseconds)
        }
        throw HTTPClientError(description: "lifecycled did not start: \(server.finish().stderr)")
    }

    /// Waits (at most `seconds`) for the process to end; returns its status and output.
    /// A process that does not end is killed and recorded as a failure, not waited on forever.
    @discardableResult
    func finish(within seconds: Double = 30) -> (status: Int32, stdout: String, stderr: String) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            Issue.record("lifecycled (pid \(process.processIdentifier)) did not exit within \(seconds) s")
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return (process.terminationStatus, output.finish(), errors.finish())
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// What the process has written to standard error so far.
    var standardErrorSoFar: String { errors.received }

    /// What the process has written to standard output so far.
    var standardOutputSoFar: String { output.received }

    /// Waits (up to 10 s) for a line of standard error that contains every one of `parts`.
    func waitForLogLine(containing parts: [String]) -> String? {
        let deadline = Date().addingTimeInterval(10)
        repeat {
            if let line = standardErrorSoFar.split(separator: "\n").first(where: { line in parts.allSatisfy { line.contains($0) } }) {
                return String(line)
            }
            usleep(10_000)
        } while Date() < deadline
        return nil
    }
}
