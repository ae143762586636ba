import Foundation
import LifecycleLocks

/// Counts requests in flight, streams included, so `stop()` can wait for them.
final class RequestGate: Sendable {
    private let isClosedNow = LockedValue(false)
    /// A group, not a count under the mutex: `drain(until:)` waits for it to empty, with a deadline.
    private let group = DispatchGroup()

    /// Counts a request, unless the server is stopping.
    func admit() -> Bool {
        isClosedNow.withLock { isClosed in
            guard !isClosed else { return false }
            group.enter()
            return true
        }
    }

    /// Ends a counted request.
    func release() {
        group.leave()
    }

    /// Refuses new requests from now on.
    func close() {
        isClosedNow.withLock { $0 = true }
    }

    /// Whether new requests are refused: the server is stopping.
    var isClosed: Bool {
        isClosedNow.withLock { $0 }
    }

    /// Waits until no request is in flight, or `deadline`.
    func drain(until deadline: DispatchTime) {
        _ = group.wait(timeout: deadline)
    }
}
