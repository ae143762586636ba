import Foundation
import LifecycleLog

/// The service's one way to write JSON, so every body looks the same.
///
/// Every JSON body ends with a newline, so that `curl` in a terminal, line-oriented tools
/// and logs see whole lines. A record's JSON has none of its own: a stream's `data:` line,
/// history and the store hold it as it is, and an answer made of it gets the newline from
/// ``terminated(_:)``.
public enum JSON {
    /// What every body ends with.
    public static let newline = UInt8(ascii: "\n")

    /// `body` ending with a newline: for bodies assembled from JSON encoded elsewhere.
    public static func terminated(_ body: [UInt8]) -> [UInt8] {
        body.last == newline ? body : body + [newline]
    }

    /// A time as ISO 8601 in UTC, rounded to the millisecond, as log lines write it
    /// (``Timestamp/iso8601(_:)``).
    public static func formatTime(_ date: Date) -> String { Timestamp.iso8601(date) }

    /// The value as a JSON body: its JSON (see ``StreamingJSONEncoder`` for the layout), then a newline.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = StreamingJSONEncoder()
        try encoder.encodeValue(value)
        encoder.buffer.byte(newline)
        return encoder.buffer.bytes
    }
}
