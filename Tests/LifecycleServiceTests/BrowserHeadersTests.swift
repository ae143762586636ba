import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// The headers that keep browsers safe: security headers always, CORS only when configured.
@Suite("security headers and CORS")
struct BrowserHeadersTests {
    static func hasSecurityHeaders(_ response: HTTPResponse) -> Bool {
        response.header("content-security-policy")?.hasPrefix("default-src 'self'") == true
            && response.header("x-content-type-options") == "nosniff"
            && response.header("referrer-policy") == "no-referrer"
            && response.header("x-frame-options") == "DENY"
    }

    @Test("the dashboard and static files carry the security headers; API answers and refusals nosniff")
    func securityHeaders() throws {
        let server = try TestServer(.router)
        let connection = server.router()
        for (method, path) in [("GET", "/"), ("GET", "/js/app.js"), ("GET", "/nothing")] {
            let response = try connection.request(method, path)
            #expect(Self.hasSecurityHeaders(response), "\(method) \(path): \(response.status) \(response.headers)")
        }
        for (method, path) in [("GET", "/v1/models"), ("GET", "/v1/instances/a%00b"), ("DELETE", "/v1/models")] {
            let response = try connection.request(method, path)
            #expect(response.header("x-content-type-options") == "nosniff", "\(method) \(path): \(response.status) \(response.headers)")
        }
        // No inline script in what the dashboard serves, which the policy would block.
        let page = try connection.request("GET", "/").text
        #expect(!page.contains("<script>") && !page.contains("onclick="))
    }

    @Test("without --cors-origin: no CORS header at all, and a preflight is 405 like any OPTIONS")
    func corsOff() throws {
        let server = try TestServer(.router)
        let connection = server.router()
        let response = try connection.request("GET", "/v1/models", headers: [("Origin", "https://qa.example.com")])
        #expect(response.status == 200 && response.header("access-control-allow-origin") == nil)
        let preflight = try connection.request("OPTIONS", "/v1/instances", headers: [
            ("Origin", "https://qa.example.com"), ("Access-Control-Request-Method", "POST"),
        ])
        #expect(preflight.status == 405 && preflight.header("access-control-allow-origin") == nil)
    }

    @Test("with --cors-origin: listed origins get CORS headers and preflights; others get none, and 403 on preflight")
    func corsOn() throws {
        let server = try TestServer(.router) { $0.corsOrigins = ["https://qa.example.com", "http://localhost:3000"] }
        let connection = server.router()

        let preflight = try connection.request("OPTIONS", "/v1/instances/x/events", headers: [
            ("Origin", "https://qa.example.com"), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type, idempotency-key"),
        ])
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-origin") == "https://qa.example.com")
        #expect(preflight.header("access-control-allow-methods")?.contains("POST") == true)
        let allowedHeaders = preflight.header("access-control-allow-headers")?.lowercased() ?? ""
        #expect(["content-type", "idempotency-key", "authorization", "if-match"].allSatisfy(allowedHeaders.contains))
        #expect(preflight.header("vary") == "Origin")

        let created = try connection.request("PUT", "/v1/instances/cors", json: "{}", headers: [("Origin", "http://localhost:3000")])
        #expect(created.status == 201 && created.header("access-control-allow-origin") == "http://localhost:3000")
        #expect(created.header("access-control-expose-headers")?.contains("ETag") == true)

        let stranger = try connection.request("GET", "/v1/models", headers: [("Origin", "https://evil.example")])
        #expect(stranger.status == 200 && stranger.header("access-control-allow-origin") == nil && stranger.header("vary") == "Origin")
        let strangerPreflight = try connection.request("OPTIONS", "/v1/instances", headers: [
            ("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST"),
        ])
        #expect(strangerPreflight.status == 403 && strangerPreflight.header("access-control-allow-origin") == nil)
        // It says only that the origin is not allowed, not which ones are.
        #expect(strangerPreflight.json["detail"] as? String == "origin https://evil.example is not allowed")
        #expect(strangerPreflight.header("content-type") == "application/problem+json")
    }

    @Test("--cors-origin takes origins only", arguments: [
        ("https://a.example,http://b.example:8080", true), ("*", true), ("https://a.example/path", false),
        ("ftp://a.example", false), ("a.example", false), ("", false), ("https://a.example,", true),
    ])
    func corsFlag(value: String, isAccepted: Bool) {
        let parsed = Result { try Configuration.parse(arguments: ["--cors-origin", value], environment: [:]) }
        let isParsed = (try? parsed.get()) != nil
        #expect(isParsed == isAccepted, "\(value)")
    }
}
