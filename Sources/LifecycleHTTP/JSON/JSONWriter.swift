import Foundation

/// Encodes `Encodable` values straight to JSON bytes, with no intermediate tree.
///
/// Members come out in the order `encode(to:)` writes them; dictionaries with string
/// keys are sorted, so equal values give equal bytes. Dates are ISO 8601 in UTC with
/// milliseconds. Encoding code is expected to write one member after another, as
/// synthesized and hand-written conformances do.
final class StreamingJSONEncoder: Encoder {
    var buffer = JSONBuffer(capacity: 512)
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    /// Containers still open, innermost last.
    fileprivate var frames: [(isObject: Bool, count: Int)] = []
    /// Index of the first frame belonging to the value being encoded now.
    fileprivate var valueBase = 0

    fileprivate func close(downTo level: Int) {
        while frames.count > level {
            buffer.byte(frames.removeLast().isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"))
        }
    }

    /// Opens (or, for a value asking twice, reuses) the container of the current value.
    private func open(isObject: Bool) -> Int {
        if frames.count > valueBase, frames[valueBase].isObject == isObject {
            close(downTo: valueBase + 1)
            return valueBase
        }
        return openNested(isObject: isObject)
    }

    /// Starts a new object or array where the writing stands; returns its level.
    fileprivate func openNested(isObject: Bool) -> Int {
        buffer.byte(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
        frames.append((isObject, 0))
        return frames.count - 1
    }

    /// Writes the separator before a member or element of the container at `level`.
    fileprivate func beginItem(at level: Int) {
        close(downTo: level + 1)
        if frames[level].count > 0 { buffer.byte(UInt8(ascii: ",")) }
        frames[level].count += 1
    }

    /// Writes one value where the current container expects it.
    func encodeValue<T: Encodable>(_ value: T) throws {
        switch value {
        case let string as String: buffer.string(string)
        case let bool as Bool: buffer.bool(bool)
        case let integer as Int: buffer.integer(integer)
        case let integer as Int64: buffer.integer(integer)
        case let double as Double: try buffer.number(double)
        case let date as Date: buffer.time(date)
        case let sorted as any SortedJSONObject: try sorted.encodeSorted(into: self)
        // The other standard numbers. They must be caught here: their `encode(to:)` asks a
        // single-value container to encode themselves, which lands back in this function.
        case let integer as any BinaryInteger: buffer.integer(integer)
        case let float as Float: try buffer.number(Double(float))
        #if !(os(macOS) && arch(x86_64))
        case let half as Float16: try buffer.number(Double(half))
        #endif
        case let decimal as Decimal: try buffer.decimal(decimal)
        default:
            let savedBase = valueBase
            let level = frames.count
            valueBase = level
            let start = buffer.bytes.count
            try value.encode(to: self)
            close(downTo: level)
            if buffer.bytes.count == start { buffer.raw("{}") }
            valueBase = savedBase
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, level: open(isObject: true)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: self, level: open(isObject: false))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleContainer(encoder: self)
    }
}

/// Dictionaries keyed by strings encode with sorted keys, for stable bytes.
protocol SortedJSONObject {
    func encodeSorted(into encoder: StreamingJSONEncoder) throws
}

extension Dictionary: SortedJSONObject where Key == String, Value: Encodable {
    func encodeSorted(into encoder: StreamingJSONEncoder) throws {
        encoder.buffer.byte(UInt8(ascii: "{"))
        for (offset, key) in keys.sorted().enumerated() {
            if offset > 0 { encoder.buffer.byte(UInt8(ascii: ",")) }
            encoder.buffer.key(key)
            try encoder.encodeValue(self[key]!)
        }
        encoder.buffer.byte(UInt8(ascii: "}"))
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: StreamingJSONEncoder
    let level: Int
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func member(_ key: Key) {
        encoder.beginItem(at: level)
        encoder.buffer.key(key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws {
        member(key)
        encoder.buffer.raw("null")
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        member(key)
        try encoder.encodeValue(value)
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        member(key)
        encoder.buffer.bool(value)
    }

    mutating func encode(_ value: String, forKey key: Key) throws { member(key); encoder.buffer.string(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { member(key); try encoder.buffer.number(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { member(key); try encoder.buffer.number(Double(value)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }

    private func integer<I: BinaryInteger>(_ value: I, _ key: Key) throws {
        member(key)
        encoder.buffer.integer(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        member(key)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, level: encoder.openNested(isObject: true)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        member(key)
        return UnkeyedContainer(encoder: encoder, level: encoder.openNested(isObject: false))
    }

    mutating func superEncoder() -> any Encoder {
        member(Key(stringValue: "super")!)
        encoder.valueBase = encoder.frames.count
        return encoder
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        member(key)
        encoder.valueBase = encoder.frames.count
        return encoder
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: StreamingJSONEncoder
    let level: Int
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { encoder.frames.count > level ? encoder.frames[level].count : 0 }

    mutating func encodeNil() throws {
        encoder.beginItem(at: level)
        encoder.buffer.raw("null")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.beginItem(at: level)
        try encoder.encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        encoder.beginItem(at: level)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, level: encoder.openNested(isObject: true)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        encoder.beginItem(at: level)
        return UnkeyedContainer(encoder: encoder, level: encoder.openNested(isObject: false))
    }

    mutating func superEncoder() -> any Encoder {
        encoder.beginItem(at: level)
        encoder.valueBase = encoder.frames.count
        return encoder
    }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let encoder: StreamingJSONEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.buffer.raw("null") }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.encodeValue(value) }
}
