import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService
import LifecycleHTTP

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let nanoseconds = LockedValue<UInt64>(1_000_000_000)
    func advance(seconds: Double) { nanoseconds.withLock { $0 += UInt64(seconds * 1e9) } }
    var read: @Sendable () -> UInt64 { { [self] in nanoseconds.withLock { $0 } } }
}

@Suite("rate limits")
struct RateLimitTests {
    @Test("a client gets its burst, then one request per 1/rate seconds; Retry-After is whole seconds, at least 1")
    func tokenBucket() {
        let clock = ManualClock()
        let limiter = RateLimiter(policy: RateLimitPolicy(rate: 1, burst: 3, exemptsLoopback: false), clock: clock.read)
        for _ in 0..<3 { #expect(limiter.take(for: "10.0.0.1") == .admitted) }
        #expect(limiter.take(for: "10.0.0.1") == .refused(retryAfter: 1))
        // Another client has its own bucket.
        #expect(limiter.take(for: "10.0.0.2") == .admitted)
        clock.advance(seconds: 0.5)
        #expect(limiter.take(for: "10.0.0.1") == .refused(retryAfter: 1))
        clock.advance(seconds: 0.5)
        #expect(limiter.take(for: "10.0.0.1") == .admitted)
        #expect(limiter.take(for: "10.0.0.1") == .refused(retryAfter: 1))
        // A long pause refills to the burst, no further.
        clock.advance(seconds: 3600)
        for _ in 0..<3 { #expect(limiter.take(for: "10.0.0.1") == .admitted) }
        #expect(limiter.take(for: "10.0.0.1") == .refused(retryAfter: 1))

        let slow = RateLimiter(policy: RateLimitPolicy(rate: 0.25, burst: 1, exemptsLoopback: false), clock: clock.read)
        #expect(slow.take(for: "::1") == .admitted)
        #expect(slow.take(for: "::1") == .refused(retryAfter: 4))
        clock.advance(seconds: 2.5)
        #expect(slow.take(for: "::1") == .refused(retryAfter: 2))
        clock.advance(seconds: 1.5)
        #expect(slow.take(for: "::1") == .admitted)
    }

    // Threads used to read the clock before taking the lock, so a bucket could see a time
    // before its last update; the wrapped difference refilled it to the brim.
    @Test("a time before a bucket's last update refills nothing")
    func earlierTime() {
        let policy = RateLimitPolicy(rate: 1, burst: 2, exemptsLoopback: false)
        var bucket = TokenBucket(policy: policy, now: 10_000_000_000)
        #expect(bucket.take(now: 10_000_000_000, policy: policy) == .admitted)
        #expect(bucket.take(now: 10_000_000_000, policy: policy) == .admitted)
        #expect(bucket.take(now: 9_000_000_000, policy: policy) == .refused(retryAfter: 1))
        #expect(!bucket.isFull(now: 9_000_000_000, policy: policy))
    }

    @Test("a rate under 0.001 is refused at start (exit 2); Retry-After stays a whole number of seconds, at most a day, whatever the rate")
    func tinyRates() throws {
        for value in ["1e-20", "0.0009", "-1", "nan", "inf", "1e7"] {
            #expect(throws: Configuration.ParseError.badValue("--rate-limit", value)) { try Configuration.parse(arguments: ["--rate-limit", value], environment: [:]) }
        }
        #expect(throws: Configuration.ParseError.badValue("LIFECYCLED_RATE_LIMIT", "1e-20")) {
            try Configuration.parse(arguments: [], environment: ["LIFECYCLED_RATE_LIMIT": "1e-20"])
        }
        #expect(try Configuration.parse(arguments: ["--rate-limit", "0.001"], environment: [:]).rateLimitPolicy?.rate == 0.001)
        #expect(try Configuration.parse(arguments: ["--rate-limit", "0"], environment: [:]).rateLimitPolicy == nil)
        #expect(Configuration.usage.contains("0.001 to 1000000"))

        // The slowest rate taken: a refused client waits 1000 s.
        let clock = ManualClock()
        let slowest = RateLimiter(policy: RateLimitPolicy(rate: Configuration.minimumRateLimit, burst: 1, exemptsLoopback: false), clock: clock.read)
        #expect(slowest.take(for: "10.0.0.1") == .admitted)
        #expect(slowest.take(for: "10.0.0.1") == .refused(retryAfter: 1000))
        // A policy made without the flag's check: clamped, not a crash converting 1e20 to Int.
        let tiny = RateLimit(limiter: RateLimiter(policy: RateLimitPolicy(rate: 1e-20, burst: 1, exemptsLoopback: false), clock: clock.read))
        let head = Request(method: "GET", path: "/healthz", clientAddress: "10.0.0.2")
        #expect(tiny.admit(head) == nil)
        let refusal = try #require(tiny.admit(head))
        #expect(refusal.status == 429 && refusal.headers.first { $0.0 == "Retry-After" }?.1 == "86400")

        let data = TemporaryDirectory()
        let run = try LifecycledProcess(arguments: ["--port", "0", "--data-dir", data.path, "--rate-limit", "1e-20"]).finish(within: 10)
        #expect(run.status == 2)
        #expect(run.stderr.contains("invalid value \"1e-20\" for --rate-limit"), "\(run.stderr)")
    }

    @Test("by default loopback clients are not limited; a rate that was asked for limits them too")
    func loopbackExemption() {
        let clock = ManualClock()
        let policy = RateLimitPolicy(rate: 1, burst: 1, exemptsLoopback: true)
        let limiter = RateLimiter(policy: policy, clock: clock.read)
        for client in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            for _ in 0..<5 { #expect(limiter.take(for: client) == .admitted, "\(client)") }
        }
        #expect(limiter.take(for: "192.168.1.9") == .admitted)
        #expect(limiter.take(for: "192.168.1.9") == .refused(retryAfter: 1))
        #expect(limiter.count == 1)

        var strict = policy
        strict.exemptsLoopback = false
        let all = RateLimiter(policy: strict, clock: clock.read)
        #expect(all.take(for: "127.0.0.1") == .admitted)
        #expect(all.take(for: "127.0.0.1") == .refused(retryAfter: 1))
    }

    @Test("the table of clients stays bounded under a flood of addresses, and idle clients are dropped first")
    func boundedMemory() {
        let clock = ManualClock()
        let limiter = RateLimiter(policy: RateLimitPolicy(rate: 1, burst: 2, exemptsLoopback: false), capacity: 8, clock: clock.read)
        // A flood of new addresses, each active: the table never grows past its capacity.
        for n in 0..<1000 {
            _ = limiter.take(for: "10.1.\(n / 256).\(n % 256)")
            #expect(limiter.count <= 8)
        }
        // At capacity, idle clients (refilled) are swept; active ones keep their spent buckets.
        let fresh = RateLimiter(policy: RateLimitPolicy(rate: 1, burst: 2, exemptsLoopback: false), capacity: 8, clock: clock.read)
        for n in 0..<8 { #expect(fresh.take(for: "10.2.0.\(n)") == .admitted) }
        clock.advance(seconds: 10)
        #expect(fresh.take(for: "10.9.9.9") == .admitted)
        #expect(fresh.count == 1)
        #expect(fresh.take(for: "10.9.9.9") == .admitted)
        for n in 0..<7 { #expect(fresh.take(for: "10.3.0.\(n)") == .admitted) }
        #expect(fresh.count == 8)
        #expect(fresh.take(for: "10.9.9.9") == .refused(retryAfter: 1))
        // Full of active clients: the table is emptied rather than grown.
        #expect(fresh.take(for: "10.4.0.1") == .admitted)
        #expect(fresh.count == 1)
    }

    @Test("loopback is 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost; nothing else", arguments: [
        ("127.0.0.1", true), ("127.255.0.9", true), ("::1", true), ("::ffff:127.0.0.1", true), ("localhost", true), ("LOCALHOST", true),
        ("0.0.0.0", false), ("::", false), ("10.0.0.1", false), ("128.0.0.1", false), ("::ffff:10.0.0.1", false), ("::2", false),
        ("example.com", false), ("", false),
    ])
    func loopback(address: String, isLoopback expected: Bool) {
        #expect(isLoopback(address) == expected)
    }

    @Test("--rate-limit and --rate-burst: the default limits only clients beyond loopback; 0 turns limits off")
    func options() throws {
        func policy(_ arguments: [String], _ environment: [String: String] = [:]) throws -> RateLimitPolicy? {
            try Configuration.parse(arguments: arguments, environment: environment).rateLimitPolicy
        }
        #expect(try policy([]) == RateLimitPolicy(rate: 100, burst: 200, exemptsLoopback: true))
        #expect(try policy(["--rate-burst", "50"]) == RateLimitPolicy(rate: 100, burst: 50, exemptsLoopback: true))
        #expect(try policy(["--rate-limit", "0"]) == nil)
        #expect(try policy([], ["LIFECYCLED_RATE_LIMIT": "0"]) == nil)
        #expect(try policy(["--rate-limit", "5"]) == RateLimitPolicy(rate: 5, burst: 10, exemptsLoopback: false))
        #expect(try policy(["--rate-limit=0.5"]) == RateLimitPolicy(rate: 0.5, burst: 1, exemptsLoopback: false))
        #expect(try policy([], ["LIFECYCLED_RATE_LIMIT": "20", "LIFECYCLED_RATE_BURST": "3"]) == RateLimitPolicy(rate: 20, burst: 3, exemptsLoopback: false))
        for (flag, value) in [("--rate-limit", "-1"), ("--rate-limit", "fast"), ("--rate-limit", "nan"), ("--rate-burst", "0"), ("--rate-burst", "1.5")] {
            #expect(throws: Configuration.ParseError.badValue(flag, value)) { try Configuration.parse(arguments: [flag, value], environment: [:]) }
        }
    }

    @Test("over HTTP: 429 with Retry-After and a problem after the burst, before any body is read; admitted again once Retry-After has passed")
    func serverRefusesAndRecovers() throws {
        let server = try TestServer {
            $0.rateLimit = 1
            $0.rateBurst = 3
        }
        let c = try server.connect()
        for _ in 0..<3 { #expect(try c.request("GET", "/v1/models").status == 200) }
        let refused = try c.request("GET", "/v1/models")
        #expect(refused.status == 429)
        #expect(refused.header("content-type") == "application/problem+json")
        #expect(refused.json["status"] as? Int == 429 && refused.json["title"] as? String == "Too Many Requests")
        #expect((refused.json["detail"] as? String)?.contains("--rate-limit") == true)
        let retryAfter = try #require(refused.header("retry-after").flatMap(Int.init))
        #expect(retryAfter >= 1)

        // A write with a body is refused at its head too, and its connection closed.
        let write = try server.connect()
        try #require(write.send(Array("POST /v1/instances HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n".utf8)))
        let refusedWrite = try write.readResponse()
        #expect(refusedWrite.status == 429 && refusedWrite.header("connection")?.lowercased() == "close")
        #expect(write.isClosedByPeer())

        // Admitted again once the bucket has a token: poll, for at most Retry-After and a margin.
        let deadline = Date().addingTimeInterval(Double(retryAfter) + 10)
        var status = 429
        while status == 429, Date() < deadline {
            usleep(100_000)
            status = try c.request("GET", "/v1/models").status
        }
        #expect(status == 200)
    }
}
