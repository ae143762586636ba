import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `lifecycled healthcheck`: asks a running service for `GET /healthz` over a plain socket,
/// so that a container's `HEALTHCHECK` needs nothing the image lacks (no curl, no shell).
public struct HealthCheck: Sendable {
    /// The address asked: where the service listens, or loopback when it listens on every address.
    public var host: String
    public var port: UInt16
    /// Bound on the whole exchange, connecting included: a hung service is unhealthy, not waited on.
    public var timeout: Duration

    /// Why the service was found unhealthy, in one line.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Probes the service that `configuration` describes (the same flags and variables it starts with).
    public init(configuration: Configuration, timeout: Duration = .seconds(3)) {
        let listening = configuration.host
        let bare = listening.hasPrefix("[") && listening.hasSuffix("]") ? String(listening.dropFirst().dropLast()) : listening
        switch bare {
        case "0.0.0.0": host = "127.0.0.1"
        case "::": host = "::1"
        default: host = bare
        }
        port = configuration.port
        self.timeout = timeout
    }

    private var target: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Asks once. Returns a line saying so when the answer is 200; throws the reason otherwise.
    public func run() throws(Failure) -> String {
        let deadline = ContinuousClock.now + timeout
        let socket = try Socket(connectingTo: host, port: port, within: timeout, describing: target)
        let request = "GET /healthz HTTP/1.1\r\nHost: \(target)\r\nUser-Agent: lifecycled-healthcheck\r\nConnection: close\r\n\r\n"
        try socket.send(Array(request.utf8))
        let answer = try socket.receiveAll(until: deadline, limit: 16 * 1024)
        let text = String(decoding: answer, as: UTF8.self)
        guard let statusLine = text.split(separator: "\r\n", maxSplits: 1, omittingEmptySubsequences: false).first,
              statusLine.hasPrefix("HTTP/1."), statusLine.split(separator: " ").count >= 2
        else {
            throw Failure(description: "\(target) did not answer GET /healthz with HTTP (\(answer.count) bytes)")
        }
        let status = statusLine.split(separator: " ")[1]
        guard status == "200" else {
            // The body (a problem+json naming the cause) on the same line, for `docker inspect`.
            let body = text.range(of: "\r\n\r\n").map { text[$0.upperBound...] } ?? ""
            let reason = body.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(300)
            throw Failure(description: "GET http://\(target)/healthz answered \(status)\(reason.isEmpty ? "" : ": \(reason)")")
        }
        return "GET http://\(target)/healthz answered 200"
    }

    /// A connected TCP socket, closed when dropped. Every call fails with a thrown `Failure`
    /// that names the operation and the system's reason.
    private final class Socket {
        private let descriptor: Int32
        private let target: String

        init(connectingTo host: String, port: UInt16, within timeout: Duration, describing target: String) throws(Failure) {
            self.target = target
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_NUMERICSERV
            var found: UnsafeMutablePointer<addrinfo>?
            let resolved = getaddrinfo(host, String(port), &hints, &found)
            guard resolved == 0, let address = found else {
                throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
            }
            defer { freeaddrinfo(found) }
            descriptor = Glibc.socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw Self.failure("open a socket for", target: target) }
            // On Linux the send timeout also bounds connect(2), which then fails with EINPROGRESS.
            var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            guard connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
                throw Self.failure("connect to", target: target)
            }
        }

        deinit { close(descriptor) }

        func send(_ bytes: [UInt8]) throws(Failure) {
            var sent = 0
            while sent < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Self.failure("send to", target: target) }
                sent += n
            }
        }

        /// Everything the peer sends until it closes (it was asked to), at most `limit` bytes.
        func receiveAll(until deadline: ContinuousClock.Instant, limit: Int) throws(Failure) -> [UInt8] {
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while received.count < limit {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { throw Failure(description: "\(target) did not answer GET /healthz in time") }
                var wait = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(&wait, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                guard ready >= 0 else { throw Self.failure("wait for", target: target) }
                if ready == 0 { continue }
                let n = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
                guard n >= 0 else { throw Self.failure("receive from", target: target) }
                if n == 0 { break }
                received += chunk[..<n]
            }
            return received
        }

        private static func failure(_ operation: String, target: String) -> Failure {
            let code = errno
            let reason = code == EINPROGRESS || code == EAGAIN ? "timed out" : String(cString: strerror(code))
            return Failure(description: "cannot \(operation) \(target): \(reason)")
        }
    }
}
