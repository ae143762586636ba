import Foundation
import LifecycleLog

/// JSON bytes being written: the one place strings are escaped, numbers spelled and
/// times formatted, for the streaming encoder and for hand-written hot paths alike.
public struct JSONBuffer: Sendable {
    /// What has been written so far.
    public var bytes: [UInt8] = []

    /// Reserves `capacity` bytes, so a typical body is written without growing.
    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// `text` as it is: for punctuation and literals known to be valid JSON.
    public mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// One byte as it is.
    public mutating func byte(_ byte: UInt8) { bytes.append(byte) }

    /// A quoted, escaped string.
    public mutating func string(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var start = 0
            for (index, byte) in utf8.enumerated() where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                escape(byte)
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): raw("\\\"")
        case UInt8(ascii: "\\"): raw("\\\\")
        case 0x0A: raw("\\n")
        case 0x0D: raw("\\r")
        case 0x09: raw("\\t")
        default:
            let hex = Array("0123456789abcdef".utf8)
            raw("\\u00")
            bytes.append(hex[Int(byte >> 4)])
            bytes.append(hex[Int(byte & 0xF)])
        }
    }

    /// `"name":`
    public mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// An integer in decimal.
    public mutating func integer<I: BinaryInteger>(_ value: I) {
        if let value = Int64(exactly: value) { integer(value) } else { bytes.append(contentsOf: String(value).utf8) }
    }

    /// An integer, its digits written in place: `String(value)` through the generic
    /// `BinaryInteger` costs a number about 800 instructions and a string. The digits are
    /// made last first on the stack and appended once: appended one by one and reversed in
    /// the array, they cost as much again (a capacity check a digit, a slice to reverse).
    public mutating func integer(_ value: Int64) {
        // Int64.min is 19 digits and a sign.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                digits[start] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// An integer, written as an `Int64` is.
    public mutating func integer(_ value: Int) { integer(Int64(value)) }

    /// `true` or `false`.
    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// A finite number; whole numbers are written without a fraction.
    public mutating func number(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "JSON has no \(value)"))
        }
        if value == value.rounded(), abs(value) < 1e15 {
            integer(Int64(value))
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    /// A decimal with all its digits (a conversion to `Double` would round them).
    public mutating func decimal(_ value: Decimal) throws {
        guard !value.isNaN else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "JSON has no NaN"))
        }
        bytes.append(contentsOf: value.description.utf8)
    }

    /// A time as a string: ISO 8601 in UTC, rounded to the millisecond.
    public mutating func time(_ date: Date) {
        // The time's characters need no escaping.
        byte(UInt8(ascii: "\""))
        bytes += Timestamp.iso8601Bytes(date)
        byte(UInt8(ascii: "\""))
    }
}
