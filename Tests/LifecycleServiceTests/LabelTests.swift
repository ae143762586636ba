import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

@Suite("instance labels")
struct LabelTests {
    @Test("labels round-trip through POST, PUT and a batch create, and survive a restart")
    func roundTrip() throws {
        let server = try TestServer()
        let c = server.router()
        let posted = try c.request("POST", "/v1/instances", json: #"{"id": "a", "labels": {"app.version": "2.1", "run": "r-1"}}"#)
        #expect(posted.status == 201 && posted.json["labels"] as? [String: String] == ["app.version": "2.1", "run": "r-1"])
        let put = try c.request("PUT", "/v1/instances/b", json: #"{"labels": {"run": "r-1", "device.model": "iPhone15,2"}}"#)
        #expect(put.status == 201 && put.json["labels"] as? [String: String] == ["run": "r-1", "device.model": "iPhone15,2"])
        let batch = try c.request("POST", "/v1/batch", json: #"{"items": [{"instance": "c", "kind": "create", "body": {"labels": {"run": "r-2"}}}]}"#)
        #expect(batch.status == 200)
        #expect(try c.request("GET", "/v1/instances/c").json["labels"] as? [String: String] == ["run": "r-2"])
        // Without labels: an empty object, never absent.
        let plain = try c.request("PUT", "/v1/instances/d", json: "{}")
        #expect(plain.json["labels"] as? [String: String] == [:])

        try server.restart()
        let again = server.router()
        #expect(try again.request("GET", "/v1/instances/a").json["labels"] as? [String: String] == ["app.version": "2.1", "run": "r-1"])
        #expect(try again.request("GET", "/v1/instances/b").json["labels"] as? [String: String] == ["run": "r-1", "device.model": "iPhone15,2"])
        #expect(try again.request("GET", "/v1/instances/d").json["labels"] as? [String: String] == [:])
        // The index is rebuilt from the store.
        #expect(try listed(again, "label=run=r-1") == ["a", "b"])
    }

    @Test("bad labels are 422 naming the member, and nothing is stored")
    func badLabels() throws {
        let server = try TestServer()
        let c = server.router()
        let cases: [(String, String)] = [
            (#"{"app version": "1"}"#, "labels.app version"),
            (#"{"run": ""}"#, "labels.run"),
            (#"{"run": 7}"#, "labels.run"),
            (#"{"run": "a\u0007b"}"#, "labels.run"),
            (#"{"run": "\#(String(repeating: "x", count: 257))"}"#, "labels.run"),
            (#"{"\#(String(repeating: "k", count: 65))": "v"}"#, "labels.kkkk"),
            ("[\"run\"]", "\"labels\""),
            ("{" + (0..<17).map { #""k\#($0)": "v""# }.joined(separator: ",") + "}", "at most 16"),
        ]
        for (labels, member) in cases {
            for (method, path, body) in [
                ("POST", "/v1/instances", #"{"id": "x", "labels": \#(labels)}"#), ("PUT", "/v1/instances/x", #"{"labels": \#(labels)}"#),
            ] {
                let answer = try c.request(method, path, json: body)
                #expect(answer.status == 422, "\(method) \(labels)")
                #expect((answer.json["detail"] as? String)?.contains(member) == true, "\(answer.json["detail"] ?? "")")
            }
            let batch = try c.request("POST", "/v1/batch", json: #"{"items": [{"instance": "x", "kind": "create", "body": {"labels": \#(labels)}}]}"#)
            #expect((batch.json["results"] as? [[String: Any]])?.first?["status"] as? Int == 422)
        }
        #expect(try c.request("GET", "/v1/instances/x").status == 404)
        // Sixteen is allowed, and a NUL is refused by the check every body has.
        let sixteen = "{" + (0..<16).map { #""k\#($0)": "v""# }.joined(separator: ",") + "}"
        #expect(try c.request("PUT", "/v1/instances/x", json: #"{"labels": \#(sixteen)}"#).status == 201)
        #expect(try c.request("PUT", "/v1/instances/y", json: #"{"labels": {"run": "a\u0000"}}"#).status == 422)
    }

    @Test("labels are part of a create's idempotency fingerprint")
    func fingerprint() throws {
        let server = try TestServer()
        let c = server.router()
        let key = [("Idempotency-Key", "k-1")]
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "f", "labels": {"run": "1"}}"#, headers: key).status == 201)
        #expect(try c.request("POST", "/v1/instances", json: #"{"labels": {"run": "1"}, "id": "f"}"#, headers: key).status == 201)
        #expect(try c.request("POST", "/v1/instances", json: #"{"id": "f", "labels": {"run": "2"}}"#, headers: key).status == 422)
    }

    @Test("the list filters by labels, all of them, and pages by cursor; a bad label is 400")
    func listByLabel() throws {
        let server = try TestServer()
        let c = server.router()
        for i in 0..<12 {
            let labels = #"{"run": "r\#(i % 3)", "app.version": "\#(i % 2 == 0 ? "1.0" : "2.0")"}"#
            #expect(try c.request("PUT", "/v1/instances/i-\(String(format: "%02d", i))", json: #"{"labels": \#(labels)}"#).status == 201)
        }
        #expect(try c.event("i-03", #"{"event": "didFinishLaunching"}"#).status == 200)
        #expect(try listed(c, "label=run=r0") == ["i-00", "i-03", "i-06", "i-09"])
        #expect(try listed(c, "label=run=r0&label=app.version=2.0") == ["i-03", "i-09"])
        #expect(try listed(c, "label=run=r0&state=launching") == ["i-03"])
        #expect(try listed(c, "label=run=r9").isEmpty)
        let first = try c.request("GET", "/v1/instances?label=run=r1&limit=2")
        #expect((first.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["i-01", "i-04"])
        let cursor = try #require(first.json["nextCursor"] as? String)
        #expect(try listed(c, "label=run=r1&cursor=\(cursor)") == ["i-07", "i-10"])
        // A value holding "=" splits at the first.
        #expect(try c.request("PUT", "/v1/instances/eq", json: #"{"labels": {"expr": "a=b"}}"#).status == 201)
        #expect(try listed(c, "label=expr=a%3Db") == ["eq"])
        for bad in ["label=run", "label==x", "label=run=", "label=bad%20key=x"] {
            #expect(try c.request("GET", "/v1/instances?\(bad)").status == 400, "\(bad)")
        }
        // Deleted instances leave the label's list.
        #expect(try c.request("DELETE", "/v1/instances/i-00").status == 204)
        #expect(try listed(c, "label=run=r0") == ["i-03", "i-06", "i-09"])
        let before = server.service!.registry.instancesReadByLists
        _ = try listed(c, "label=run=r0&label=app.version=2.0")
        #expect(server.service!.registry.instancesReadByLists - before == 2)
    }
}

/// The ids a list answers with `query`, one page.
func listed(_ c: some APIClient, _ query: String) throws -> [String] {
    let answer = try c.request("GET", "/v1/instances?\(query)")
    #expect(answer.status == 200, "\(query): \(answer.json)")
    return (answer.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
}
