#if canImport(Glibc)
import Glibc
#endif

/// A client's address as text.
enum ClientAddress {
    /// `127.0.0.1`, `::1`; an IPv4 client of an IPv6 socket (`::ffff:a.b.c.d`) as IPv4.
    static func describe(_ address: UnsafePointer<sockaddr>?) -> String {
        guard let address else { return "" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            inet_ntop(AF_INET, &v4, &text, socklen_t(text.count))
        case AF_INET6:
            var v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            let isMapped = withUnsafeBytes(of: &v6) { bytes in bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF }
            if isMapped {
                var v4 = withUnsafeBytes(of: &v6) { bytes in in_addr(s_addr: bytes.load(fromByteOffset: 12, as: UInt32.self)) }
                inet_ntop(AF_INET, &v4, &text, socklen_t(text.count))
            } else {
                inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count))
            }
        default:
            return ""
        }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
