import Foundation
import LifecycleHTTP
import LifecycleLocks

/// How fast each client may send requests: `rate` per second on average, `burst` at once.
struct RateLimitPolicy: Sendable, Equatable {
    var rate: Double
    var burst: Int
    /// Loopback clients are not limited (the default, when no rate was asked for).
    var exemptsLoopback: Bool
}

/// Refuses a client's request with 429 and `Retry-After` once it has spent its budget, before
/// the body is read. One token bucket per client address.
struct RateLimit: Middleware {
    let limiter: RateLimiter

    func admit(_ head: Request) -> Response? {
        guard case .refused(let retryAfter) = limiter.take(for: head.clientAddress) else { return nil }
        let policy = limiter.policy
        let rate = policy.rate.rounded() == policy.rate && policy.rate < 1e15 ? String(Int(policy.rate)) : String(policy.rate)
        return .problem(
            Problem(
                status: 429, title: "Too Many Requests",
                detail: "more than \(rate) requests per second (bursts of \(policy.burst)) from one client address (--rate-limit, --rate-burst); retry in \(retryAfter) s"
            ),
            headers: [("Retry-After", String(retryAfter))]
        )
    }
}

/// The token buckets of every client seen lately, behind one lock.
///
/// Memory is bounded: at ``capacity`` clients, the buckets that have refilled (whose clients
/// have been idle long enough that a new bucket would be the same) are dropped. If that frees
/// less than a quarter of the table, every client active within the last refill time is
/// there at once, more than per-address limits can tell apart; the table is then emptied,
/// which gives each a fresh burst but keeps the work per request constant on average.
final class RateLimiter: Sendable {
    enum Decision: Equatable {
        case admitted
        /// Whole seconds until a request would be admitted again, 1 to ``maxRetryAfter``.
        case refused(retryAfter: Int)
    }

    /// The longest `Retry-After` sent, a day: what any policy the service runs with stays
    /// under (`--rate-limit` is at least 0.001), and a bound for one built otherwise.
    static let maxRetryAfter = 86_400

    let policy: RateLimitPolicy
    let capacity: Int
    /// Nanoseconds from any fixed start; injectable so tests need not wait.
    private let clock: @Sendable () -> UInt64
    private let buckets = LockedValue<[String: TokenBucket]>([:])

    init(policy: RateLimitPolicy, capacity: Int = 10_000, clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.policy = policy
        self.capacity = capacity
        self.clock = clock
    }

    /// Spends one request of `client`'s budget, if it has one.
    func take(for client: String) -> Decision {
        if policy.exemptsLoopback, isLoopback(client) { return .admitted }
        return buckets.withLock { buckets in
            // Read under the lock, so no bucket is ever updated to a time later than this one.
            let now = clock()
            if buckets[client] == nil, buckets.count >= capacity { Self.makeRoom(in: &buckets, now: now, policy: policy, capacity: capacity) }
            return buckets[client, default: TokenBucket(policy: policy, now: now)].take(now: now, policy: policy)
        }
    }

    /// Clients with a bucket now.
    var count: Int { buckets.withLock { $0.count } }

    private static func makeRoom(in buckets: inout [String: TokenBucket], now: UInt64, policy: RateLimitPolicy, capacity: Int) {
        buckets = buckets.filter { !$0.value.isFull(now: now, policy: policy) }
        if buckets.count > capacity - capacity / 4 { buckets.removeAll(keepingCapacity: true) }
    }
}

/// One client's budget: `burst` tokens, refilled at `rate` per second; a request takes one.
struct TokenBucket: Sendable {
    private var tokens: Double
    private var updated: UInt64

    init(policy: RateLimitPolicy, now: UInt64) {
        tokens = Double(policy.burst)
        updated = now
    }

    private func tokens(at now: UInt64, policy: RateLimitPolicy) -> Double {
        let elapsed = Double(now > updated ? now - updated : 0) / 1e9
        return min(Double(policy.burst), tokens + elapsed * policy.rate)
    }

    /// Takes a token if there is one; else says how long until there is.
    mutating func take(now: UInt64, policy: RateLimitPolicy) -> RateLimiter.Decision {
        tokens = tokens(at: now, policy: policy)
        updated = now
        guard tokens < 1 else {
            tokens -= 1
            return .admitted
        }
        // Clamped while still a Double: a tiny rate must not make an Int out of 1e20 seconds.
        let wait = ((1 - tokens) / policy.rate).rounded(.up)
        return .refused(retryAfter: wait.isFinite ? Int(min(max(wait, 1), Double(RateLimiter.maxRetryAfter))) : RateLimiter.maxRetryAfter)
    }

    /// Refilled to the brim: the same as a new bucket, so it can be forgotten.
    func isFull(now: UInt64, policy: RateLimitPolicy) -> Bool {
        tokens(at: now, policy: policy) >= Double(policy.burst)
    }
}

/// Whether an address (or host name to listen on) is this machine's loopback: 127.0.0.0/8,
/// `::1` (also as an IPv4-mapped address), or `localhost`.
func isLoopback(_ address: String) -> Bool {
    // The usual spellings first, without parsing: this runs on every request.
    if address.utf8.starts(with: "127.".utf8) || address == "::1" { return true }
    var v4 = in_addr()
    if inet_pton(AF_INET, address, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, address, &v6) == 1 {
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        let isMappedIPv4 = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
        return bytes == [UInt8](repeating: 0, count: 15) + [1] || (isMappedIPv4 && bytes[12] == 127)
    }
    return address.lowercased() == "localhost"
}
