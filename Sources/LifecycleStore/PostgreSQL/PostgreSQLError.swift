import Foundation

/// A failed libpq call: the server's SQLSTATE (when the server answered) and message.
public struct PostgreSQLError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE; `nil` when the failure lies in the connection itself.
    public let sqlState: String?
    public let message: String
    /// Whether the connection is gone (or never came up): nothing more can be done on it.
    public let isConnectionLost: Bool
    /// Whether the server did not answer by the ``Deadline``: the connection was given up (so it is lost too).
    public let isTimedOut: Bool

    public init(sqlState: String?, message: String, isConnectionLost: Bool, isTimedOut: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.isConnectionLost = isConnectionLost || isTimedOut
        self.isTimedOut = isTimedOut
    }

    /// Class 23: a unique, foreign key, not-null or check constraint refused the row.
    public var isConstraintViolation: Bool { sqlState?.hasPrefix("23") == true }

    /// 53100 disk_full.
    public var isDiskFull: Bool { sqlState == "53100" }

    /// Whether the statement's own data was refused (a constraint, a value out of range, malformed or too big).
    public var isSpecificToWrite: Bool {
        guard let sqlState else { return false }
        return isConstraintViolation || sqlState.hasPrefix("22") || sqlState == "54000"
    }

    /// XX001 data_corrupted, XX002 index_corrupted: damage that does not heal.
    public var isDamage: Bool { sqlState == "XX001" || sqlState == "XX002" }

    public var description: String { sqlState.map { "PostgreSQL error \($0): \(message)" } ?? "PostgreSQL: \(message)" }
}

/// When an operation on PostgreSQL must be over: every wait for the server in it ends by then.
struct Deadline {
    let instant: ContinuousClock.Instant
    /// The bound it was set with, for messages.
    let bound: Duration

    /// `bound` from now.
    init(_ bound: Duration) {
        self.bound = bound
        instant = .now + bound
    }

    /// The same instant as a `Date`, for waits that take one.
    var date: Date { Date(timeIntervalSinceNow: ContinuousClock.now.duration(to: instant) / .seconds(1)) }

    /// The failure of a wait that `instant` ended; `waiting` says for what.
    func passed(_ waiting: String = "") -> PostgreSQLError {
        PostgreSQLError(
            sqlState: nil, message: "no answer within \(Int64(bound / .milliseconds(1))) ms\(waiting.isEmpty ? "" : " \(waiting)")",
            isConnectionLost: true, isTimedOut: true
        )
    }

    /// Waits until `socket` is ready for `events` (POLLIN, POLLOUT), or throws once the deadline has passed.
    func wait(_ socket: Int32, for events: Int32) throws(PostgreSQLError) {
        guard socket >= 0 else { throw PostgreSQLError(sqlState: nil, message: "the connection has no socket", isConnectionLost: true) }
        while true {
            let left = ContinuousClock.now.duration(to: instant)
            guard left > .zero else { throw passed() }
            var descriptor = pollfd(fd: socket, events: Int16(events), revents: 0)
            let ready = poll(&descriptor, 1, Int32((left / .milliseconds(1)).rounded(.up)))
            if ready > 0 { return }
            if ready < 0, errno != EINTR {
                throw PostgreSQLError(sqlState: nil, message: "poll: \(String(cString: strerror(errno)))", isConnectionLost: true)
            }
        }
    }
}

extension PostgreSQLError: StoreFailure {
    func storeError(doing what: String) -> StoreError {
        if isConnectionLost { return StoreError("\(what): PostgreSQL is unreachable: \(message)", isUnreachable: true) }
        return StoreError(
            "\(what): \(message)\(sqlState.map { " (SQLSTATE \($0))" } ?? "")", isDiskFull: isDiskFull,
            isSpecificToWrite: isSpecificToWrite, isDamage: isDamage
        )
    }
}
