import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// Conditional GETs and `Cache-Control` on the real service over loopback (issue 21, item 9).
@Suite("Caching")
struct CachingTests {
    @Test("GET /v1/instances/{id}: If-None-Match naming its ETag (strong, weak, in a list, or *) is 304 without a body, until the instance moves on")
    func instanceRevalidates() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        let first = try c.request("GET", "/v1/instances/app")
        let etag = try #require(first.header("etag"))
        #expect(first.status == 200 && first.header("cache-control") == "no-cache")
        for tags in [etag, "W/\(etag)", "\"0\", \(etag)", "*"] {
            for method in ["GET", "HEAD"] {
                let again = try c.request(method, "/v1/instances/app", headers: [("If-None-Match", tags)])
                #expect(again.status == 304 && again.body.isEmpty, "\(method) \(tags)")
                #expect(again.header("etag") == etag && again.header("cache-control") == "no-cache", "\(method) \(tags)")
                #expect(again.header("content-type") == nil, "\(method) \(tags)")
            }
        }
        // The connection is still in step: the 304s sent no body.
        let other = try c.request("GET", "/v1/instances/app", headers: [("If-None-Match", "\"0\"")])
        #expect(other.status == 200 && other.body == first.body)
        // A new version is a new tag: the old one is answered in full.
        #expect(try c.event("app", #"{"event": "didEnterBackground"}"#).status == 200)
        let moved = try c.request("GET", "/v1/instances/app", headers: [("If-None-Match", etag)])
        #expect(moved.status == 200 && moved.header("etag") != etag && moved.json["state"] as? String == "background")
        // A write is not a read: If-None-Match does not make it a 304.
        let write = try c.request("PUT", "/v1/instances/app", json: "{}", headers: [("If-None-Match", "*")])
        #expect(write.status == 200)
    }

    @Test("an instance deleted and made again under its id has new ETags: the old one revalidates to the new body and If-Match with it is 412")
    func instanceMadeAgain() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("again", events: ["didFinishLaunching"])
        let old = try c.request("GET", "/v1/instances/again")
        let oldTag = try #require(old.header("etag"))
        #expect(oldTag.hasPrefix("\"1-") && oldTag.hasSuffix("\""), "version 1, then its creation: \(oldTag)")
        // Made again a millisecond later at least, so its creation time differs.
        let created = Date().roundedToMilliseconds
        #expect(eventually { Date().roundedToMilliseconds > created })
        #expect(try c.request("DELETE", "/v1/instances/again").status == 204)
        #expect(try c.request("PUT", "/v1/instances/again", json: #"{"model": "android-activity"}"#).status == 201)
        #expect(try c.event("again", #"{"event": "onCreate"}"#).status == 200)
        let now = try c.request("GET", "/v1/instances/again")
        #expect(now.json["version"] as? Int == 1 && now.header("etag") != oldTag, "the same version, another tag: \(now.header("etag") ?? "")")
        let revalidated = try c.request("GET", "/v1/instances/again", headers: [("If-None-Match", oldTag)])
        #expect(revalidated.status == 200 && revalidated.body == now.body && revalidated.json["model"] as? String == "android-activity")
        #expect(try c.request("GET", "/v1/instances/again", headers: [("If-None-Match", now.header("etag") ?? "")]).status == 304)
        // A write at the old instance's tag is refused, naming the current one; at the version alone it goes ahead.
        let stale = try c.event("again", #"{"event": "onStart"}"#, headers: [("If-Match", oldTag)])
        #expect(stale.status == 412 && stale.json["detail"] as? String == "instance \"again\" is at version 1 (ETag \(now.header("etag") ?? "")), which If-Match does not name")
        #expect(try c.request("DELETE", "/v1/instances/again", headers: [("If-Match", oldTag)]).status == 412)
        #expect(try c.event("again", #"{"event": "onStart"}"#, headers: [("If-Match", now.header("etag") ?? "")]).status == 200)
        #expect(try c.event("again", #"{"event": "onResume"}"#, headers: [("If-Match", "\"2\"")]).status == 200)
    }

    @Test("every API answer says whether it may be kept: no-cache with an ETag, no-store without; files and streams keep their own")
    func everyAnswerHasCacheControl() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        let router = API(registry: server.service!.registry, staticFiles: nil, metrics: server.service!.metrics).makeRouter()
        var answers: [(String, HTTPResponse)] = []
        // Every route (streams apart: they never end), then the answers no route gives.
        for (method, pattern) in router.routeList where !pattern.hasSuffix("/stream") {
            let path = pattern.replacingOccurrences(of: "{model}", with: "ios-app").replacingOccurrences(of: "{id}", with: "app")
                .replacingOccurrences(of: "{name}", with: "cold-start")
            let response = method == .get || method == .delete ? try c.request(method.rawValue, path) : try c.request(method.rawValue, path, json: "{}")
            answers.append(("\(method.rawValue) \(path)", response))
        }
        for (method, path) in [("GET", "/v1/nothing"), ("PATCH", "/v1/instances"), ("GET", "/v1/instances?limit=0"), ("GET", "/v1/instances/app")] {
            answers.append(("\(method) \(path)", try c.request(method, path)))
        }
        #expect(answers.count >= 20)
        for (what, response) in answers {
            #expect(response.header("cache-control") == (response.header("etag") == nil ? "no-store" : "no-cache"), "\(what): \(response.status)")
        }
        // The dashboard's files and the streams chose theirs.
        #expect(try c.request("GET", "/").header("cache-control") == "no-cache")
        #expect(try c.request("GET", "/missing.js").header("cache-control") == "no-store")
    }

    @Test("refusals before any handler (a missing token, a spent rate budget) are not kept either")
    func refusalsAreNotKept() throws {
        let server = try TestServer(.router) {
            $0.token = "s3cret.T0ken_for-tests~"
            $0.protectReads = true
            $0.rateLimit = 1
            $0.rateBurst = 1
        }
        let c = server.router()
        let refused = try c.request("GET", "/v1/instances")
        #expect(refused.status == 401 && refused.header("cache-control") == "no-store")
        let limited = try c.request("GET", "/v1/instances")
        #expect(limited.status == 429 && limited.header("cache-control") == "no-store")
    }
}
