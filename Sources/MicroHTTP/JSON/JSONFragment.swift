/// Any encodable value, boxed so it can sit in a heterogeneous dictionary.
public struct JSONFragment: Sendable, Encodable {
    private let encodeValue: @Sendable (any Encoder) throws -> Void

    public init<T: Encodable & Sendable>(_ value: T) {
        encodeValue = { try value.encode(to: $0) }
    }

    public func encode(to encoder: any Encoder) throws { try encodeValue(encoder) }
}
