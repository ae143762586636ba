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
