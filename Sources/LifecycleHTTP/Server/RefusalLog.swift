import Foundation
import LifecycleLog
import LifecycleLocks

/// Refused and cut connections, logged at info without flooding: the first at once, then
/// at most one line per reason every 10 seconds with the count since the last line.
final class RefusalLog: Sendable {
    private let logger: LineLogger
    private let tally = LockedValue(RefusalTally(interval: 10_000_000_000))

    init(logger: LineLogger) { self.logger = logger }

    func record(_ count: Int, reason: String, limit: String) {
        // The time is read under the lock: read before it, a later time could be recorded
        // first by another thread, and this one would be earlier than the last line's.
        let due = tally.withLock { $0.record(count, reason: reason, now: DispatchTime.now().uptimeNanoseconds) }
        if let due {
            logger.info(reason == "request-timeout" ? "connections closed" : "connections refused", ["reason": reason, "limit": limit, "count": String(due)])
        }
    }
}

/// Which refusals are due a log line: the first of a reason at once, then at most one line
/// per reason every `interval`, carrying the count since the last one. No clock or I/O of its
/// own, so its rhythm is tested without waiting.
struct RefusalTally {
    private struct Pending {
        var count = 0
        var lastLine: UInt64?
    }

    /// Nanoseconds between two lines of one reason at least.
    let interval: UInt64
    private var pending: [String: Pending] = [:]

    init(interval: UInt64) { self.interval = interval }

    /// Counts `count` refusals for `reason` at `now` (nanoseconds from any fixed start);
    /// returns the count a line must carry now, or nil while the last line is too recent.
    /// A time before the last line's counts as too recent rather than trapping.
    mutating func record(_ count: Int, reason: String, now: UInt64) -> Int? {
        var entry = pending[reason, default: Pending()]
        entry.count += count
        if let last = entry.lastLine, last > now || now - last < interval {
            pending[reason] = entry
            return nil
        }
        pending[reason] = Pending(count: 0, lastLine: now)
        return entry.count
    }
}
