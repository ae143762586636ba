import Foundation
import MicroHTTP
import Synchronization
import Testing
@testable import LifecycleService
@testable import LifecycleStore

typealias Answer = Result<InstanceRegistry.Reply, Problem>

/// Submits `writes` straight to the registry so that the committer takes them as ONE batch:
/// it is held inside the completion of an earlier write (a refused delete, which touches
/// nothing) until all of them are queued, and then takes everything pending at once.
func commitAsOneBatch(_ registry: InstanceRegistry, _ writes: [InstanceRegistry.Write]) throws -> [Answer] {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    registry.submit(.delete(id: "batch-holder")) { _ in
        entered.signal()
        release.wait()
    }
    entered.wait()
    let answers = Mutex<[Int: Answer]>([:])
    let group = DispatchGroup()
    for (index, write) in writes.enumerated() {
        group.enter()
        registry.submit(write) { answer in
            answers.withLock { $0[index] = answer }
            group.leave()
        }
    }
    release.signal()
    guard group.wait(timeout: .now() + 60) == .success else { throw HTTPClientError(description: "the batch was not answered") }
    return answers.withLock { all in writes.indices.map { all[$0]! } }
}

/// Installs a trigger in the service's real database that makes SQLite refuse some writes,
/// as a failing disk sector or a constraint would: a deterministic failure of chosen writes.
func poison(_ server: TestServer, _ name: String, _ condition: String) throws {
    let database = try Database(path: server.dataDirectory + "/" + SQLiteStore.fileName)
    try database.execute("CREATE TRIGGER \(name) \(condition) BEGIN SELECT RAISE(ABORT, 'injected failure'); END;")
}

func event(_ name: String, on id: String, ifMatch version: Int64? = nil) -> InstanceRegistry.Write {
    .apply(.event(name, [:]), id: id, expectedVersion: version, key: nil)
}

extension Result where Success == InstanceRegistry.Reply, Failure == Problem {
    var status: Int {
        switch self {
        case .success(let reply): reply.response.status
        case .failure(let problem): problem.status
        }
    }

    var detail: String? {
        if case .failure(let problem) = self { problem.detail } else { nil }
    }

    /// The body of a successful answer as JSON.
    var json: [String: Any] {
        guard case .success(let reply) = self else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(reply.response.body))) as? [String: Any] ?? [:]
    }
}

@Suite("failed group commits")
struct BatchFailureTests {
    @Test("a write that fails on its own fails alone: the rest of its batch commits, durably")
    func failingWriteFailsAlone() throws {
        let server = try TestServer()
        var c = try server.connect()
        for id in ["h0", "h1", "h2", "h3", "h4", "bad"] { try c.makeInstance(id, events: coldStart) }
        try poison(server, "poison", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")

        let answers = try commitAsOneBatch(server.service!.registry, [
            event("willResignActive", on: "h0"),
            event("willResignActive", on: "h1"),
            event("willResignActive", on: "bad"),
            .create(id: "fresh", model: "ios-app", isPut: false, key: nil),
            event("didEnterBackground", on: "h2"),
            .apply(.action("openURL", ["url": .string("https://duckduckgo.com")]), id: "bad", expectedVersion: nil, key: nil),
            .delete(id: "h3"),
            event("didEnterBackground", on: "h4"),
        ])
        #expect(answers.map(\.status) == [200, 200, 503, 201, 200, 503, 204, 200])
        #expect(answers[2].detail == "storage failed; nothing was changed")
        #expect(answers[4].json["to"] as? String == "background" && answers[4].json["version"] as? Int == 4)
        let sequences = answers.compactMap { $0.json["sequence"] as? Int }
        #expect(sequences == sequences.sorted() && Set(sequences).count == 4, "the committed records are numbered in order")

        // A write refused for its own data says nothing about the store's health.
        #expect(try c.request("GET", "/healthz").status == 200)

        func state() throws -> [String: [UInt8]] {
            var bodies: [String: [UInt8]] = [:]
            for id in ["h0", "h1", "h2", "h3", "h4", "bad", "fresh"] {
                bodies[id] = try c.request("GET", "/v1/instances/\(id)").body + Array("|".utf8) + c.request("GET", "/v1/instances/\(id)/history").body
            }
            return bodies
        }
        #expect(try c.request("GET", "/v1/instances/bad").json["version"] as? Int == 3)
        #expect(try c.request("GET", "/v1/instances/h3").status == 404)
        #expect(try c.request("GET", "/v1/instances/fresh").status == 200)
        let before = try state()
        try server.restart()
        c = try server.connect()
        #expect(try state() == before, "what was answered is what was stored")
    }

    @Test("a create that failed does not turn later writes to its id into 409 or success")
    func failedCreate() throws {
        let server = try TestServer()
        var c = try server.connect()
        try poison(server, "poison", "BEFORE INSERT ON instances WHEN NEW.id = 'ghost'")
        let answers = try commitAsOneBatch(server.service!.registry, [
            .create(id: "ghost", model: "ios-app", isPut: false, key: nil),
            .create(id: "ghost", model: "ios-app", isPut: false, key: nil),
            .create(id: "ghost", model: "ios-app", isPut: true, key: nil),
            event("didFinishLaunching", on: "ghost"),
            .create(id: "other", model: "ios-app", isPut: false, key: nil),
        ])
        // Each create of "ghost" tried to store it and failed; nothing exists to apply an event to.
        #expect(answers.map(\.status) == [503, 503, 503, 404, 201])
        #expect(try c.request("GET", "/v1/instances/ghost").status == 404)
        try server.restart()
        c = try server.connect()
        #expect(try c.request("GET", "/v1/instances/ghost").status == 404)
        #expect(try c.request("GET", "/v1/instances/other").status == 200)
    }

    @Test("a delete that failed does not turn later writes to the instance into 404")
    func failedDelete() throws {
        let server = try TestServer()
        var c = try server.connect()
        try c.makeInstance("keeper", events: coldStart)
        try poison(server, "poison", "BEFORE DELETE ON instances WHEN OLD.id = 'keeper'")
        let answers = try commitAsOneBatch(server.service!.registry, [
            .delete(id: "keeper"),
            event("willResignActive", on: "keeper"),
            .delete(id: "keeper"),
            event("didEnterBackground", on: "keeper"),
        ])
        #expect(answers.map(\.status) == [503, 200, 503, 200])
        #expect(answers[1].json["version"] as? Int == 4 && answers[3].json["version"] as? Int == 5)
        try server.restart()
        c = try server.connect()
        let keeper = try c.request("GET", "/v1/instances/keeper").json
        #expect(keeper["version"] as? Int == 5 && keeper["state"] as? String == "background")
        #expect(try c.fullHistory("keeper").map { $0["version"] as? Int } == [1, 2, 3, 4, 5])
    }

    @Test("an event that failed does not make If-Match against the stored version a 412")
    func failedEventThenIfMatch() throws {
        let server = try TestServer()
        var c = try server.connect()
        try c.makeInstance("app", events: coldStart)
        try poison(server, "poison", #"BEFORE INSERT ON records WHEN NEW.instance = 'app' AND CAST(NEW.body AS TEXT) LIKE '%"willResignActive"%'"#)
        let answers = try commitAsOneBatch(server.service!.registry, [
            event("willResignActive", on: "app"),
            event("didEnterBackground", on: "app", ifMatch: 3),
            event("didBecomeActive", on: "app", ifMatch: 4),
            event("didEnterBackground", on: "app", ifMatch: 4),
        ])
        #expect(answers.map(\.status) == [503, 200, 200, 412])
        #expect(answers[3].detail == "instance \"app\" is at version 5, not 4")
        try server.restart()
        c = try server.connect()
        let app = try c.request("GET", "/v1/instances/app").json
        #expect(app["version"] as? Int == 5 && app["state"] as? String == "foreground")
        let history = try c.fullHistory("app")
        #expect(history.map { $0["event"] as? String } == coldStart + ["didEnterBackground", "didBecomeActive"])
    }

    @Test("/healthz answers 503 with the reason while the store cannot commit, and 200 once it can")
    func healthReportsStorage() throws {
        let server = try TestServer { $0.maxDatabasePages = 12 }
        let c = try server.connect()
        #expect(try c.request("GET", "/healthz").status == 200)
        try c.makeInstance("app", events: ["didFinishLaunching"])
        var refused: HTTPResponse?
        for i in 0..<2000 {
            let response = try c.event("app", #"{"event": "willConnectToWindow", "window": "\#(String(repeating: "w", count: 200))-\#(i)"}"#)
            if response.status != 200 {
                refused = response
                break
            }
        }
        #expect(try #require(refused).status == 503)
        let health = try c.request("GET", "/healthz")
        #expect(health.status == 503 && health.header("content-type") == "application/problem+json")
        #expect(health.json["status"] as? Int == 503)
        #expect((health.json["detail"] as? String)?.hasPrefix("storage cannot commit writes: ") == true)
        #expect((health.json["detail"] as? String)?.contains("full") == true)
        #expect(health.json["failingSince"] is String)
        // Refusals and reads commit nothing, so they do not show the store works again.
        #expect(try c.event("nobody", #"{"event": "didBecomeActive"}"#).status == 404)
        #expect(try c.request("GET", "/healthz").status == 503)

        // Deleting the instance frees its pages; the next write commits and health returns.
        #expect(try c.request("DELETE", "/v1/instances/app").status == 204)
        #expect(try c.request("GET", "/healthz").status == 200)
    }
}
