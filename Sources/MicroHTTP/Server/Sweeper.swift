import Foundation

/// A thread running `work` every `interval` seconds until stopped.
final class Sweeper: Sendable {
    private let stopping = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(interval: Double, work: @escaping @Sendable () -> Void) {
        let thread = Thread { [stopping, finished] in
            while stopping.wait(timeout: .now() + interval) == .timedOut { work() }
            finished.signal()
        }
        thread.name = "lifecycled-http-sweeper"
        thread.start()
    }

    func stop() {
        stopping.signal()
        finished.wait()
    }
}
