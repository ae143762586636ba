import CLifecycleMicroHTTPD
import Foundation
import LifecycleLocks
#if canImport(Glibc)
import Glibc
#endif

/// Every open connection of a server, for the limits in all and per client address, and
/// the request deadline.
final class ConnectionTable: Sendable {
    private struct Open {
        var contexts: [ObjectIdentifier: ConnectionContext] = [:]
        /// Open connections by client address (only addresses with some).
        var perClient: [String: Int] = [:]
    }

    private let open = LockedValue(Open())

    var count: Int { open.withLock { $0.contexts.count } }

    /// Connections open from `client`.
    func count(from client: String) -> Int { open.withLock { $0.perClient[client, default: 0] } }

    /// Whether a connection was added.
    enum Insertion {
        case inserted
        /// `limit` connections are open.
        case full
        /// `perClient` connections are open from its client address.
        case clientFull
    }

    /// Adds a connection unless `limit` are already open, or `perClient` from its address.
    func insert(_ context: ConnectionContext, limit: Int, perClient: Int) -> Insertion {
        open.withLock { open in
            guard open.contexts.count < limit else { return .full }
            guard open.perClient[context.clientAddress, default: 0] < perClient else { return .clientFull }
            open.contexts[ObjectIdentifier(context)] = context
            open.perClient[context.clientAddress, default: 0] += 1
            return .inserted
        }
    }

    func remove(_ context: ConnectionContext) {
        open.withLock { open in
            guard open.contexts.removeValue(forKey: ObjectIdentifier(context)) != nil else { return }
            let left = open.perClient[context.clientAddress, default: 1] - 1
            open.perClient[context.clientAddress] = left > 0 ? left : nil
        }
    }

    /// The connections open now, to act on outside the table's lock. A context stays valid
    /// after its connection closes; its machine then says so.
    var all: [ConnectionContext] {
        open.withLock { Array($0.contexts.values) }
    }

    /// The first connection of the calling thread that satisfies `predicate` (which may
    /// use libmicrohttpd on it, being on its thread).
    func first(ofThisThreadWhere predicate: (ConnectionContext) -> Bool) -> ConnectionContext? {
        let me = pthread_self()
        return open.withLock { open in
            open.contexts.values.first { pthread_equal($0.owner, me) != 0 && predicate($0) }
        }
    }

    /// Shuts down every open connection, so that its client can send nothing more and
    /// libmicrohttpd closes it; returns how many are open. Under the table's lock, as
    /// ``cutLateRequests(now:gate:)``.
    func shutDownAll() -> Int {
        open.withLock { open in
            for context in open.contexts.values { shutdown(context.descriptor, Int32(SHUT_RDWR)) }
            return open.contexts.count
        }
    }

    /// Shuts down every connection whose request is late (answering 408 when its headers
    /// were in); returns how many. Done under the table's lock, so no socket can be closed
    /// (and its number reused) by libmicrohttpd meanwhile.
    func cutLateRequests(now: UInt64, gate: RequestGate) -> Int {
        open.withLock { open in
            var cut = 0
            for context in open.contexts.values {
                switch context.machine.withLock({ $0.deadlinePassed(now: now) }) {
                case .none:
                    continue
                case .close:
                    shutdown(context.descriptor, Int32(SHUT_RDWR))
                case .answerAndClose(let response):
                    context.answerAndShutDown(response)
                    gate.release()
                }
                cut += 1
            }
            return cut
        }
    }
}
