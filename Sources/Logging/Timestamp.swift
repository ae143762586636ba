import Foundation

/// The service's one way to write a time: in log lines and in JSON bodies alike, so that a
/// time read in one can be searched for in the other.
public enum Timestamp {
    /// `date` as ISO 8601 in UTC, rounded to the millisecond: `2026-11-30T00:06:49.637Z`.
    /// (Foundation's ISO 8601 style truncates, which shows 0.123 stored as 0.12299… as .122.)
    public static func iso8601(_ date: Date) -> String {
        var bytes: [UInt8] = []
        var second = Second()
        write(milliseconds(date), into: &bytes, reusing: &second)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `date` in milliseconds since 1970, rounded.
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// The real-time clock now, in milliseconds since 1970, rounded: a log line's time,
    /// without a `Date`.
    static func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + (Int64(now.tv_nsec) + 500_000) / 1_000_000
    }

    /// The text of one second (`2026-11-30T00:06:49.`), kept from one line to the next: most
    /// lines fall in the second of the line before, and calendar arithmetic is the dear part.
    struct Second {
        var seconds = Int64.min
        var prefix: [UInt8] = []
    }

    /// Writes the time `milliseconds` after 1970 as ``iso8601(_:)`` does, taking its second's
    /// text from `second` when it is that second's.
    static func write(_ milliseconds: Int64, into bytes: inout [UInt8], reusing second: inout Second) {
        let seconds = milliseconds.floorDivided(by: 1000)
        if seconds != second.seconds {
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            var prefix: [UInt8] = []
            prefix.reserveCapacity(20)
            prefix.appendDecimal(Int(parts.tm_year) + 1900)
            for (separator, part) in [("-", parts.tm_mon + 1), ("-", parts.tm_mday), ("T", parts.tm_hour), (":", parts.tm_min), (":", parts.tm_sec)] {
                prefix.append(UInt8(ascii: separator.unicodeScalars.first!))
                prefix.appendDigits(Int(part), count: 2)
            }
            prefix.append(UInt8(ascii: "."))
            second = Second(seconds: seconds, prefix: prefix)
        }
        bytes.append(contentsOf: second.prefix)
        bytes.appendDigits(Int(milliseconds - seconds * 1000), count: 3)
        bytes.append(UInt8(ascii: "Z"))
    }
}

extension [UInt8] {
    /// `value` in decimal, `-` first when negative.
    mutating func appendDecimal(_ value: Int) {
        appendDigits(value.magnitude, count: 1, negative: value < 0)
    }

    /// `value` (not negative) in decimal with at least `count` digits, zeros first.
    mutating func appendDigits(_ value: Int, count: Int) {
        appendDigits(value.magnitude, count: count, negative: false)
    }

    /// The digits go in from the last: room for them first, then filled.
    private mutating func appendDigits(_ magnitude: UInt, count: Int, negative: Bool) {
        if negative { append(UInt8(ascii: "-")) }
        var width = 1
        var rest = magnitude / 10
        while rest > 0 { width += 1; rest /= 10 }
        width = Swift.max(width, count)
        let end = self.count + width
        append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width))
        var remaining = magnitude
        var index = end - 1
        while remaining > 0 {
            self[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        }
    }
}

extension Int64 {
    /// Division rounding toward negative infinity, so times before 1970 format correctly.
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
