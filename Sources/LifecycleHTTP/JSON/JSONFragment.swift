/// Any encodable value, boxed so it can sit in a heterogeneous dictionary.
public struct JSONFragment: Sendable, Encodable {
    private let encodeValue: @Sendable (any Encoder) throws -> Void

    /// Boxes `value`, to be encoded where the fragment is.
    public init<T: Encodable & Sendable>(_ value: T) {
        encodeValue = { try value.encode(to: $0) }
    }

    /// Encodes the boxed value.
    public func encode(to encoder: any Encoder) throws { try encodeValue(encoder) }
}
