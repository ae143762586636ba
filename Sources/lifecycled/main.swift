import Foundation
import LifecycleService

// Flags and environment, wiring, signals. Exit codes: 0 after a clean stop,
// 1 when the service cannot start, 2 for a bad command line.

let configuration: Configuration
do {
    configuration = try Configuration.parse(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
} catch .helpRequested {
    print(Configuration.usage, terminator: "")
    exit(0)
} catch {
    FileHandle.standardError.write(Data("lifecycled: \(error)\n".utf8))
    exit(2)
}

let service: Service
do {
    service = try Service(configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("lifecycled: \(error)\n".utf8))
    exit(1)
}

let stopped = DispatchSemaphore(value: 0)
var sources: [DispatchSourceSignal] = []
for signalNumber in [SIGINT, SIGTERM] {
    signal(signalNumber, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
    source.setEventHandler { stopped.signal() }
    source.resume()
    sources.append(source)
}
stopped.wait()
service.stop()
exit(0)
