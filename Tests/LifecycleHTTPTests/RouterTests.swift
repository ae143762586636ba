import Foundation
import Testing
@testable import LifecycleHTTP

@Suite("router")
struct RouterTests {
    @Test("path parameters, 404, 405 with Allow, HEAD as GET, deferred handlers")
    func routing() {
        var router = Router()
        router.get("/v1/things/{id}") { .text("thing \($0.parameters["id"] ?? "")") }
        router.addDeferred(.post, "/v1/things/{id}") { request, respond in respond(.text("posted \(request.parameters["id"] ?? "")", status: 201)) }
        #expect(router.respond(to: Request(method: "GET", path: "/v1/things/42")).body.bytes == Array("thing 42".utf8))
        #expect(router.respond(to: Request(method: "HEAD", path: "/v1/things/42")).status == 200)
        let posted = router.respond(to: Request(method: "POST", path: "/v1/things/7"))
        #expect(posted.status == 201 && posted.body.bytes == Array("posted 7".utf8))
        let wrong = router.respond(to: Request(method: "DELETE", path: "/v1/things/7"))
        #expect(wrong.status == 405)
        #expect(wrong.headers.first { $0.name == "Allow" }?.value == "GET, HEAD, POST")
        #expect(router.respond(to: Request(method: "GET", path: "/v1/things")).status == 404)
        #expect(router.respond(to: Request(method: "GET", path: "/v1/things/1/2")).status == 404)
    }

    @Test("a literal and a capture at one place: each path finds its route, the one added first where both match")
    func literalsAndCaptures() {
        var router = Router()
        router.get("/v1/{kind}/list") { .text("list \($0.parameters["kind"] ?? "")") }
        router.get("/v1/batch") { _ in .text("batch get") }
        router.add(.post, "/v1/batch") { _ in .text("batch post") }
        router.get("/v1/{kind}") { .text("kind \($0.parameters["kind"] ?? "")") }
        router.get("/v1/batch/list") { _ in .text("never: an earlier route matches") }
        router.add(.put, "/v1/batch/{id}/x") { .text("put \($0.parameters["id"] ?? "")") }
        let text = { (method: String, path: String) in String(decoding: router.respond(to: Request(method: method, path: path)).body.bytes ?? [], as: UTF8.self) }
        #expect(text("GET", "/v1/batch") == "batch get")
        #expect(text("POST", "/v1/batch") == "batch post")
        #expect(text("GET", "/v1/other") == "kind other")
        #expect(text("GET", "/v1/batch/list") == "list batch")
        #expect(text("PUT", "/v1/batch/7/x") == "put 7")
        // `//` is `/`: empty segments are skipped, a trailing `/` too.
        #expect(text("GET", "//v1//other/") == "kind other")
        var request = Request(method: "DELETE", path: "/v1/batch")
        router.resolve(&request)
        // The route template of a 405 is the first route added that the path matches.
        #expect(request.route == "/v1/batch" && request.endpoint == nil)
        let refused = router.respond(to: request)
        #expect(refused.status == 405 && refused.headers.first { $0.name == "Allow" }?.value == "GET, HEAD, POST")
        var put = Request(method: "PUT", path: "/v1/batch/7/x")
        router.resolve(&put)
        #expect(put.route == "/v1/batch/{id}/x" && put.parameters == ["id": "7"])
    }

    @Test("a method that is no HTTPMethod finds only the others: 405 where the path has routes, the fallback elsewhere")
    func unknownMethods() {
        var router = Router()
        router.get("/things") { _ in .text("things") }
        router.fallback = { _ in .text("fallback", status: 418) }
        for method in ["BREW", "get", "GETS", "", "PROPFIND"] {
            let response = router.respond(to: Request(method: method, path: "/things"))
            #expect(response.status == 405 && response.headers.first { $0.name == "Allow" }?.value == "GET, HEAD", "\(method)")
            #expect(router.respond(to: Request(method: method, path: "/other")).status == 418, "\(method)")
        }
        var request = Request(method: "BREW", path: "/elsewhere")
        router.resolve(&request)
        #expect(request.route == Router.fallbackTemplate)
    }

    @Test("HTTPMethod reads exactly the names it has")
    func methodNames() {
        for method in HTTPMethod.allCases { #expect(HTTPMethod(method.rawValue) == method) }
        for name in ["get", "Get", "GE", "GETT", "PUTS", "PAT", "POS", "HEADS", "X", ""] { #expect(HTTPMethod(name) == nil, "\(name)") }
        #expect(HTTPMethod.allCases.map(\.rawValue) == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"])
    }
}

@Suite("replies")
struct ReplyTests {
    @Test("waiting for a later reply returns the response another thread gives, once it gives it")
    func laterReply() {
        let reply = Reply.later { respond in
            Thread.detachNewThread {
                usleep(20_000)
                respond(.text("late", status: 202))
            }
        }
        let response = reply.wait()
        #expect(response.status == 202 && response.body.bytes == Array("late".utf8))
    }
}
