import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// What an error must not touch: the instance and its history, byte for byte.
func snapshot(_ c: some APIClient, _ id: String) throws -> (instance: [UInt8], history: [UInt8]) {
    (try c.request("GET", "/v1/instances/\(id)").body, try c.request("GET", "/v1/instances/\(id)/history").body)
}

@Suite("HTTP API")
struct APITests {
    @Test("health, models and a model's rows with stable ids")
    func healthAndModels() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let health = try c.request("GET", "/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "ok")
        // A server without a token says so, so the dashboard offers none.
        #expect(health.json["writesNeedToken"] as? Bool == false && health.json["readsNeedToken"] as? Bool == false)

        let models = try c.request("GET", "/v1/models")
        let names = (models.json["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(names == ["android-activity", "ios-app"])

        let ios = try c.request("GET", "/v1/models/ios-app").json
        let rows = try #require(ios["transitions"] as? [[String: Any]])
        #expect(rows.count == 18)
        #expect(rows.first?["id"] as? String == "r1" && rows.last?["id"] as? String == "r18")
        #expect(ios["initialState"] as? String == "initializing")
        let states = try #require(ios["states"] as? [[String: Any]])
        #expect(states.contains { $0["name"] as? String == "foreground" && $0["kind"] as? String == "permanent" })

        let missing = try c.request("GET", "/v1/models/windows-95")
        #expect(missing.status == 404 && missing.header("content-type") == "application/problem+json")
        #expect(missing.json["status"] as? Int == 404 && missing.json["type"] != nil && missing.json["title"] != nil && missing.json["detail"] != nil)
    }

    @Test("create with POST: generated or given id, model default, Location; errors change nothing")
    func createWithPost() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let generated = try c.request("POST", "/v1/instances", body: [], contentType: nil)
        #expect(generated.status == 201)
        let generatedID = try #require(generated.json["id"] as? String)
        #expect(generated.header("location") == "/v1/instances/\(generatedID)")
        #expect(generated.json["model"] as? String == "ios-app")
        #expect(generated.json["state"] as? String == "initializing")
        #expect(generated.json["version"] as? Int == 0 && generated.json["launchCount"] as? Int == 1)

        let android = try c.request("POST", "/v1/instances", json: #"{"id": "phone.1", "model": "android-activity"}"#)
        #expect(android.status == 201 && android.json["state"] as? String == "initialized")

        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "phone.1"}"#).status == 409)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "x", "model": "nokia"}"#).status == 422)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "x", "colour": "red"}"#).status == 400)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "x""#).status == 400)
        #expect(try c.request("POST", "/v1/instances", json: #"["x"]"#).status == 400)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": 7}"#).status == 400)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "has space"}"#).status == 422)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "\#(String(repeating: "a", count: 129))"}"#).status == 422)
        // Refused on its head, so its connection closes (the body is not read).
        #expect(try server.router().request("POST", "/v1/instances", headers: [], body: Array(#"{"id": "x"}"#.utf8), contentType: "text/plain").status == 415)
        #expect(try c.request("GET", "/v1/instances/x").status == 404, "no failed create left an instance")
        let list = try c.request("GET", "/v1/instances").json["items"] as? [[String: Any]]
        #expect(list?.count == 2)
    }

    @Test("PUT is idempotent; a different model conflicts")
    func put() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let first = try c.request("PUT", "/v1/instances/app-1", body: [], contentType: nil)
        #expect(first.status == 201)
        let second = try c.request("PUT", "/v1/instances/app-1", body: [], contentType: nil)
        #expect(second.status == 200)
        #expect(second.body == first.body)
        #expect(try c.request("PUT", "/v1/instances/app-1", json: #"{"model": "android-activity"}"#).status == 409)
        #expect(try c.request("PUT", "/v1/instances/bad%20id", body: [], contentType: nil).status == 400)
        #expect(try c.request("PUT", "/v1/instances/app-2", json: #"{"id": "app-2"}"#).status == 400)
    }

    @Test("get with ETag, delete, and 404 after")
    func getAndDelete() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("gone", events: ["didFinishLaunching"])
        let got = try c.request("GET", "/v1/instances/gone")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let createdAt = try #require(formatter.date(from: got.json["createdAt"] as? String ?? ""))
        let created = Int64((createdAt.timeIntervalSince1970 * 1000).rounded())
        #expect(got.status == 200 && got.header("etag") == "\"1-\(created)\"", "the version, then the creation time in ms")
        #expect(got.json["state"] as? String == "launching")
        let breadcrumb = got.json["breadcrumb"] as? [String: Any]
        #expect(breadcrumb?["step"] as? String == "launched")
        #expect(try c.request("DELETE", "/v1/instances/gone").status == 204)
        #expect(try c.request("GET", "/v1/instances/gone").status == 404)
        #expect(try c.request("DELETE", "/v1/instances/gone").status == 404)
        #expect(try c.request("GET", "/v1/instances/gone/history").status == 404)
        #expect(try c.event("gone", #"{"event": "didBecomeActive"}"#).status == 404)
        #expect(try c.request("GET", "/v1/instances/nobody").status == 404)
    }

    @Test("list filters by state and model and pages by cursor")
    func list() throws {
        let server = try TestServer(.router)
        let c = server.router()
        for i in 0..<7 { try c.makeInstance(String(format: "ios-%02d", i), events: i % 2 == 0 ? coldStart : []) }
        for i in 0..<3 { try c.makeInstance("droid-\(i)", model: "android-activity") }

        func ids(_ query: String) throws -> [String] {
            (try c.request("GET", "/v1/instances\(query)").json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        }
        #expect(try ids("?state=foreground") == ["ios-00", "ios-02", "ios-04", "ios-06"])
        #expect(try ids("?model=android-activity") == ["droid-0", "droid-1", "droid-2"])
        #expect(try ids("?model=ios-app&state=initializing") == ["ios-01", "ios-03", "ios-05"])

        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try c.request("GET", "/v1/instances?limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")).json
            seen += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = page["nextCursor"] as? String
        } while cursor != nil
        #expect(seen == seen.sorted() && seen.count == 10 && Set(seen).count == 10)

        // Creations and deletions keep the order: a new first id, a deleted middle one.
        _ = try c.request("DELETE", "/v1/instances/ios-03")
        try c.makeInstance("aaa")
        try c.makeInstance("zzz")
        #expect(try ids("?limit=1000") == ["aaa", "droid-0", "droid-1", "droid-2", "ios-00", "ios-01", "ios-02", "ios-04", "ios-05", "ios-06", "zzz"])
        #expect(try ids("?cursor=ios-02&limit=2") == ["ios-04", "ios-05"])
        #expect(try ids("?cursor=ios-03&limit=1") == ["ios-04"], "a cursor need not exist any more")
        #expect(try c.request("GET", "/v1/instances?limit=0").status == 400)
        #expect(try c.request("GET", "/v1/instances?limit=abc").status == 400)
        // A second value, or a sign, is refused rather than silently read one way.
        #expect(try c.request("GET", "/v1/instances?limit=5&limit=x").status == 400)
        #expect(try c.request("GET", "/v1/instances?limit=%2B5").status == 400)
        #expect(try c.request("GET", "/v1/instances?colour=red").status == 400)
    }

    @Test("a cold start, backgrounding and an unexpected event, as records")
    func events() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app")
        let launched = try c.event("app", #"{"event": "didFinishLaunching"}"#)
        #expect(launched.status == 200)
        #expect(launched.json["event"] as? String == "didFinishLaunching")
        #expect(launched.json["from"] as? String == "initializing" && launched.json["to"] as? String == "launching")
        #expect(launched.json["outcome"] as? String == "transitioned")
        #expect(launched.json["hooks"] as? [String] == ["Launching.init"])
        #expect(launched.json["version"] as? Int == 1)
        let firstSequence = try #require(launched.json["sequence"] as? Int)
        #expect(launched.json["time"] is String)

        let connected = try c.event("app", #"{"event": "willConnectToWindow", "window": "main"}"#)
        #expect(connected.json["hooks"] as? [String] == ["Connected.init"])
        #expect(connected.json["sequence"] as? Int == firstSequence + 1)
        let active = try c.event("app", #"{"event": "didBecomeActive"}"#)
        #expect(active.json["hooks"] as? [String] == ["Foreground.onTransition", "Foreground.didReturn"])
        _ = try c.event("app", #"{"event": "willResignActive"}"#)
        let background = try c.event("app", #"{"event": "didEnterBackground"}"#)
        #expect(background.json["to"] as? String == "background")
        #expect(background.json["hooks"] as? [String] == ["Background.onTransition", "Background.didReturn"])

        let unexpected = try c.event("app", #"{"event": "didFinishLaunching"}"#)
        #expect(unexpected.status == 409)
        #expect(unexpected.header("content-type") == "application/problem+json")
        let record = try #require(unexpected.json["record"] as? [String: Any])
        #expect(record["outcome"] as? String == "unexpected" && record["version"] as? Int == 6)
        let instance = try c.request("GET", "/v1/instances/app").json
        #expect(instance["version"] as? Int == 6)
        #expect((instance["counters"] as? [String: Any])?["unexpected"] as? Int == 1)
        #expect(instance["state"] as? String == "background")
        let history = try c.fullHistory("app")
        #expect(history.count == 6)
        #expect(history.last?["outcome"] as? String == "unexpected")
    }

    @Test("every bad event is refused with its status and changes nothing")
    func badEventsChangeNothing() throws {
        let server = try TestServer { $0.maxBodySize = 1024 }
        let c = try server.connect()
        try c.makeInstance("app", events: ["didFinishLaunching"])
        let before = try snapshot(c, "app")

        let cases: [(String, Int, () throws -> HTTPResponse)] = [
            ("malformed JSON", 400, { try c.event("app", #"{"event": "#) }),
            ("not an object", 400, { try c.event("app", #"["didBecomeActive"]"#) }),
            ("no event", 400, { try c.event("app", #"{"window": "main"}"#) }),
            ("empty body", 400, { try c.request("POST", "/v1/instances/app/events", body: [], contentType: nil) }),
            ("unknown event", 422, { try c.event("app", #"{"event": "didExplode"}"#) }),
            ("unknown parameter", 422, { try c.event("app", #"{"event": "willConnectToWindow", "window": "w", "colour": "red"}"#) }),
            ("wrong parameter type", 422, { try c.event("app", #"{"event": "willConnectToWindow", "window": 3}"#) }),
            ("missing parameter", 422, { try c.event("app", #"{"event": "willConnectToWindow"}"#) }),
            ("empty window", 422, { try c.event("app", #"{"event": "willConnectToWindow", "window": ""}"#) }),
            ("empty url", 422, { try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL", "url": ""}"#) }),
            ("nested parameter", 422, { try c.event("app", #"{"event": "willConnectToWindow", "window": {"id": 1}}"#) }),
            ("stale If-Match", 412, { try c.event("app", #"{"event": "willConnectToWindow", "window": "w"}"#, headers: [("If-Match", "\"0\"")]) }),
            // Refused on its head, so its connection closes (the body is not read).
            ("wrong content type", 415, { try server.connect().request("POST", "/v1/instances/app/events", body: Array(#"{"event": "didBecomeActive"}"#.utf8), contentType: "text/plain") }),
            ("unknown action", 422, { try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "launchRocket"}"#) }),
            ("relaunch with a body", 400, { try c.request("POST", "/v1/instances/app/relaunches", json: #"{"fast": true}"#) }),
            ("wrong method", 405, { try c.request("GET", "/v1/instances/app/events") }),
        ]
        for (name, status, send) in cases {
            let response = try send()
            #expect(response.status == status, "\(name)")
            #expect(response.header("content-type") == "application/problem+json", "\(name)")
            let problem = response.json
            #expect(problem["status"] as? Int == status && problem["title"] is String && problem["detail"] is String && problem["type"] is String, "\(name)")
        }
        #expect(try c.event("app", #"{"event": "willConnectToWindow", "window": ""}"#).json["detail"] as? String
            == #"parameter "window" of "willConnectToWindow" must not be empty"#)
        let wrongMethod = try c.request("GET", "/v1/instances/app/events")
        #expect(wrongMethod.header("allow") == "POST")
        #expect(try c.request("PATCH", "/v1/instances/app").header("allow") == "GET, HEAD, PUT, DELETE")

        // Too large: refused with 413 without reading the rest, on a fresh connection.
        let big = try server.connect()
        let tooLarge = try big.event("app", #"{"event": "willConnectToWindow", "window": "\#(String(repeating: "w", count: 4096))"}"#)
        #expect(tooLarge.status == 413 && tooLarge.json["status"] as? Int == 413)
        #expect(big.isClosedByPeer(), "the unread body is dropped with the connection")

        // A chunked body has no Content-Length: it is refused once it outgrows the limit.
        let chunked = try server.connect()
        let chunk = String(repeating: "x", count: 800)
        let hex = String(chunk.utf8.count, radix: 16)
        try #require(chunked.send(Array("POST /v1/instances/app/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\(hex)\r\n\(chunk)\r\n\(hex)\r\n\(chunk)\r\n0\r\n\r\n".utf8)))
        #expect(try chunked.readResponse().status == 413)

        let after = try snapshot(c, "app")
        #expect(after.instance == before.instance)
        #expect(after.history == before.history)
    }

    @Test("If-Match with the current version applies")
    func ifMatch() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: ["didFinishLaunching"])
        let applied = try c.event("app", #"{"event": "willConnectToWindow", "window": "w"}"#, headers: [("If-Match", "\"1\"")])
        #expect(applied.status == 200 && applied.json["version"] as? Int == 2)
        #expect(try c.event("app", #"{"event": "didBecomeActive"}"#, headers: [("If-Match", "\"1\"")]).status == 412)
        #expect(try c.event("app", #"{"event": "didBecomeActive"}"#, headers: [("If-Match", "*")]).status == 200)
    }

    @Test("actions: buffered, replaced, then delivered on entering foreground")
    func actions() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: ["didFinishLaunching", "willConnectToWindow"])
        let first = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com"}"#)
        #expect(first.status == 200 && first.json["disposition"] as? String == "buffered")
        let second = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "handleShortcutItem", "type": "newTab"}"#)
        #expect((second.json["replacedAction"] as? [String: Any])?["name"] as? String == "openURL")
        let buffered = try c.request("GET", "/v1/instances/app").json["bufferedAction"] as? [String: Any]
        #expect(buffered?["name"] as? String == "handleShortcutItem")
        let active = try c.event("app", #"{"event": "didBecomeActive"}"#)
        #expect(active.json["hooks"] as? [String] == ["Foreground.onTransition", "Foreground.didReturn", "Foreground.handle(handleShortcutItem)"])
        let handled = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL", "url": "https://example.com"}"#)
        #expect(handled.json["disposition"] as? String == "handled" && handled.json["hooks"] as? [String] == ["Foreground.handle(openURL)"])
        #expect(try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openURL"}"#).status == 422)
    }

    @Test("relaunch resets to initializing and counts launches; history pages by sequence")
    func relaunchAndHistory() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: coldStart)
        let relaunch = try c.request("POST", "/v1/instances/app/relaunches", body: [], contentType: nil)
        #expect(relaunch.status == 200 && relaunch.json["kind"] as? String == "relaunch" && relaunch.json["to"] as? String == "initializing")
        let instance = try c.request("GET", "/v1/instances/app").json
        #expect(instance["launchCount"] as? Int == 2 && instance["state"] as? String == "initializing")
        // The path relaunches had before they were named so everywhere still relaunches.
        try c.makeInstance("old-client", events: coldStart)
        let alias = try c.request("POST", "/v1/instances/old-client/launches", body: [], contentType: nil)
        #expect(alias.status == 200 && alias.json["kind"] as? String == "relaunch" && alias.json["version"] as? Int == 4)
        _ = try c.request("DELETE", "/v1/instances/old-client")

        let page1 = try c.request("GET", "/v1/instances/app/history?limit=2").json
        let items1 = try #require(page1["items"] as? [[String: Any]])
        #expect(items1.map { $0["version"] as? Int } == [1, 2])
        let next = try #require(page1["nextAfter"] as? Int)
        let page2 = try c.request("GET", "/v1/instances/app/history?after=\(next)&limit=2").json
        #expect((page2["items"] as? [[String: Any]])?.map { $0["version"] as? Int } == [3, 4])
        #expect(page2["nextAfter"] is NSNull)
        // `after` may be any sequence number, also another instance's, between this one's records.
        try c.makeInstance("other", events: ["didFinishLaunching"])
        let otherSequence = try #require((try c.fullHistory("other")).first?["sequence"] as? Int)
        _ = try c.event("app", #"{"event": "didFinishLaunching"}"#)
        let afterOther = try c.request("GET", "/v1/instances/app/history?after=\(otherSequence)").json
        #expect((afterOther["items"] as? [[String: Any]])?.map { $0["version"] as? Int } == [5])
        #expect((afterOther["items"] as? [[String: Any]])?.first?["sequence"] as? Int == otherSequence + 1)
        let afterSecond = try c.request("GET", "/v1/instances/app/history?after=\(items1[1]["sequence"] as! Int)").json
        #expect((afterSecond["items"] as? [[String: Any]])?.map { $0["version"] as? Int } == [3, 4, 5])
        #expect(page2["olderDropped"] as? Bool == false)
        #expect(try c.request("GET", "/v1/instances/app/history?limit=5000").status == 400)
        #expect(try c.request("GET", "/v1/instances/app/history?after=-1").status == 400)
    }

    @Test("static files: types, index, and nothing outside the folder")
    func staticFiles() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let index = try c.request("GET", "/")
        #expect(index.status == 200 && index.header("content-type") == "text/html; charset=utf-8")
        #expect(index.text.contains("test dashboard"))
        #expect(try c.request("GET", "/js/app.js").header("content-type") == "text/javascript; charset=utf-8")
        for path in ["/../secret.txt", "/js/../../secret.txt", "/%2e%2e/secret.txt", "/js/%2E%2E/%2e%2e/secret.txt", "/leak.txt", "/nothing.html", "/js"] {
            // Dot segments are refused (400) before routing.
            let response = try c.request("GET", path)
            #expect(response.status == (path.contains("/.") || path.contains("%2") ? 400 : 404), "\(path)")
            #expect(!response.text.contains("top secret"), "\(path)")
        }
        let post = try c.request("POST", "/index.html", body: [], contentType: nil)
        #expect(post.status == 405 && post.header("allow") == "GET, HEAD")
        #expect(try c.request("GET", "/v1/nothing").status == 404)
    }

    @Test("static files: revalidated on every use (no-cache, ETag, Last-Modified, 304), so an upgrade is picked up at once")
    func staticFileValidators() throws {
        let server = try TestServer()
        let c = try server.connect()
        let first = try c.request("GET", "/js/app.js")
        #expect(first.status == 200 && first.header("cache-control") == "no-cache")
        let etag = try #require(first.header("etag"))
        let lastModified = try #require(first.header("last-modified"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))
        #expect(lastModified.range(of: #"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$"#, options: .regularExpression) != nil, "\(lastModified)")

        for validator in [("If-None-Match", etag), ("If-None-Match", "W/\(etag)"), ("If-None-Match", "\"other\", \(etag)"), ("If-None-Match", "*"),
                          ("If-Modified-Since", lastModified)] {
            let unchanged = try c.request("GET", "/js/app.js", headers: [validator])
            #expect(unchanged.status == 304 && unchanged.body.isEmpty, "\(validator)")
            #expect(unchanged.header("etag") == etag && unchanged.header("cache-control") == "no-cache")
            // A 304 may state a length only if it is the full answer's (RFC 9110 §8.6).
            #expect(unchanged.header("content-length").map { $0 == String(first.body.count) } ?? true)
        }
        // The connection is still in step: the 304s sent no body.
        #expect(try c.request("GET", "/js/app.js", headers: [("If-None-Match", "\"other\"")]).text == "console.log('hi')")
        let head = try c.request("HEAD", "/js/app.js", headers: [("If-None-Match", "\"other\"")])
        #expect(head.status == 200 && head.header("etag") == etag)

        // An upgrade replaces the file: the browser's validator no longer matches.
        try "console.log('upgraded')".write(toFile: server.configuration.publicDirectory! + "/js/app.js", atomically: true, encoding: .utf8)
        let upgraded = try c.request("GET", "/js/app.js", headers: [("If-None-Match", etag), ("If-Modified-Since", lastModified)])
        #expect(upgraded.status == 200 && upgraded.text == "console.log('upgraded')")
        #expect(upgraded.header("etag") != nil && upgraded.header("etag") != etag)
    }

    @Test("keep-alive: two requests on one connection, no Connection: close")
    func keepAlive() throws {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("app")
        let first = try c.request("GET", "/v1/instances/app")
        let second = try c.request("GET", "/healthz")
        #expect(first.status == 200 && second.status == 200)
        #expect(first.header("connection")?.lowercased() != "close")
        #expect(second.header("connection")?.lowercased() != "close")
        #expect(!c.isClosedByPeer(waitingSeconds: 1))
    }
}
