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
        var host = Substring(value)
        var port: Substring = ""
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            port = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            guard Self.isAddress(String(host), family: AF_INET6), port.isEmpty || port.hasPrefix(":") else { return nil }
            isAddress = true
        } else {
            if let colon = host.firstIndex(of: ":") {
                port = host[colon...]
                host = host[..<colon]
            }
            guard host.utf8.allSatisfy(Self.isNameByte) else { return nil }
            // Only digits and dots can be an IPv4 address: names are not copied to ask.
            let isDotted = host.utf8.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }
            isAddress = isDotted && Self.isAddress(String(host), family: AF_INET)
        }
        guard port.utf8.dropFirst().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        if host.hasSuffix(".") { host = host.dropLast() }
        name = host.lowercased()
    }

    /// RFC 3986 `reg-name`: unreserved, percent-encoded and sub-delims characters.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "-._~%!$&'()*+,;=".utf8.contains(byte)
        }
    }

    private static func isAddress(_ text: String, family: Int32) -> Bool {
        var address = in6_addr()
        return inet_pton(family, text, &address) == 1
    }
}
