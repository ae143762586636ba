import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

@Suite("the cap on instances")
struct InstanceLimitTests {
    @Test("past --max-instances a create is 507 with a problem and changes nothing; a delete makes room")
    func limit() throws {
        let server = try TestServer(.router) { $0.maxInstances = 3 }
        let c = server.router()
        for id in ["a", "b", "c"] { #expect(try c.request("PUT", "/v1/instances/\(id)", json: "{}").status == 201) }
        let refused = try c.request("POST", "/v1/instances", json: #"{"id": "d"}"#)
        #expect(refused.status == 507 && refused.header("content-type") == "application/problem+json")
        #expect(refused.json["type"] as? String == "/problems/instance-limit" && refused.json["limit"] as? Int == 3)
        #expect(try c.request("GET", "/v1/instances/d").status == 404)
        // At the limit, a PUT of an instance that exists still finds it.
        #expect(try c.request("PUT", "/v1/instances/a", json: "{}").status == 200)
        #expect(try c.request("DELETE", "/v1/instances/b").status == 204)
        #expect(try c.request("PUT", "/v1/instances/d", json: "{}").status == 201)
        #expect(try c.request("PUT", "/v1/instances/e", json: "{}").status == 507)
        // Also after a restart, which loads what is stored.
        try server.restart()
        #expect(try server.router().request("PUT", "/v1/instances/e", json: "{}").status == 507)
    }

    @Test("creates arriving together, in one group commit, never pass the limit")
    func concurrentCreates() throws {
        let server = try TestServer { $0.maxInstances = 5 }
        let statuses = LockedValue<[Int]>([])
        let group = startClients(16, port: server.port) { index, c in
            let status = (try? c.request("PUT", "/v1/instances/i\(index)", json: "{}"))?.status ?? 0
            statuses.withLock { $0.append(status) }
        }
        group.wait()
        let answered = statuses.withLock { $0 }
        #expect(answered.filter { $0 == 201 }.count == 5 && answered.filter { $0 == 507 }.count == 11, "\(answered)")
        let listed = try server.connect().request("GET", "/v1/instances").json["items"] as? [[String: Any]]
        #expect(listed?.count == 5)
    }
}
