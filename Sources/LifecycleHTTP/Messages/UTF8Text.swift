extension String {
    /// `bytes` as a string if they are valid UTF-8, else `nil`: how request text (JSON strings,
    /// query parameters) becomes a `String`.
    ///
    /// ASCII, nearly all of it, takes `String(decoding:as:)`, which is specialized for UTF-8;
    /// the standard library's `String(validating:as:)` is generic over the encoding and looks
    /// its type metadata up on every call (perf: 18% of a thread parsing a 1,000-item batch).
    /// For ASCII the two give the same string, as there is nothing to repair.
    init?(validUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        if bytes.allSatisfy({ $0 < 0x80 }) {
            self = String(decoding: bytes, as: UTF8.self)
        } else if let text = String(validating: bytes, as: UTF8.self) {
            self = text
        } else {
            return nil
        }
    }

    /// ASCII `bytes` with their capitals lowercased, in one pass: a header's name, a host. The
    /// caller has checked that every byte is ASCII, so the string is valid UTF-8.
    init(lowercasingASCII bytes: some Collection<UInt8>) {
        self.init(unsafeUninitializedCapacity: bytes.count) { buffer in
            var offset = 0
            for byte in bytes {
                buffer[offset] = byte.isASCIICapital ? byte + 32 : byte
                offset += 1
            }
            return offset
        }
    }
}

extension Substring {
    /// The text without the spaces and tabs around it (HTTP's optional whitespace, RFC 9110
    /// §5.6.3), found by its bytes: a `Character` is a grapheme cluster, worked out each time
    /// one is read, and Foundation's trimming bridges through `NSString`.
    var trimmingOWS: Substring {
        let isText = { (byte: UInt8) in byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t") }
        guard let start = utf8.firstIndex(where: isText), let end = utf8.lastIndex(where: isText) else { return self[endIndex...] }
        return Substring(utf8[start...end])
    }
}

extension UInt8 {
    /// `A` to `Z`: what an ASCII name lowercases.
    var isASCIICapital: Bool { self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z") }
}
