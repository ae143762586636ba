import Foundation
import LifecycleTestSupport
import LifecycleHTTP
import Testing
@testable import LifecycleService

@Suite("Problem types")
struct ProblemTypeTests {
    /// The `ProblemKind` enum of openapi.yaml: the names between its `enum: [` and `]`.
    static func documentedKinds() throws -> Set<String> {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        guard let schema = text.range(of: "\n    ProblemKind:\n"),
              let open = text.range(of: "enum: [", range: schema.upperBound..<text.endIndex),
              let close = text.range(of: "]", range: open.upperBound..<text.endIndex)
        else { return [] }
        return Set(text[open.upperBound..<close.lowerBound].split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
    }

    @Test("every problem kind has a page, and openapi.yaml lists exactly those kinds")
    func everyKindHasAPage() throws {
        let kinds = Set(ProblemTypes.kindsByStatus.values).union(ProblemKind.allCases.map(\.rawValue))
        #expect(Set(ProblemPages.pages.keys) == kinds)
        #expect(try Self.documentedKinds() == kinds)
        var router = Router()
        router.get("/problems/{kind}", ProblemPages.respond)
        for kind in kinds {
            let page = router.respond(to: Request(method: "GET", path: "/problems/\(kind)"))
            let html = String(decoding: page.body.bytes ?? [], as: UTF8.self)
            #expect(page.status == 200 && html.contains("<code>/problems/\(kind)</code>"), "\(kind)")
            #expect(!(ProblemPages.pages[kind]?.explanation.isEmpty ?? true), "\(kind) has no explanation")
        }
        let unknown = router.respond(to: Request(method: "GET", path: "/problems/no-such-kind"))
        #expect(unknown.status == 404)
    }

    @Test("a problem without a type of its own points at its status's page; no type names another domain")
    func defaultTypes() {
        #expect(Problem(status: 404, title: "Not Found", detail: "x").type == "/problems/not-found")
        #expect(Problem(status: 422, title: "Unprocessable Content", detail: "x").type == "/problems/unprocessable-content")
        #expect(Problem(status: 409, title: "Conflict", detail: "x", type: ProblemKind.unexpectedEvent.type).type == "/problems/unexpected-event")
        for kind in ProblemKind.allCases { #expect(kind.type.hasPrefix("/problems/")) }
    }

    @Test("the types a live server answers with resolve to their pages on it")
    func liveTypesResolve() throws {
        let server = try TestServer(.router)
        let http = server.router()
        _ = try http.request("PUT", "/v1/instances/typed")
        let unexpected = try http.event("typed", #"{"event": "didEnterBackground"}"#)
        let missing = try http.request("GET", "/v1/instances/absent")
        for answer in [unexpected, missing] {
            let type = try #require(answer.json["type"] as? String)
            #expect(type.hasPrefix("/problems/"))
            let page = try http.request("GET", type)
            #expect(page.status == 200, "\(type)")
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
        }
        #expect(unexpected.status == 409 && unexpected.json["type"] as? String == "/problems/unexpected-event")
    }
}
