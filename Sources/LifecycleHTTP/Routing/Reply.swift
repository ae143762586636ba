import Foundation
import LifecycleLocks

/// A request handler: a plain function, testable without a socket.
public typealias Handler = @Sendable (Request) -> Response

/// A handler that answers later, from any thread, by calling `respond` exactly once.
/// The connection waits (suspended, holding no thread) until it does.
public typealias DeferredHandler = @Sendable (Request, _ respond: @escaping @Sendable (Response) -> Void) -> Void

/// What routing a request produced: a response now, or work that will respond later.
public enum Reply: Sendable {
    /// The response, made on the daemon thread.
    case now(Response)
    /// Work to start once the connection is suspended; it calls `respond` once, from any thread.
    case later(@Sendable (_ respond: @escaping @Sendable (Response) -> Void) -> Void)

    /// Waits for the response; for callers without a connection to suspend, such as tests.
    public func wait() -> Response {
        switch self {
        case .now(let response):
            return response
        case .later(let start):
            let done = DispatchSemaphore(value: 0)
            let answer = LaterAnswer()
            start { response in
                answer.response.withLock { $0 = response }
                done.signal()
            }
            done.wait()
            return answer.response.withLock { $0 }
        }
    }
}

/// Carries a later response to the thread that waits for it (a class: a `LockedValue` cannot be
/// captured by the escaping `respond`).
private final class LaterAnswer: Sendable {
    let response = LockedValue(Response(status: 500))
}

extension Reply {
    /// The same reply with `transform` applied to its response, whenever that comes.
    ///
    /// What the transform needs is passed as `context` rather than captured: a closure that
    /// captures nothing costs no allocation, so a response that is there at once (most are)
    /// costs each middleware a plain call, where a capturing closure would be allocated and
    /// freed on every request. (Inlinable, so that it is specialized for each context.)
    @inlinable
    public func map<Context: Sendable>(_ context: Context, _ transform: @escaping @Sendable (Context, Response) -> Response) -> Reply {
        switch self {
        case .now(let response):
            .now(transform(context, response))
        case .later(let start):
            .later { respond in start { respond(transform(context, $0)) } }
        }
    }
}
