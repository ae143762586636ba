/// Any encodable value, boxed so it can sit in a heterogeneous dictionary.
public struct JSONFragment: Sendable, Encodable {
    private let encodeValue: @Sendable (any Encoder) throws -> Void

    /// Boxes `value`, to be encoded where the fragment is.
    public init<T: Encodable & Sendable>(_ value: T) {
        encodeValue = { try value.encode(to: $0) }
    }

    /// Encodes the boxed value.
    public func encode(to encoder: any Encoder) throws { try encodeValue(encoder) }

    /// The boxed value's JSON; `null` for a value JSON cannot hold (a NaN), which none of the
    /// service's fragments is.
    var json: [UInt8] {
        let encoder = StreamingJSONEncoder()
        do {
            try encoder.encodeValue(self)
        } catch {
            return Array("null".utf8)
        }
        return encoder.buffer.bytes
    }
}
