import Foundation
import LifecycleService
import LifecycleLog

// Flags and environment, wiring, signals. Exit codes: 0 after a clean stop,
// 1 when the service cannot start, 2 for a bad command line; for `healthcheck`,
// 0 when /healthz answers 200 and 1 otherwise; for the client commands, see ClientCommand.Status.

// `lifecycled post|action|relaunch|create|flush|tail|check …` are clients of a running service (Commands/), not the
// service: they run with the usual signal handling and exit with the command's status.
if let name = CommandLine.arguments.dropFirst().first, let command = ClientCommand(rawValue: name) {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    Task { exit(await command.run(arguments, environment: ProcessInfo.processInfo.environment)) }
    dispatchMain()
}

// Block SIGINT and SIGTERM first, before any thread exists, so every thread inherits the
// block and a stop signal stays pending until `sigwait` below takes it, however early it
// arrives (a supervisor may send it the moment the port answers).
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

// `lifecycled healthcheck [options]` asks the service those options describe, instead of
// being it: a container's HEALTHCHECK runs it with the service's own environment.
var arguments = Array(CommandLine.arguments.dropFirst())
let isHealthCheck = arguments.first == "healthcheck"
if isHealthCheck { arguments.removeFirst() }

let configuration: Configuration
do {
    configuration = try Configuration.parse(arguments: arguments, environment: ProcessInfo.processInfo.environment)
} catch .helpRequested {
    print(Configuration.usage, terminator: "")
    exit(0)
} catch .versionRequested {
    print("lifecycled \(Configuration.version)")
    exit(0)
} catch {
    FileHandle.standardError.write(Data("lifecycled: \(error)\n".utf8))
    exit(2)
}

if isHealthCheck {
    // A probe is no service: the usual signals end it.
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
    do {
        print(try HealthCheck(configuration: configuration).run())
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("lifecycled healthcheck: \(error)\n".utf8))
        exit(1)
    }
}

let service: Service
do {
    service = try Service(configuration: configuration)
} catch {
    // The lines logged while starting first, so the reason comes last, as it happened.
    LogSink.standardError.flush()
    FileHandle.standardError.write(Data("lifecycled: \(error)\n".utf8))
    exit(1)
}

var received: Int32 = 0
sigwait(&stopSignals, &received)
service.logger.info("stopping", ["signal": received == SIGINT ? "SIGINT" : "SIGTERM"])
service.stop()
exit(0)
