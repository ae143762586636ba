#if canImport(Glibc)
import Glibc
#endif

/// What a `Host` header names (RFC 9110 §7.2: `uri-host [ ":" port ]`), parsed: the name a
/// client called the server by.
public struct HostName: Sendable, Equatable {
    /// The host, lowercased, without a trailing dot; an IPv6 address without its brackets.
    /// Empty when the request names none (an empty `Host`, as RFC 9112 §3.2 allows).
    public var name: String
    /// Whether ``name`` is an IPv4 or IPv6 address rather than a name to resolve.
    public var isAddress: Bool

    /// `nil` when `value` is not `host[:port]`: a `[` that is not an IPv6 address, a byte
    /// a host name may not hold (RFC 3986 `reg-name`), or a port that is not digits.
    public init?(_ value: String) {
        // On the bytes, not Characters or Substrings: this runs on every request, twice.
        var value = value
        guard let host = value.withUTF8(Self.parse) else { return nil }
        self = host
    }

    private init(name: String, isAddress: Bool) {
        self.name = name
        self.isAddress = isAddress
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> HostName? {
        var start = 0
        var end = bytes.count
        // Where the port begins (its `:`), or the end.
        var port = bytes.count
        let isAddress: Bool
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            start = 1
            end = close
            port = close + 1
            guard port == bytes.count || bytes[port] == UInt8(ascii: ":"), Self.isAddress(bytes[start..<end], family: AF_INET6) else { return nil }
            isAddress = true
        } else {
            if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
                end = colon
                port = colon
            }
            let host = bytes[start..<end]
            guard host.allSatisfy(isNameByte) else { return nil }
            // Only digits and dots can be an IPv4 address: names are not copied to ask.
            let isDotted = host.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }
            isAddress = isDotted && Self.isAddress(host, family: AF_INET)
        }
        guard bytes[Swift.min(port + 1, bytes.count)...].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        if end > start, bytes[end - 1] == UInt8(ascii: ".") { end -= 1 }
        // The bytes are ASCII here (a reg-name, or an address inet_pton took).
        return HostName(name: String(lowercasingASCII: bytes[start..<end]), isAddress: isAddress)
    }

    /// RFC 3986 `reg-name`: unreserved, percent-encoded and sub-delims characters.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "-._~%!$&'()*+,;=".utf8.contains(byte)
        }
    }

    private static func isAddress(_ text: Slice<UnsafeBufferPointer<UInt8>>, family: Int32) -> Bool {
        var address = in6_addr()
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: text.count + 1) { copy in
            for (offset, byte) in text.enumerated() { copy[offset] = CChar(bitPattern: byte) }
            copy[text.count] = 0
            return inet_pton(family, copy.baseAddress!, &address) == 1
        }
    }
}
