import Foundation
import LifecycleLog
import LifecycleLocks

/// A connection made again when lost, with a backoff (100 ms doubling to 2 s) in which asking fails at once.
struct Link {
    let url: String
    /// Which connection this is, in reports: `write`, `read` or `listen`.
    let role: String
    private let report: @Sendable (ServiceEvent) -> Void
    private var current: Connection?
    private var retryAt: ContinuousClock.Instant?
    private var delay = Self.firstDelay
    /// Why the connection is down, while it is.
    private var outage: String?
    static let firstDelay: Duration = .milliseconds(100)
    static let longestDelay: Duration = .seconds(2)

    init(url: String, role: String, report: @escaping @Sendable (ServiceEvent) -> Void) {
        self.url = url
        self.role = role
        self.report = report
    }

    /// The connection for an operation that must be over by `deadline`, made now if the backoff allows.
    mutating func connection(by deadline: Deadline) throws(PostgreSQLError) -> Connection {
        if let current, !current.isLost {
            current.deadline = deadline
            return current
        }
        if current != nil { lost("the connection is closed") }
        let now = ContinuousClock.now
        if let retryAt, now < retryAt {
            let wait = Int((retryAt - now) / .milliseconds(1))
            throw .lost("\(outage ?? "") (next attempt in \(wait) ms)")
        }
        do {
            let made = try Connection(url: url, deadline: deadline)
            current = made
            retryAt = nil
            delay = Self.firstDelay
            if outage != nil {
                report(ServiceEvent(.info, "PostgreSQL connection restored", ["connection": role]))
                outage = nil
            }
            return made
        } catch {
            if outage == nil { report(ServiceEvent(.warning, "PostgreSQL unreachable", ["connection": role, "error": error.message])) }
            outage = error.message
            retryAt = now + delay
            delay = min(delay * 2, Self.longestDelay)
            throw error
        }
    }

    /// Runs `body` on the connection by `deadline`. A connection found lost is made again once, at once: what failed on it
    /// (a read, a BEGIN) changed nothing, so the first operation after an outage succeeds rather than the second.
    mutating func retryingOnce<T>(by deadline: Deadline, _ body: (Connection) throws(PostgreSQLError) -> T) throws(PostgreSQLError) -> T {
        var retried = false
        while true {
            let connection = try connection(by: deadline)
            do throws(PostgreSQLError) {
                return try body(connection)
            } catch {
                dropIfLost(error)
                guard error.isConnectionLost, !error.isTimedOut, !retried else { throw error }
                retried = true
            }
        }
    }

    /// Rolls back the open transaction, or closes the connection, which rolls back on the server too.
    mutating func rollBack() {
        do {
            try current?.execute("ROLLBACK")
        } catch {
            current = nil
        }
    }

    /// Forgets the connection if `error` says it is gone.
    mutating func dropIfLost(_ error: PostgreSQLError) {
        if error.isConnectionLost || current?.isLost == true { lost(error.message) }
    }

    private mutating func lost(_ why: String) {
        if current != nil, outage == nil { report(ServiceEvent(.warning, "PostgreSQL connection lost", ["connection": role, "error": why])) }
        current = nil
        outage = outage ?? why
    }

    mutating func disconnect() {
        current = nil
    }
}

/// `LISTEN` on a connection and thread of its own: `wake` after each notification and (re)connection.
final class CommitListener: Sendable {
    private let stopped = LockedValue<Bool>(false)

    /// `timeout`: the bound on connecting and on `LISTEN`.
    init(url: String, timeout: Duration, report: @escaping @Sendable (ServiceEvent) -> Void, wake: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [self] in
            run(url: url, timeout: timeout, report: report, wake: wake)
        }
    }

    /// Ends the thread within a tenth of a second or so.
    func stop() {
        stopped.withLock { $0 = true }
    }

    private var isStopped: Bool { stopped.withLock { $0 } }
    /// How long one wait on the socket lasts at most, in milliseconds, so that ``stop()`` takes effect soon.
    private static let slice: Int32 = 100

    private func run(url: String, timeout: Duration, report: @escaping @Sendable (ServiceEvent) -> Void, wake: () -> Void) {
        var link = Link(url: url, role: "listen", report: report)
        while !isStopped {
            let connection: Connection
            do {
                connection = try link.connection(by: Deadline(timeout))
                try connection.execute("LISTEN \(PostgresStore.channel)")
            } catch {
                link.dropIfLost(error)
                Thread.sleep(forTimeInterval: Double(Self.slice) / 1000)
                continue
            }
            // Whatever was notified while there was no connection is lost.
            wake()
            while !isStopped {
                var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, Self.slice)
                do throws(PostgreSQLError) {
                    if ready < 0 && errno != EINTR {
                        throw .lost("poll: \(String(cString: strerror(errno)))")
                    }
                    if ready > 0, try connection.takeNotifications() > 0 { wake() }
                } catch {
                    link.dropIfLost(error)
                    break
                }
            }
        }
    }
}
