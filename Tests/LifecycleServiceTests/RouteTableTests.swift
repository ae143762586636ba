import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleHTTP
@testable import LifecycleService

/// Every route of the API answered through the service's own middlewares and router, without
/// a socket (``RouterClient``): one row per route, and a route added without a row fails.
/// What each handler answers in detail is in the suites of its feature; this is the floor.
@Suite("every route through the router")
struct RouteTableTests {
    /// One request and what it must get: its route's pattern, its status, and a fragment of its body (none for an empty one).
    struct Row {
        var method: String
        var target: String
        var json: String?
        var pattern: String
        var status: Int
        var says: String
    }

    /// In order: the instance rows build on each other, and the last deletes it.
    static let rows: [Row] = [
        Row(method: "GET", target: "/healthz", pattern: "/healthz", status: 200, says: #""status":"ok""#),
        Row(method: "GET", target: "/metrics", pattern: "/metrics", status: 200, says: "# TYPE"),
        Row(method: "GET", target: "/problems/not-found", pattern: "/problems/{kind}", status: 200, says: "/problems/not-found"),
        Row(method: "GET", target: "/v1/models", pattern: "/v1/models", status: 200, says: #""name":"ios-app""#),
        Row(method: "GET", target: "/v1/models/ios-app", pattern: "/v1/models/{model}", status: 200, says: #""name":"ios-app""#),
        Row(method: "GET", target: "/v1/models/ios-app/graph.dot", pattern: "/v1/models/{model}/graph.dot", status: 200, says: "digraph"),
        Row(method: "GET", target: "/v1/models/nope/graph.svg", pattern: "/v1/models/{model}/graph.svg", status: 404, says: #"no model \"nope\""#),
        Row(method: "GET", target: "/v1/models/ios-app/coverage", pattern: "/v1/models/{model}/coverage", status: 200, says: #""model":"ios-app""#),
        Row(
            method: "POST", target: "/v1/models/ios-app/conformance", json: #"{"steps": [{"event": "didFinishLaunching"}]}"#,
            pattern: "/v1/models/{model}/conformance", status: 200, says: #""conforming":true"#
        ),
        Row(method: "GET", target: "/v1/models/ios-app/scenarios", pattern: "/v1/models/{model}/scenarios", status: 200, says: "cold-start"),
        Row(method: "POST", target: "/v1/models/ios-app/scenarios/cold-start", json: "", pattern: "/v1/models/{model}/scenarios/{name}", status: 200, says: "cold-start"),
        Row(method: "POST", target: "/v1/instances", json: #"{"id": "posted"}"#, pattern: "/v1/instances", status: 201, says: #""id":"posted""#),
        Row(method: "PUT", target: "/v1/instances/app", json: #"{"model": "ios-app"}"#, pattern: "/v1/instances/{id}", status: 201, says: #""id":"app""#),
        Row(method: "GET", target: "/v1/instances?model=ios-app", pattern: "/v1/instances", status: 200, says: #""id":"app""#),
        Row(method: "GET", target: "/v1/instances/app", pattern: "/v1/instances/{id}", status: 200, says: #""model":"ios-app""#),
        Row(
            method: "POST", target: "/v1/instances/app/events", json: #"{"event": "didFinishLaunching"}"#,
            pattern: "/v1/instances/{id}/events", status: 200, says: #""event":"didFinishLaunching""#
        ),
        Row(
            method: "POST", target: "/v1/instances/app/actions", json: #"{"action": "launchRocket"}"#,
            pattern: "/v1/instances/{id}/actions", status: 422, says: "launchRocket"
        ),
        Row(method: "POST", target: "/v1/instances/app/relaunches", json: "{}", pattern: "/v1/instances/{id}/relaunches", status: 200, says: #""relaunch""#),
        Row(method: "POST", target: "/v1/instances/app/launches", json: "{}", pattern: "/v1/instances/{id}/launches", status: 200, says: #""relaunch""#),
        Row(method: "POST", target: "/v1/instances/app/gaps", json: #"{"dropped": 2}"#, pattern: "/v1/instances/{id}/gaps", status: 200, says: #""dropped":2"#),
        Row(
            method: "POST", target: "/v1/batch", json: #"{"items": [{"instance": "app", "kind": "gap", "body": {"dropped": 1}}]}"#,
            pattern: "/v1/batch", status: 200, says: #""status":200"#
        ),
        Row(method: "GET", target: "/v1/instances/app/history?limit=2", pattern: "/v1/instances/{id}/history", status: 200, says: #""nextAfter":"#),
        Row(method: "GET", target: "/v1/findings?model=ios-app", pattern: "/v1/findings", status: 200, says: #""items":"#),
        // A stream never ends: what the router answers itself is its refusals; the wire's
        // suites (StreamEndpointTests) read the streams.
        Row(method: "GET", target: "/v1/instances/nope/stream", pattern: "/v1/instances/{id}/stream", status: 404, says: "nope"),
        Row(method: "GET", target: "/v1/stream?outcome=sideways", pattern: "/v1/stream", status: 400, says: "sideways"),
        Row(method: "DELETE", target: "/v1/instances/app", pattern: "/v1/instances/{id}", status: 204, says: ""),
    ]

    @Test("each route answers its row, and every route has one")
    func everyRoute() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let service = try #require(server.service)
        let router = API(registry: service.registry, staticFiles: nil, metrics: service.metrics).makeRouter()
        var covered: Set<String> = []
        for row in Self.rows {
            var request = Request(method: row.method, path: String(row.target.prefix { $0 != "?" }))
            router.resolve(&request)
            #expect(request.route == row.pattern && request.endpoint != nil, "\(row.method) \(row.target) is routed to \(row.pattern)")
            covered.insert("\(row.method) \(row.pattern)")
            let body = row.json.map { Array($0.utf8) }
            let response = try c.request(row.method, row.target, body: body, contentType: row.json?.isEmpty == false ? "application/json" : nil)
            #expect(response.status == row.status, "\(row.method) \(row.target): \(response.text.prefix(300))")
            #expect(row.says.isEmpty || response.text.contains(row.says), "\(row.method) \(row.target): \(response.text.prefix(300))")
        }
        #expect(covered == Set(router.routeList.map { "\($0.method.rawValue) \($0.pattern)" }))
    }

    @Test("answers no route gives: 405 with Allow, HEAD as GET, an unknown method, the fallback")
    func answersAroundTheRoutes() throws {
        let c = try TestServer(.router).router()
        try c.makeInstance("app")
        let patch = try c.request("PATCH", "/v1/instances/app")
        #expect(patch.status == 405 && patch.header("allow") == "GET, HEAD, PUT, DELETE")
        let unknown = try c.request("BREW", "/v1/instances")
        #expect(unknown.status == 405 && unknown.header("allow") == "GET, HEAD, POST")
        let head = try c.request("HEAD", "/v1/instances/app")
        let get = try c.request("GET", "/v1/instances/app")
        #expect(head.status == 200 && head.body.isEmpty && head.header("etag") == get.header("etag"))
        #expect(try c.request("GET", "/v1/nothing").status == 404)
        #expect(try c.request("GET", "/v1/instances/app/history/more").status == 404)
        // `//` is `/`, and a trailing `/` names the same route.
        #expect(try c.request("GET", "//v1//instances/app/").status == 200)
        let dashboard = try c.request("GET", "/")
        #expect(dashboard.status == 200 && dashboard.text.contains("test dashboard"))
        #expect(try c.request("BREW", "/").status == 405)
    }
}
