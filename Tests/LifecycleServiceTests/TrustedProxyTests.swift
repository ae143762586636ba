import Foundation
import LifecycleTestSupport
import LifecycleHTTP
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import LifecycleService

/// Behind a reverse proxy: `--trusted-proxy` names the proxies whose `X-Forwarded-For` is
/// believed, so that per-client limits and the log see each client, not the proxy.
@Suite("trusted proxies", .serialized)
struct TrustedProxyTests {
    static func forwarded(_ client: String) -> [(String, String)] { [("X-Forwarded-For", client)] }

    @Test("the client is the last X-Forwarded-For address that is not a trusted proxy; other peers' X-Forwarded-For is ignored")
    func resolution() throws {
        let proxies = try #require(TrustedProxies(["127.0.0.1", "10.0.0.0/8", "fd00::/8"]))
        // An untrusted peer: whatever it forwards is ignored.
        #expect(proxies.client(peer: "203.0.113.9", forwardedFor: ["198.51.100.1"]) == "203.0.113.9")
        #expect(TrustedProxies().client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1"]) == "127.0.0.1")
        // A trusted one: the rightmost untrusted hop; what a client wrote further left is not believed.
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: []) == "127.0.0.1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1, 203.0.113.7"]) == "203.0.113.7")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1", "203.0.113.7 , 10.1.2.3"]) == "203.0.113.7")
        #expect(proxies.client(peer: "10.9.9.9", forwardedFor: ["2001:db8::1"]) == "2001:db8::1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["::ffff:203.0.113.7"]) == "203.0.113.7")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["fd00::5"]) == "fd00::5", "every hop trusted: the first")
        // A hop that is not an address: the last trusted one stands.
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["unknown"]) == "127.0.0.1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["203.0.113.7, 203.0.113.8:443, 10.0.0.1"]) == "10.0.0.1")
        #expect(proxies.contains("10.255.0.1") && !proxies.contains("11.0.0.1") && proxies.contains("::ffff:127.0.0.1") && !proxies.contains("fe80::1"))
        for bad in ["proxy.internal", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "::1/129", ""] {
            #expect(TrustedProxies([bad]) == nil, "\(bad)")
        }
    }

    @Test("--trusted-proxy and LIFECYCLED_TRUSTED_PROXY: a comma-separated list, refused when any entry is not an address or range; in --help")
    func configuration() throws {
        #expect(try Configuration.parse(arguments: [], environment: [:]).trustedProxies.isEmpty)
        let given = try Configuration.parse(arguments: ["--trusted-proxy", "10.0.0.0/8, ::1"], environment: ["LIFECYCLED_TRUSTED_PROXY": "192.0.2.1"])
        #expect(given.trustedProxies == TrustedProxies(["10.0.0.0/8", "::1"]))
        let variable = try Configuration.parse(arguments: [], environment: ["LIFECYCLED_TRUSTED_PROXY": "192.0.2.1"])
        #expect(variable.trustedProxies == TrustedProxies(["192.0.2.1"]))
        for value in ["", "lb.internal", "10.0.0.1,", "10.0.0.0/40"] {
            #expect(throws: Configuration.ParseError.badValue("--trusted-proxy", value)) { try Configuration.parse(arguments: ["--trusted-proxy", value], environment: [:]) }
        }
        #expect(Configuration.usage.contains("--trusted-proxy ADDRESSES") && Configuration.usage.contains("[LIFECYCLED_TRUSTED_PROXY]"))
    }

    @Test("through a trusted proxy each forwarded client has its own stream cap (429 past it) and rate limit; the proxy is not held to the connection cap")
    func perClientLimitsBehindAProxy() throws {
        let server = try TestServer {
            $0.trustedProxies = TrustedProxies(["127.0.0.1"])!
            $0.maxConnectionsPerClient = 2
            $0.heartbeat = 60
        }
        var first = try (0..<2).map { _ in try EventStream(port: server.port, path: "/v1/stream", headers: Self.forwarded("203.0.113.7")) }
        #expect(first.allSatisfy { $0.status == 200 })
        let third = try EventStream(port: server.port, path: "/v1/stream", headers: Self.forwarded("203.0.113.7"))
        #expect(third.status == 429 && third.header("retry-after") == "5" && third.header("content-type") == "application/problem+json")
        #expect(String(decoding: third.readBody(), as: UTF8.self).contains("--max-connections-per-client"))
        // Another client through the same proxy: five connections from 127.0.0.1 by now.
        let other = try (0..<2).map { _ in try EventStream(port: server.port, path: "/v1/stream", headers: Self.forwarded("198.51.100.4, 203.0.113.8")) }
        #expect(other.allSatisfy { $0.status == 200 })
        // A client's stream that closes frees its place at once.
        first.removeLast()
        #expect(eventually(within: 10) {
            guard let again = try? EventStream(port: server.port, path: "/v1/stream", headers: Self.forwarded("203.0.113.7")), again.status == 200 else { return false }
            first.append(again)
            return true
        })
        try server.connect().makeInstance("proxied")
        for stream in first + other { #expect(stream.next(timeout: 10)?.type == "created") }

        let limited = try TestServer {
            $0.trustedProxies = TrustedProxies(["127.0.0.1"])!
            $0.rateLimit = 1
            $0.rateBurst = 1
        }
        let c = try limited.connect()
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.7")).status == 200)
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.7")).status == 429)
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.8")).status == 200)
        // A client cannot pose as another by writing its own X-Forwarded-For in front.
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.9, 203.0.113.8")).status == 429)
    }

    @Test("without --trusted-proxy X-Forwarded-For changes nothing: one address, one connection cap and one rate budget")
    func untrustedForwardedFor() throws {
        let server = try TestServer {
            $0.rateLimit = 1
            $0.rateBurst = 1
            $0.maxConnectionsPerClient = 2
        }
        let c = try server.connect()
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.7")).status == 200)
        #expect(try c.request("GET", "/v1/instances", headers: Self.forwarded("203.0.113.8")).status == 429)
        let second = try WireClient(port: server.port)
        second.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n")
        #expect(try second.readResponse().status != 0)
        let third = try WireClient(port: server.port)
        third.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.10\r\n\r\n")
        #expect((try? third.readResponse(within: 5)) == nil && third.isClosed, "the third connection from 127.0.0.1 is refused")
    }

    @Test("the access log's client is the forwarded one")
    func accessLog() throws {
        let data = TemporaryDirectory()
        let server = try LifecycledProcess.serving(dataDirectory: data.path, extra: ["--trusted-proxy", "127.0.0.1"])
        defer { server.signal(SIGTERM); server.finish() }
        let connection = try WireClient(port: server.port)
        #expect(try connection.request("GET", "/v1/instances", headers: Self.forwarded("198.51.100.1, 203.0.113.7")).status == 200)
        let line = server.waitForLogLine(containing: ["msg=request", "route=/v1/instances "])
        #expect(line?.contains("client=203.0.113.7") == true, "\(server.standardErrorSoFar)")
    }
}
