import Foundation
import Logging
import Synchronization

/// Refused and cut connections, logged at info without flooding: the first at once, then
/// at most one line per reason every 10 seconds with the count since the last line.
final class RefusalLog: Sendable {
    private struct Pending {
        var count = 0
        var lastLine: UInt64 = 0
    }

    private let logger: Logger
    private let pending = Mutex<[String: Pending]>([:])
    private static let interval: UInt64 = 10_000_000_000

    init(logger: Logger) { self.logger = logger }

    func record(_ count: Int, reason: String, limit: String) {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = pending.withLock { pending -> Int? in
            var entry = pending[reason, default: Pending()]
            entry.count += count
            if entry.lastLine != 0, now - entry.lastLine < Self.interval {
                pending[reason] = entry
                return nil
            }
            pending[reason] = Pending(count: 0, lastLine: now)
            return entry.count
        }
        if let due {
            logger.info(reason == "request-timeout" ? "connections closed" : "connections refused", ["reason": reason, "limit": limit, "count": String(due)])
        }
    }
}
