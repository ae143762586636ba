import Foundation

/// A thread running `work` every `interval` seconds until stopped.
final class Sweeper: Sendable {
    /// Semaphores, as both are waits: `stopping`'s timeout paces the sweeps, and `stop()` waits on
    /// `finished` for the last one.
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

    /// Ends the thread after its current sweep; returns once it has ended.
    func stop() {
        stopping.signal()
        finished.wait()
    }
}
