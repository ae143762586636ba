import Foundation
import LifecycleTestSupport
import LifecycleHTTP
import LifecycleLocks
import Testing
@testable import LifecycleService
@testable import LifecycleStore

/// A write's answer, as the API sends it.
typealias Answer = Response

/// Runs `queue` while the committer is held inside the completion of an earlier write (a
/// refused delete, which touches nothing), then lets it go: it takes what was queued at once.
func holdingTheCommitter(_ registry: InstanceRegistry, _ queue: () -> Void) {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    registry.submit(.delete(id: "batch-holder", expected: nil)) { _ in
        entered.signal()
        release.wait()
    }
    entered.wait()
    queue()
    release.signal()
}

/// Submits `writes` straight to the registry so that the committer takes them as ONE batch.
func commitAsOneBatch(_ registry: InstanceRegistry, _ writes: [InstanceRegistry.Write]) throws -> [Answer] {
    let answers = LockedValue<[Int: Answer]>([:])
    let group = DispatchGroup()
    holdingTheCommitter(registry) {
        for (index, write) in writes.enumerated() {
            group.enter()
            registry.submit(write) { answer in
                answers.withLock { $0[index] = Response(answer) }
                group.leave()
            }
        }
    }
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
    .apply(.event(name, [:]), id: id, expected: version.map { [InstanceRegistry.InstanceTag(version: $0)] }, key: nil)
}

extension Response {
    /// The body as JSON.
    private var bodyJSON: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.bytes ?? []))) as? [String: Any] ?? [:]
    }

    /// The detail of a problem.
    var detail: String? {
        status >= 400 ? bodyJSON["detail"] as? String : nil
    }

    /// The body of a successful answer as JSON.
    var json: [String: Any] {
        status < 300 ? bodyJSON : [:]
    }
}

@Suite("failed group commits", .sqliteOnly("a trigger in the SQLite file fails the writes"))
struct BatchFailureTests {
    @Test("a write that fails on its own fails alone: the rest of its batch commits, durably")
    func failingWriteFailsAlone() throws {
        let server = try TestServer(.router)
        var c = server.router()
        for id in ["h0", "h1", "h2", "h3", "h4", "bad"] { try c.makeInstance(id, events: coldStart) }
        try poison(server, "poison", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")

        let answers = try commitAsOneBatch(server.service!.registry, [
            event("willResignActive", on: "h0"),
            event("willResignActive", on: "h1"),
            event("willResignActive", on: "bad"),
            .create(id: "fresh", model: "ios-app", isPut: false, key: nil),
            event("didEnterBackground", on: "h2"),
            .apply(.action("openURL", ["url": .string("https://duckduckgo.com")]), id: "bad", expected: nil, key: nil),
            .delete(id: "h3", expected: nil),
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
        c = server.router()
        #expect(try state() == before, "what was answered is what was stored")
    }

    @Test("a batch item that fails on its own is that item's 503, with Retry-After on the batch; the other items commit")
    func failingBatchItemFailsAlone() throws {
        let server = try TestServer(.router)
        let c = server.router()
        for id in ["h0", "bad"] { try c.makeInstance(id, events: coldStart) }
        try poison(server, "poison", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")
        let answer = try c.request("POST", "/v1/batch", json: batchBody([
            BatchItemSpec(instance: "h0", kind: .event, body: #"{"event":"willResignActive"}"#),
            BatchItemSpec(instance: "bad", kind: .event, body: #"{"event":"willResignActive"}"#),
            BatchItemSpec(instance: "fresh", kind: .create),
            BatchItemSpec(instance: "h0", kind: .event, body: #"{"event":"didEnterBackground"}"#),
        ]))
        #expect(answer.status == 200)
        #expect(answer.header("retry-after") == "2")
        let results = try #require(answer.json["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? Int } == [200, 503, 201, 200])
        #expect((results[1]["problem"] as? [String: Any])?["detail"] as? String == "storage failed; nothing was changed")
        #expect(try c.fullHistory("h0").count == 5)
        #expect(try c.fullHistory("bad").count == 3)
        #expect(try c.request("GET", "/healthz").status == 200, "a write refused for its own data says nothing about the store's health")
    }

    // Items of the same batch as a failing write used to keep refusals decided against writes
    // the failure rolled back. Each test below has two batches: [write W, request R that W
    // decides, failing write on another instance], where W must commit and R's refusal must
    // match it; and [failing W, R], where R must be decided against what is stored without W.

    @Test("after a failed batch, a create's refusals and answers match whether the create is stored")
    func failedCreate() throws {
        let server = try TestServer(.router)
        var c = server.router()
        try c.makeInstance("bad", events: coldStart)
        try poison(server, "poison_records", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")
        try poison(server, "poison_instances", "BEFORE INSERT ON instances WHEN NEW.id = 'ghost'")
        let registry = server.service!.registry

        let rolledBack = try commitAsOneBatch(registry, [
            .create(id: "made", model: "ios-app", isPut: false, key: nil),
            .create(id: "made", model: "ios-app", isPut: false, key: nil),
            .create(id: "made", model: "ios-app", isPut: true, key: nil),
            event("willResignActive", on: "bad"),
        ])
        // The second create's 409 says "made" exists: so it must be stored.
        #expect(rolledBack.map(\.status) == [201, 409, 200, 503])

        let failed = try commitAsOneBatch(registry, [
            .create(id: "ghost", model: "ios-app", isPut: false, key: nil),
            .create(id: "ghost", model: "ios-app", isPut: false, key: nil),
            .create(id: "ghost", model: "ios-app", isPut: true, key: nil),
            event("didFinishLaunching", on: "ghost"),
            .create(id: "other", model: "ios-app", isPut: false, key: nil),
        ])
        // Each create of "ghost" tried to store it and failed; nothing exists to apply an event to.
        #expect(failed.map(\.status) == [503, 503, 503, 404, 201])
        try server.restart()
        c = server.router()
        #expect(try c.request("GET", "/v1/instances/made").status == 200)
        #expect(try c.request("GET", "/v1/instances/ghost").status == 404)
        #expect(try c.request("GET", "/v1/instances/other").status == 200)
    }

    @Test("after a failed batch, a delete's 404s and answers match whether the delete is stored")
    func failedDelete() throws {
        let server = try TestServer(.router)
        var c = server.router()
        for id in ["bad", "gone", "keeper"] { try c.makeInstance(id, events: coldStart) }
        try poison(server, "poison_records", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")
        try poison(server, "poison_delete", "BEFORE DELETE ON instances WHEN OLD.id = 'keeper'")
        let registry = server.service!.registry

        let rolledBack = try commitAsOneBatch(registry, [
            .delete(id: "gone", expected: nil),
            event("willResignActive", on: "gone"),
            event("willResignActive", on: "bad"),
        ])
        // The event's 404 says "gone" is gone: so its delete must be stored.
        #expect(rolledBack.map(\.status) == [204, 404, 503])

        let failed = try commitAsOneBatch(registry, [
            .delete(id: "keeper", expected: nil),
            event("willResignActive", on: "keeper"),
            .delete(id: "keeper", expected: nil),
            event("didEnterBackground", on: "keeper"),
        ])
        #expect(failed.map(\.status) == [503, 200, 503, 200])
        #expect(failed[1].json["version"] as? Int == 4 && failed[3].json["version"] as? Int == 5)
        try server.restart()
        c = server.router()
        #expect(try c.request("GET", "/v1/instances/gone").status == 404)
        let keeper = try c.request("GET", "/v1/instances/keeper").json
        #expect(keeper["version"] as? Int == 5 && keeper["state"] as? String == "background")
        #expect(try c.fullHistory("keeper").map { $0["version"] as? Int } == [1, 2, 3, 4, 5])
    }

    @Test("after a failed batch, If-Match is decided against the version actually stored")
    func failedEventThenIfMatch() throws {
        let server = try TestServer(.router)
        var c = server.router()
        for id in ["bad", "app", "tv"] { try c.makeInstance(id, events: coldStart) }
        try poison(server, "poison_records", "BEFORE INSERT ON records WHEN NEW.instance = 'bad'")
        try poison(server, "poison_resign", #"BEFORE INSERT ON records WHEN NEW.instance = 'app' AND CAST(NEW.body AS TEXT) LIKE '%"willResignActive"%'"#)
        let registry = server.service!.registry

        let rolledBack = try commitAsOneBatch(registry, [
            event("didEnterBackground", on: "tv"),
            event("didBecomeActive", on: "tv", ifMatch: 3),
            event("willResignActive", on: "bad"),
        ])
        // The 412 says "tv" is at version 4: so the first event must be stored.
        #expect(rolledBack.map(\.status) == [200, 412, 503])
        #expect(rolledBack[1].detail?.hasPrefix("instance \"tv\" is at version 4 (ETag \"4-") == true, "\(rolledBack[1])")

        let failed = try commitAsOneBatch(registry, [
            event("willResignActive", on: "app"),
            event("didEnterBackground", on: "app", ifMatch: 3),
            event("didBecomeActive", on: "app", ifMatch: 4),
            event("didEnterBackground", on: "app", ifMatch: 4),
        ])
        #expect(failed.map(\.status) == [503, 200, 200, 412])
        #expect(failed[3].detail?.hasPrefix("instance \"app\" is at version 5 (ETag \"5-") == true, "\(failed[3])")
        try server.restart()
        c = server.router()
        let tv = try c.request("GET", "/v1/instances/tv").json
        #expect(tv["version"] as? Int == 4 && tv["state"] as? String == "background")
        let app = try c.request("GET", "/v1/instances/app").json
        #expect(app["version"] as? Int == 5 && app["state"] as? String == "foreground")
        let history = try c.fullHistory("app")
        #expect(history.map { $0["event"] as? String } == coldStart + ["didEnterBackground", "didBecomeActive"])
    }

    /// Writes submitted straight to the committer, each answer kept under a name.
    final class NamedJobs: Sendable {
        private let answers = LockedValue<[String: Answer]>([:])
        private let group = DispatchGroup()

        func job(_ name: String, _ write: InstanceRegistry.Write) -> CommitJob {
            group.enter()
            return CommitJob(write: write, requestID: "") { [answers, group] answer in
                answers.withLock { $0[name] = Response(answer) }
                group.leave()
            }
        }

        func creates(_ ids: [String]) -> [CommitJob] {
            ids.map { job($0, .create(id: $0, model: "ios-app", isPut: false, key: nil)) }
        }

        /// Every answer, once all have come.
        func answered() throws -> [String: Answer] {
            guard group.wait(timeout: .now() + 60) == .success else { throw HTTPClientError(description: "the writes were not answered") }
            return answers.withLock { $0 }
        }
    }

    /// Three groups queued at once: the first, larger than a transaction takes with another,
    /// goes alone; `second` is decided while it commits, against what it leaves (a third, which
    /// does not fit beside the second, waits behind it: with nothing waiting, nothing is decided
    /// ahead). Returns the first's and third's ids.
    func decideAhead(_ registry: InstanceRegistry, _ jobs: NamedJobs, first: [String], second: [CommitJob]) -> [String] {
        let later = (0..<Committer.maxBatch - second.count + 1).map { "b\($0)" }
        holdingTheCommitter(registry) {
            registry.submit(group: jobs.creates(first))
            registry.submit(group: second)
            registry.submit(group: jobs.creates(later))
        }
        return later
    }

    @Test("a batch decided while the one before it commits sees what that one leaves")
    func batchDecidedAheadOfAnother() throws {
        let server = try TestServer(.router)
        let jobs = NamedJobs()
        let creates = (0...Committer.maxBatch).map { "a\($0)" }
        // (Nothing in the second may fail its transaction: decided again, it would be right anyway.)
        let later = decideAhead(server.service!.registry, jobs, first: creates, second: [
            jobs.job("event on a0", event("didFinishLaunching", on: "a0")), jobs.job("event on a1", event("didFinishLaunching", on: "a1")),
        ])
        let answered = try jobs.answered()
        #expect((creates + later).allSatisfy { answered[$0]?.status == 201 })
        #expect(["a0", "a1"].allSatisfy { answered["event on \($0)"]?.status == 200 }, "they exist: made by the batch committing")
        #expect(try server.router().request("GET", "/v1/instances/a1").json["version"] as? Int == 1)
    }

    @Test("a batch decided while the one before it commits is decided again when that one fails, against what it stored")
    func batchDecidedAheadOfAFailedOne() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try poison(server, "poison", "BEFORE INSERT ON instances WHEN NEW.id = 'x'")
        let jobs = NamedJobs()
        // The first fails (its create of x).
        let creates = (0..<Committer.maxBatch).map { "a\($0)" } + ["x"]
        let later = decideAhead(server.service!.registry, jobs, first: creates, second: [
            jobs.job("event on x", event("didFinishLaunching", on: "x")), jobs.job("event on a0", event("didFinishLaunching", on: "a0")),
        ])
        let answered = try jobs.answered()
        #expect(answered["x"]?.status == 503)
        #expect(creates.dropLast().allSatisfy { answered[$0]?.status == 201 }, "the rest of the failed group commits in smaller groups")
        #expect(answered["event on x"]?.status == 404, "decided again: x was never stored")
        #expect(answered["event on a0"]?.status == 200 && answered["event on a0"]?.json["version"] as? Int == 1)
        #expect(later.allSatisfy { answered[$0]?.status == 201 })
        #expect(try c.request("GET", "/v1/instances/x").status == 404)
        #expect(try c.request("GET", "/v1/instances/a0").json["version"] as? Int == 1)
    }

    @Test("/healthz answers 503 with the reason while the store cannot commit, and 200 once it can")
    func healthReportsStorage() throws {
        let server = try TestServer(.router) { $0.maxDatabasePages = 19 }  // the schema (a page a table and index) and a few records
        let c = server.router()
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
        #expect(health.json["writesNeedToken"] as? Bool == false && health.json["readsNeedToken"] as? Bool == false, "what needs a token, while failing too")
        // Refusals and reads commit nothing, so they do not show the store works again.
        #expect(try c.event("nobody", #"{"event": "didBecomeActive"}"#).status == 404)
        #expect(try c.request("GET", "/healthz").status == 503)
        // A full store fails a whole batch alike: no write in it is its own cause, none is retried.
        let version = try #require(try c.request("GET", "/v1/instances/app").json["version"] as? Int)
        let window = String(repeating: "w", count: 200)
        let batch = try commitAsOneBatch(server.service!.registry, (0..<4).map { i in
            .apply(.event("willConnectToWindow", ["window": .string("\(window)-batch-\(i)")]), id: "app", expected: nil, key: nil)
        } + [.delete(id: "nobody", expected: nil)])
        #expect(batch.map(\.status) == [503, 503, 503, 503, 503])
        #expect(batch.allSatisfy { $0.detail == "the disk is full; nothing was changed" })
        #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == version)
        #expect(try c.request("GET", "/healthz").status == 503)

        // Deleting the instance frees its pages; the next write commits and health returns.
        #expect(try c.request("DELETE", "/v1/instances/app").status == 204)
        #expect(try c.request("GET", "/healthz").status == 200)
    }
}
