import Foundation
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// Polls `condition` until it holds or `seconds` pass: the tests' one way to wait for
/// something another thread or process does.
public func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while Date() < deadline
    return false
}

/// A folder under /tmp, removed when the value is dropped.
public final class TemporaryDirectory {
    public let path: String

    public init(_ label: String = "lifecycled-test") {
        path = NSTemporaryDirectory() + "\(label)-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A TCP listener on a free port of 127.0.0.1 (close-on-exec), closed when dropped, whose
/// connections the kernel accepts into its backlog and nobody reads unless the test does (a
/// server that never answers, or one the test scripts).
public final class LoopbackListener {
    public let fd: Int32
    public let port: UInt16

    public init() throws {
        let fd = boundSocket(inet_addr("127.0.0.1"), port: 0)
        self.fd = fd
        // deinit closes it (it runs when an initializer throws after setting every property).
        guard fd >= 0, listen(fd, 8) == 0 else {
            port = 0
            throw HTTPClientError(description: "socket, bind or listen failed: \(String(cString: strerror(errno)))")
        }
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { if fd >= 0 { close(fd) } }
}

/// A close-on-exec TCP socket bound to `address` (network order) and `port` (0: any free one),
/// or -1 with `errno` set.
private func boundSocket(_ address: in_addr_t, port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var socketAddress = sockaddr_in()
    socketAddress.sin_family = sa_family_t(AF_INET)
    socketAddress.sin_addr.s_addr = address
    socketAddress.sin_port = port.bigEndian
    let bound = withUnsafePointer(to: &socketAddress) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else {
        let failure = errno
        close(fd)
        errno = failure
        return -1
    }
    return fd
}

/// A port no socket on any address holds, for a server process the test starts itself.
///
/// Taken from below the kernel's ephemeral range (32768–60999), not by binding port 0: a port
/// from that range can be handed to some test's outgoing connection as its source port between
/// this call and the server's bind, and the server then fails with "address already in use".
/// Ports are tried in turn from a per-process starting point (spread by the pid, so that test
/// processes started one after the other do not walk the same ports), so tests running in
/// parallel in this process never get the same one, and each is checked free on every address.
public func freePort() -> UInt16 {
    for _ in 0..<portSpan {
        let candidate = nextPort.withLock { next -> UInt16 in
            defer { next = next + 1 == portBase + portSpan ? portBase : next + 1 }
            return next
        }
        if isFree(candidate) { return candidate }
    }
    preconditionFailure("no free port in \(portBase)..<\(portBase + portSpan)")
}

private let portBase: UInt16 = 20_000
private let portSpan: UInt16 = 12_000
private let nextPort = LockedValue(portBase + UInt16((Int(getpid()) &* 7919) % Int(portSpan)))

private func isFree(_ port: UInt16) -> Bool {
    let fd = boundSocket(INADDR_ANY, port: port)
    guard fd >= 0 else { return false }
    close(fd)
    return true
}

/// Collects what a pipe carries, read as it arrives so the writer never blocks on a full pipe.
public final class PipeCollector: Sendable {
    /// The end the child writes to (its stdout or stderr).
    public let writeEnd: FileHandle
    private let data = LockedValue(Data())
    private let done = DispatchSemaphore(value: 0)

    public init() {
        // Both ends close-on-exec from the start (a socket pair made with SOCK_CLOEXEC, not a
        // pipe marked afterwards): otherwise a child spawned meanwhile by a test running in
        // parallel inherits the write end, and end-of-file never comes while that child lives.
        var fds: [Int32] = [-1, -1]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0, "socketpair failed")
        writeEnd = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
        let readEnd = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true)
        Thread.detachNewThread { [self] in
            while true {
                let chunk = readEnd.availableData
                if chunk.isEmpty { break }
                data.withLock { $0.append(chunk) }
            }
            done.signal()
        }
    }

    /// What has arrived so far.
    public var received: String { data.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Everything written, once every writer has closed the pipe.
    public func finish() -> String {
        done.wait()
        return received
    }
}

/// Runs `body`, a blocking call (`accept`, `recv`, a process's exit), on a thread of its own
/// and awaits its result: an async test that blocks a thread of Swift's cooperative pool (one
/// per core) starves every task of the suite, the code under test's among them.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}
