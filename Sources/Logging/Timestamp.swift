import Foundation

/// The service's one way to write a time: in log lines and in JSON bodies alike, so that a
/// time read in one can be searched for in the other.
public enum Timestamp {
    /// `date` as ISO 8601 in UTC, rounded to the millisecond: `2026-11-30T00:06:49.637Z`.
    /// (Foundation's ISO 8601 style truncates, which shows 0.123 stored as 0.12299… as .122.)
    public static func iso8601(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(milliseconds.floorDivided(by: 1000))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let fraction = milliseconds - Int64(seconds) * 1000
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let millis = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
    }
}

extension Int64 {
    /// Division rounding toward negative infinity, so times before 1970 format correctly.
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
