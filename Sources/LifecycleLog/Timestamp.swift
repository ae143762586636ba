import Foundation

/// The service's one way to write a time: in log lines and in JSON bodies alike, so that a
/// time read in one can be searched for in the other.
public enum Timestamp {
    /// `date` as ISO 8601 in UTC, rounded to the millisecond: `2026-11-30T00:06:49.637Z`.
    /// (Foundation's ISO 8601 style truncates, which shows 0.123 stored as 0.12299… as .122.)
    public static func iso8601(_ date: Date) -> String {
        String(decoding: iso8601Bytes(date), as: UTF8.self)
    }

    /// ``iso8601(_:)``'s UTF-8, for a body written as bytes: no String made and read again.
    public static func iso8601Bytes(_ date: Date) -> [UInt8] {
        LogLine.written { write(milliseconds(date), into: &$0) }
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

    /// Writes the time `milliseconds` after 1970 as ``iso8601(_:)`` does. The calendar is
    /// reckoned here (days to civil dates, as in H. Hinnant's `civil_from_days`) rather than
    /// by `gmtime_r`, which takes glibc's time-zone lock on every call: this runs for every
    /// log line, on every thread that logs.
    static func write(_ milliseconds: Int64, into line: inout LogLine) {
        let seconds = milliseconds.floorDivided(by: 1000)
        let days = seconds.floorDivided(by: 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        // Days since 0000-03-01, in eras of 400 years (146,097 days).
        let shifted = days + 719_468
        let era = shifted.floorDivided(by: 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let millisecond = Int(milliseconds - seconds * 1000)
        guard (0...9999).contains(year) else {
            return writeLong(year: Int(year), month: Int(month), day: Int(day), secondOfDay: secondOfDay, millisecond: millisecond, into: &line)
        }
        // Every field of a four-digit year has a fixed width: stored in place, two digits a store.
        line.append(width: 24) { p in
            func two(_ value: Int, at offset: Int) {
                p[offset] = UInt8(truncatingIfNeeded: 48 + value / 10)
                p[offset + 1] = UInt8(truncatingIfNeeded: 48 + value % 10)
            }
            two(Int(year) / 100, at: 0)
            two(Int(year) % 100, at: 2)
            p[4] = UInt8(ascii: "-")
            two(Int(month), at: 5)
            p[7] = UInt8(ascii: "-")
            two(Int(day), at: 8)
            p[10] = UInt8(ascii: "T")
            two(secondOfDay / 3600, at: 11)
            p[13] = UInt8(ascii: ":")
            two(secondOfDay / 60 % 60, at: 14)
            p[16] = UInt8(ascii: ":")
            two(secondOfDay % 60, at: 17)
            p[19] = UInt8(ascii: ".")
            p[20] = UInt8(truncatingIfNeeded: 48 + millisecond / 100)
            two(millisecond % 100, at: 21)
            p[23] = UInt8(ascii: "Z")
        }
    }

    /// The same for a year of other than four digits (before year 0 or after 9999).
    private static func writeLong(year: Int, month: Int, day: Int, secondOfDay: Int, millisecond: Int, into line: inout LogLine) {
        line.append(decimal: year)
        line.append(byte: UInt8(ascii: "-"))
        line.append(digits: UInt(month), width: 2)
        line.append(byte: UInt8(ascii: "-"))
        line.append(digits: UInt(day), width: 2)
        line.append(byte: UInt8(ascii: "T"))
        line.append(digits: UInt(secondOfDay / 3600), width: 2)
        line.append(byte: UInt8(ascii: ":"))
        line.append(digits: UInt(secondOfDay / 60 % 60), width: 2)
        line.append(byte: UInt8(ascii: ":"))
        line.append(digits: UInt(secondOfDay % 60), width: 2)
        line.append(byte: UInt8(ascii: "."))
        line.append(digits: UInt(millisecond), width: 3)
        line.append(byte: UInt8(ascii: "Z"))
    }
}

extension Int64 {
    /// Division rounding toward negative infinity, so times before 1970 format correctly.
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
