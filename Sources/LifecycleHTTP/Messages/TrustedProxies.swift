import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The reverse proxies whose `X-Forwarded-For` the server believes, as addresses or ranges
/// (`10.0.0.5`, `10.0.0.0/8`, `::1`, `fd00::/8`).
///
/// Behind a proxy every connection comes from the proxy's address. For a request from a
/// trusted proxy, the client is the last address of `X-Forwarded-For` (all its fields, in
/// order) that is not itself a trusted proxy: the one the outermost trusted proxy saw, which
/// a client cannot forge, since each proxy appends the address it was connected from. Addresses
/// a client wrote further left are not believed. If that hop is not an address, the last
/// trusted hop is the client; if every hop is trusted, the first is. From any other peer
/// `X-Forwarded-For` is ignored.
public struct TrustedProxies: Sendable, Equatable {
    /// An address range: its network's bytes (4 for IPv4, 16 for IPv6) and prefix length.
    private struct Range: Sendable, Equatable {
        var bytes: [UInt8]
        var prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            for index in 0..<bytes.count {
                let bits = min(8, max(0, prefix - index * 8))
                let mask = bits == 0 ? UInt8(0) : UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if address[index] & mask != bytes[index] & mask { return false }
            }
            return true
        }
    }

    private var ranges: [Range] = []

    /// None: `X-Forwarded-For` is ignored.
    public init() {}

    /// The proxies `entries` name, each an address or `address/prefix`; `nil` if any is neither.
    public init?(_ entries: [String]) {
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.bytes(String(parts[0])) else { return nil }
            var prefix = bytes.count * 8
            if parts.count == 2 {
                guard let given = Int(parts[1]), parts[1].allSatisfy(\.isNumber), (0...prefix).contains(given) else { return nil }
                prefix = given
            }
            ranges.append(Range(bytes: bytes, prefix: prefix))
        }
    }

    /// Whether no proxy is trusted: every request's client is its peer.
    public var isEmpty: Bool { ranges.isEmpty }

    /// Whether `address` (as ``Request/clientAddress`` spells it) is a trusted proxy's.
    public func contains(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = Self.bytes(address) else { return false }
        return contains(bytes)
    }

    private func contains(_ bytes: [UInt8]) -> Bool {
        ranges.contains { $0.contains(bytes) }
    }

    /// The client a request from `peer` is for, given its `X-Forwarded-For` fields in order.
    public func client(peer: String, forwardedFor fields: [String]) -> String {
        guard contains(peer) else { return peer }
        var client = peer
        for hop in fields.flatMap({ $0.split(separator: ",") }).reversed() {
            guard let bytes = Self.bytes(hop.trimmingCharacters(in: .whitespaces)) else { break }
            client = Self.text(bytes)
            if !contains(bytes) { break }
        }
        return client
    }

    /// An IPv4 or IPv6 address's bytes; an IPv4-mapped IPv6 address as IPv4.
    private static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        let isMapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
        return isMapped ? Array(bytes[12...]) : bytes
    }

    /// The address as ``Request/clientAddress`` spells a peer's.
    private static func text(_ bytes: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        _ = bytes.withUnsafeBytes { inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, $0.baseAddress, &text, socklen_t(text.count)) }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
