import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A bound, listening TCP socket. Made here rather than by libmicrohttpd so that a
/// port in use is reported as such, and so port 0 can be resolved to the real port.
/// Ownership of the descriptor passes to the daemon, which closes it on stop.
struct ListeningSocket {
    let descriptor: Int32
    let port: UInt16

    init(host: String, port requested: UInt16) throws(ServerError) {
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if var v4 = Self.ipv4(host, port: requested) {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: &v4) { source in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
            }
        } else if var v6 = Self.ipv6(host, port: requested) {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeBytes(of: &v6) { source in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
            }
        } else {
            throw .badHost(host)
        }

        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket(operation: "socket", code: errno) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        if bound != 0 {
            let code = errno
            close(fd)
            if code == EADDRINUSE { throw .addressInUse(host: host, port: requested) }
            throw .socket(operation: "bind", code: code)
        }
        guard listen(fd, 1024) == 0 else {
            let code = errno
            close(fd)
            throw .socket(operation: "listen", code: code)
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        let networkPort = withUnsafeBytes(of: &actual) { raw in
            family == AF_INET ? raw.load(as: sockaddr_in.self).sin_port : raw.load(as: sockaddr_in6.self).sin6_port
        }
        descriptor = fd
        port = UInt16(bigEndian: networkPort)
    }

    private static func ipv4(_ host: String, port: UInt16) -> sockaddr_in? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        let name = host == "localhost" ? "127.0.0.1" : host
        return inet_pton(AF_INET, name, &address.sin_addr) == 1 ? address : nil
    }

    private static func ipv6(_ host: String, port: UInt16) -> sockaddr_in6? {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = port.bigEndian
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return inet_pton(AF_INET6, name, &address.sin6_addr) == 1 ? address : nil
    }
}
