import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService
import LifecycleStore

/// `GET /metrics` on the real service: what it answers is read by prometheus_client's parser
/// (Tests/metrics/parse.py) and its values are checked against what the API shows.
@Suite("GET /metrics")
struct MetricsTests {
    static let instanceRoute = "/v1/instances/{id}"
    static let launch = #"{"event": "didFinishLaunching"}"#
    static let connect = #"{"event": "willConnectToWindow", "window": "main"}"#

    @Test("after a known sequence of requests every value is what the API shows: transitions, unexpected events, incomplete launches, relaunches, instances, commits, streams, requests")
    func valuesMatchTheAPI() throws {
        let server = try TestServer()
        let c = CountingConnection(try server.connect())
        func event(_ id: String, _ json: String) throws -> HTTPResponse {
            try c.request("POST", "/v1/instances/\(id)/events", route: "/v1/instances/{id}/events", json: json)
        }
        // a: a cold start, then the background, and an action (which transitions nothing).
        #expect(try c.request("PUT", "/v1/instances/a", route: Self.instanceRoute, json: "{}").status == 201)
        for json in [Self.launch, Self.connect, #"{"event": "didBecomeActive"}"#, #"{"event": "didEnterBackground"}"#] {
            #expect(try event("a", json).status == 200)
        }
        let action = #"{"action": "openURL", "url": "https://example.com"}"#
        #expect(try c.request("POST", "/v1/instances/a/actions", route: "/v1/instances/{id}/actions", json: action).status == 200)
        // b: connected, then relaunched before it reached foreground or background: the next
        // launch finds that one incomplete.
        #expect(try c.request("PUT", "/v1/instances/b", route: Self.instanceRoute, json: "{}").status == 201)
        #expect(try event("b", Self.launch).status == 200)
        #expect(try event("b", Self.connect).status == 200)
        #expect(try c.request("POST", "/v1/instances/b/relaunches", route: "/v1/instances/{id}/relaunches").status == 200)
        let relaunched = try event("b", Self.launch)
        #expect(relaunched.status == 200 && relaunched.json["incompleteLaunch"] != nil, "\(relaunched.text)")
        // c: an unexpected event (recorded, 409), then one the model does not have (refused, 422).
        #expect(try c.request("PUT", "/v1/instances/c", route: Self.instanceRoute, json: "{}").status == 201)
        #expect(try event("c", #"{"event": "didBecomeActive"}"#).status == 409)
        #expect(try event("c", #"{"event": "noSuchEvent"}"#).status == 422)
        // d: the other model.
        #expect(try c.request("PUT", "/v1/instances/d", route: Self.instanceRoute, json: #"{"model": "android-activity"}"#).status == 201)
        #expect(try event("d", #"{"event": "onCreate"}"#).status == 200)
        #expect(try event("d", #"{"event": "onStart"}"#).status == 200)
        // e: made and deleted; then a missing instance and a page nothing serves.
        #expect(try c.request("POST", "/v1/instances", route: "/v1/instances", json: #"{"id": "e"}"#).status == 201)
        #expect(try c.request("DELETE", "/v1/instances/e", route: Self.instanceRoute).status == 204)
        #expect(try c.request("GET", "/v1/instances/e", route: Self.instanceRoute).status == 404)
        #expect(try c.request("GET", "/no/such/page", route: "*").status == 404)
        let writes = c.answered.filter { ["PUT", "POST", "DELETE"].contains($0.key[0]) }.values.reduce(0, +)

        let first = try c.scrape()

        // Transitions, unexpected events, incomplete launches and relaunches, as the histories tell.
        var transitions: [[String]: Double] = [:]
        var unexpected: [[String]: Double] = [:]
        var incomplete: [[String]: Double] = [["ios-app"]: 0, ["android-activity"]: 0]
        var relaunches: [[String]: Double] = [["ios-app"]: 0, ["android-activity"]: 0]
        for (id, model) in [("a", "ios-app"), ("b", "ios-app"), ("c", "ios-app"), ("d", "android-activity")] {
            let history = try c.request("GET", "/v1/instances/\(id)/history?limit=1000", route: "/v1/instances/{id}/history")
            for record in history.json["items"] as? [[String: Any]] ?? [] {
                let (from, to) = (record["from"] as? String ?? "?", record["to"] as? String ?? "?")
                switch record["kind"] as? String {
                case "event":
                    let name = record["event"] as? String ?? "?"
                    transitions[[model, from, name, to], default: 0] += 1
                    if record["outcome"] as? String == "unexpected" { unexpected[[model, from, name], default: 0] += 1 }
                    if record["incompleteLaunch"] != nil { incomplete[[model], default: 0] += 1 }
                case "relaunch":
                    relaunches[[model], default: 0] += 1
                default:
                    continue
                }
            }
        }
        #expect(transitions[["ios-app", "initializing", "didFinishLaunching", "launching"]] == 3)
        #expect(transitions[["ios-app", "connected", "didBecomeActive", "foreground"]] == 1)
        #expect(transitions.values.reduce(0, +) == 10)
        #expect(first.series("lifecycled_transitions_total", by: ["model", "from", "event", "to"]) == transitions)
        #expect(unexpected == [["ios-app", "initializing", "didBecomeActive"]: 1])
        #expect(first.series("lifecycled_unexpected_events_total", by: ["model", "state", "event"]) == unexpected)
        #expect(incomplete == [["ios-app"]: 1, ["android-activity"]: 0])
        #expect(first.series("lifecycled_incomplete_launches_total", by: ["model"]) == incomplete)
        #expect(relaunches == [["ios-app"]: 1, ["android-activity"]: 0])
        #expect(first.series("lifecycled_relaunches_total", by: ["model"]) == relaunches)
        // The refused event made no series.
        #expect(!first.text.contains("noSuchEvent"))

        // Instances by model and state: every state of both models, each what the list holds.
        let instances = first.series("lifecycled_instances", by: ["model", "state"])
        #expect(instances.count == 12)
        #expect(instances[["ios-app", "background"]] == 1 && instances[["ios-app", "launching"]] == 1)
        #expect(instances[["ios-app", "initializing"]] == 1 && instances[["android-activity", "started"]] == 1)
        #expect(instances.values.reduce(0, +) == 4)
        for (labels, count) in instances {
            let page = try c.request("GET", "/v1/instances?model=\(labels[0])&state=\(labels[1])&limit=1000", route: "/v1/instances")
            #expect(Double((page.json["items"] as? [Any])?.count ?? -1) == count, "\(labels)")
        }

        // Each write reached the committer once; commits are timed once each.
        #expect(first.value("lifecycled_store_commit_writes_sum") == writes)
        let commits = try #require(first.value("lifecycled_store_commit_writes_count"))
        #expect(commits >= 1 && commits <= writes)
        #expect(first.value("lifecycled_store_commit_duration_seconds_count") == commits)
        #expect(first.value("lifecycled_store_commit_duration_seconds_bucket", ["le": "+Inf"]) == commits)
        // The file sizes are the SQLite store's: PostgreSQL's files are not the service's to report.
        if !TestStore.isPostgres {
            #expect((first.value("lifecycled_store_wal_bytes") ?? 0) > 0)
            #expect((first.value("lifecycled_store_database_bytes") ?? 0) > 0)
        }

        // Streams: one subscriber while it is open, none once it has gone.
        #expect(first.value("lifecycled_stream_subscribers") == 0)
        let stream = try EventStream(port: server.port, path: "/v1/stream")
        #expect(stream.status == 200)
        c.count("GET", "/v1/stream", 200)
        #expect(try c.scrape().value("lifecycled_stream_subscribers") == 1)
        stream.disconnect()
        let deadline = Date().addingTimeInterval(10)
        var subscribers = 1.0
        while subscribers != 0, Date() < deadline { subscribers = try c.scrape().value("lifecycled_stream_subscribers") ?? -1 }
        #expect(subscribers == 0)
        #expect(first.value("lifecycled_stream_subscribers_dropped_total") == 0)

        // Requests by method, route template and status, as made (a scrape counts from the next).
        let last = try c.connection.scrape()
        #expect(last.series("lifecycled_http_requests_total", by: ["method", "route", "status"]) == c.answered)
        var timed: [[String]: Double] = [:]
        for (labels, count) in c.answered { timed[[labels[0], labels[1]], default: 0] += count }
        #expect(last.series("lifecycled_http_request_duration_seconds_count", by: ["method", "route"]) == timed)
    }

    @Test("requests answered on several threads at once (each thread counts apart, summed at the scrape) are each counted once")
    func concurrentRequests() throws {
        let server = try TestServer { $0.threads = 4 }
        let c = try server.connect()
        let before = try c.scrape().series("lifecycled_http_requests_total", by: ["method", "route", "status"])
        let clients = 8, rounds = 150
        let counted = LockedValue<[[String]: Double]>([:])
        let errors = LockedValue<[String]>([])
        startClients(clients, port: server.port) { client, connection in
            let c = CountingConnection(connection)
            do {
                let id = "m\(client)"
                guard try c.request("PUT", "/v1/instances/\(id)", route: Self.instanceRoute, json: "{}").status == 201 else { throw HTTPClientError(description: "PUT \(id)") }
                for json in [Self.launch, Self.connect, #"{"event": "didBecomeActive"}"#] {
                    _ = try c.request("POST", "/v1/instances/\(id)/events", route: "/v1/instances/{id}/events", json: json)
                }
                for round in 0..<rounds {
                    _ = try c.request("GET", "/v1/instances/\(id)", route: Self.instanceRoute)
                    _ = try c.request("GET", "/v1/instances/missing-\(client)", route: Self.instanceRoute)
                    // Answered from the committer's thread.
                    let event = round % 2 == 0 ? "willResignActive" : "didBecomeActive"
                    _ = try c.request("POST", "/v1/instances/\(id)/events", route: "/v1/instances/{id}/events", json: #"{"event": "\#(event)"}"#)
                }
            } catch {
                errors.withLock { $0.append("client \(client): \(error)") }
            }
            counted.withLock { counted in counted.merge(c.answered, uniquingKeysWith: +) }
        }.wait()
        #expect(errors.withLock { $0 } == [])
        var expected = counted.withLock { $0 }
        expected.merge(before, uniquingKeysWith: +)
        expected[["GET", "/metrics", "200"], default: 0] += 1
        #expect(expected[["GET", Self.instanceRoute, "404"]] == Double(clients * rounds))
        #expect(expected[["POST", "/v1/instances/{id}/events", "200"]] == Double(clients * (rounds + 3)))

        let after = try c.scrape()
        #expect(after.series("lifecycled_http_requests_total", by: ["method", "route", "status"]) == expected)
        var timed: [[String]: Double] = [:]
        for (labels, count) in expected { timed[[labels[0], labels[1]], default: 0] += count }
        #expect(after.series("lifecycled_http_request_duration_seconds_count", by: ["method", "route"]) == timed)
        #expect(after.series("lifecycled_http_request_duration_seconds_bucket", by: ["method", "route", "le"]).filter { $0.key[2] == "+Inf" }
            == Dictionary(uniqueKeysWithValues: timed.map { ($0.key + ["+Inf"], $0.value) }))
    }

    @Test("a stream subscriber closed for falling behind is counted as dropped")
    func droppedSubscriber() throws {
        let server = try TestServer { $0.streamBuffer = 8 * 1024 }
        let c = try server.connect()
        try c.makeInstance("o", events: coldStart)
        let stuck = try EventStream(port: server.port, path: "/v1/stream", receiveBuffer: 4096)
        #expect(try c.scrape().value("lifecycled_stream_subscribers_dropped_total") == 0)
        // Far more than the socket buffers and the stream's budget hold (as StreamEndpointTests.overflow).
        let url = "https://example.com/" + String(repeating: "a", count: 8000)
        for _ in 0..<800 {
            #expect(try c.request("POST", "/v1/instances/o/actions", json: #"{"action": "openURL", "url": "\#(url)"}"#).status == 200)
        }
        var last: StreamEvent?
        while let event = stuck.next(timeout: 10) { last = event }
        #expect(last?.type == "overflow")
        let scrape = try c.scrape()
        #expect(scrape.value("lifecycled_stream_subscribers_dropped_total") == 1)
        #expect(scrape.value("lifecycled_stream_subscribers") == 0)
    }

    @Test("divergences are counted by model, the record's to and kind, one per kind a record shows, as the histories tell: events (unexpected ones too) and actions")
    func divergences() throws {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("m")
        let bodies = [
            // missingHook, in launching.
            #"{"event": "didFinishLaunching", "ranHooks": []}"#,
            // state and extraHook, in connected: two kinds of one record.
            #"{"event": "willConnectToWindow", "window": "main", "believedState": "foreground", "ranHooks": ["Connected.init", "Connected.init"]}"#,
            // hookOrder, in foreground.
            #"{"event": "didBecomeActive", "ranHooks": ["Foreground.didReturn", "Foreground.onTransition"]}"#,
            // An unexpected event's state divergence, in its from (its to).
            #"{"event": "willEnterForeground", "believedState": "background"}"#,
            // A report that agrees is no divergence.
            #"{"event": "willResignActive", "believedState": "foreground", "ranHooks": ["Foreground.willLeave"]}"#,
        ]
        for body in bodies {
            let answer = try c.event("m", body)
            #expect(answer.status == 200 || answer.status == 409, "\(body): \(answer.text)")
        }
        #expect(try c.request("POST", "/v1/instances/m/actions", json: #"{"action": "openURL", "url": "https://duckduckgo.com", "believedState": "background"}"#).status == 200)
        // A relaunch reports nothing (the app's machine starts again): no divergence.
        #expect(try c.request("POST", "/v1/instances/m/relaunches", json: #"{"occurredAt": "2026-12-02T05:00:00Z"}"#).status == 200)
        try c.makeInstance("n", model: "android-activity")
        #expect(try c.event("n", #"{"event": "onCreate", "believedState": "started"}"#).status == 200)

        var expected: [[String]: Double] = [:]
        for (id, model) in [("m", "ios-app"), ("n", "android-activity")] {
            for record in try c.fullHistory(id) {
                guard let divergence = record["divergence"] as? [String: Any], let to = record["to"] as? String else { continue }
                let hooks = divergence["hooks"] as? [String: Any]
                var kinds: [String] = []
                if divergence["state"] != nil { kinds.append("state") }
                if (hooks?["missing"] as? [String])?.isEmpty == false { kinds.append("missingHook") }
                if (hooks?["extra"] as? [String])?.isEmpty == false { kinds.append("extraHook") }
                if hooks?["orderOnly"] as? Bool == true { kinds.append("hookOrder") }
                for kind in kinds { expected[[model, to, kind], default: 0] += 1 }
            }
        }
        #expect(expected[["ios-app", "launching", "missingHook"]] == 1)
        #expect(expected[["ios-app", "connected", "state"]] == 1 && expected[["ios-app", "connected", "extraHook"]] == 1)
        #expect(expected[["ios-app", "foreground", "hookOrder"]] == 1)
        #expect(expected[["ios-app", "foreground", "state"]] == 2, "the unexpected event's and the action's")
        #expect(expected[["android-activity", "created", "state"]] == 1)
        let scraped = try c.scrape()
        #expect(scraped.series("lifecycled_divergences_total", by: ["model", "state", "kind"]) == expected)
        #expect(scraped.families["lifecycled_divergences"]?.type == "counter")
        let counters = try c.request("GET", "/v1/instances/m").json["counters"] as? [String: Any]
        #expect(counters?["divergences"] as? Int == 5, "the instance counts records, the metric kinds: \(String(describing: counters))")
    }

    @Test("one transaction's records, several to a series and series that differ in one label only, are each counted once")
    func oneTransactionsRecords() throws {
        let server = try TestServer()
        let c = try server.connect()
        // One batch: one transaction. Three instances of one model take the same three
        // transitions; the fourth, of the other model, two of its own; two unexpected events
        // differ only in their state, and an ignored event's series from a transition's only in its from.
        var items: [BatchItemSpec] = []
        for id in ["a", "b", "c"] {
            items.append(BatchItemSpec(instance: id, kind: .create, body: "{}"))
            for body in [Self.launch, Self.connect, #"{"event": "didBecomeActive"}"#] { items.append(BatchItemSpec(instance: id, kind: .event, body: body)) }
        }
        items.append(BatchItemSpec(instance: "a", kind: .event, body: #"{"event": "willEnterForeground"}"#))
        items.append(BatchItemSpec(instance: "b", kind: .event, body: #"{"event": "didEnterBackground"}"#))
        items.append(BatchItemSpec(instance: "b", kind: .event, body: #"{"event": "didEnterBackground"}"#))
        items.append(BatchItemSpec(instance: "e", kind: .create, body: "{}"))
        items.append(BatchItemSpec(instance: "e", kind: .event, body: #"{"event": "willEnterForeground"}"#))
        items.append(BatchItemSpec(instance: "d", kind: .create, body: #"{"model": "android-activity"}"#))
        for event in ["onCreate", "onStart"] { items.append(BatchItemSpec(instance: "d", kind: .event, body: #"{"event": "\#(event)"}"#)) }
        let answer = try c.request("POST", "/v1/batch", json: batchBody(items))
        #expect(answer.status == 200, "\(answer.text)")
        let scraped = try c.scrape()
        #expect(metricValue(scraped.text, "lifecycled_store_commit_writes_count") == 1, "the batch is one transaction")
        #expect(scraped.series("lifecycled_transitions_total", by: ["model", "from", "event", "to"]) == [
            ["ios-app", "initializing", "didFinishLaunching", "launching"]: 3,
            ["ios-app", "launching", "willConnectToWindow", "connected"]: 3,
            ["ios-app", "connected", "didBecomeActive", "foreground"]: 3,
            ["ios-app", "foreground", "willEnterForeground", "foreground"]: 1,
            ["ios-app", "foreground", "didEnterBackground", "background"]: 1,
            ["ios-app", "background", "didEnterBackground", "background"]: 1,
            ["ios-app", "initializing", "willEnterForeground", "initializing"]: 1,
            ["android-activity", "initialized", "onCreate", "created"]: 1,
            ["android-activity", "created", "onStart", "started"]: 1,
        ])
        #expect(scraped.series("lifecycled_unexpected_events_total", by: ["model", "state", "event"]) == [
            ["ios-app", "foreground", "willEnterForeground"]: 1, ["ios-app", "initializing", "willEnterForeground"]: 1,
        ])
    }

    @Test("instances by model and state are read from stored data, so a restart shows the same; counters since the process started begin again and say so")
    func restart() throws {
        let server = try TestServer()
        var c = try server.connect()
        try c.makeInstance("f", events: coldStart)
        try c.makeInstance("g", events: ["didFinishLaunching"])
        try c.makeInstance("h", model: "android-activity", events: ["onCreate"])
        #expect(try c.event("h", #"{"event": "onResume"}"#).status == 409)
        #expect(try c.event("g", #"{"event": "didFinishLaunching", "believedState": "foreground"}"#).status == 409)
        let before = try c.scrape()
        let findings = before.series("lifecycled_findings", by: ["kind"])
        #expect(findings == [["unexpected"]: 2, ["divergence"]: 1, ["incompleteLaunch"]: 0, ["gap"]: 0])
        let instances = before.series("lifecycled_instances", by: ["model", "state"])
        #expect(instances[["ios-app", "foreground"]] == 1 && instances[["ios-app", "launching"]] == 1 && instances[["android-activity", "created"]] == 1)
        #expect(instances.values.reduce(0, +) == 3)
        #expect(before.samples("lifecycled_transitions_total").count == 6, "four and the two unexpected events")

        try server.restart()
        c = try server.connect()
        let after = try c.scrape()
        #expect(after.series("lifecycled_instances", by: ["model", "state"]) == instances)
        #expect(after.series("lifecycled_findings", by: ["kind"]) == findings)
        for (labels, count) in instances where count > 0 {
            let page = try c.request("GET", "/v1/instances?model=\(labels[0])&state=\(labels[1])")
            #expect(Double((page.json["items"] as? [Any])?.count ?? -1) == count, "\(labels)")
        }
        #expect(after.samples("lifecycled_transitions_total").isEmpty)
        for family in ["lifecycled_transitions", "lifecycled_unexpected_events", "lifecycled_divergences", "lifecycled_incomplete_launches", "lifecycled_relaunches"] {
            #expect(after.families[family]?.help.contains("Not kept across restarts") == true, "\(family)")
        }
        #expect(try #require(after.value("lifecycled_process_start_time_seconds")) >= before.value("lifecycled_process_start_time_seconds") ?? .infinity)
    }

    @Test("a scrape is answered while a transaction is open and a write waits for it in the committer")
    func scrapeDoesNotWaitForCommits() throws {
        let server = try TestServer()
        let c = try server.connect()
        try c.makeInstance("w", events: coldStart)
        let store = server.service!.store
        let inTransaction = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let failure = Failure()
        Thread.detachNewThread {
            do {
                try store.write { (_: any StoreTransaction) throws(StoreError) in
                    inTransaction.signal()
                    release.wait()
                }
            } catch {
                failure.message.withLock { $0 = "\(error)" }
            }
            finished.signal()
        }
        inTransaction.wait()
        var isReleased = false
        defer { if !isReleased { release.signal() } }
        // A write, which the committer takes and then waits on the open transaction with.
        let writer = try server.connect()
        let body = #"{"event": "didEnterBackground"}"#
        try #require(writer.send(Array("POST /v1/instances/w/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)))

        // Answered now (the client gives up after 30 s, failing the test, if it waited).
        let during = try c.scrape()
        #expect(during.value("lifecycled_instances", ["model": "ios-app", "state": "foreground"]) == 1)
        #expect(during.series("lifecycled_transitions_total", by: ["from", "event"])[["foreground", "didEnterBackground"]] == nil)

        release.signal()
        isReleased = true
        finished.wait()
        #expect(failure.message.withLock { $0 } == nil)
        #expect(try writer.readResponse().status == 200)
        let after = try c.scrape()
        #expect(after.value("lifecycled_instances", ["model": "ios-app", "state": "background"]) == 1)
        #expect(after.series("lifecycled_transitions_total", by: ["from", "event"])[["foreground", "didEnterBackground"]] == 1)
    }

    @Test("--metrics off: no /metrics route (404), and the service works as before")
    func metricsOff() throws {
        let server = try TestServer(.router) { $0.metrics = false }
        let c = server.router()
        #expect(server.service!.metrics == nil)
        #expect(try c.makeInstance("x", events: coldStart).status == 200)
        #expect(try c.request("GET", "/metrics").status == 404)
        let on = try TestServer(.router)
        #expect(try on.router().request("GET", "/metrics").status == 200)
    }

    @Test("label values and help text are escaped as the format requires, and histograms count at or under each bound: the real parser reads back what was written")
    func escapingAndBuckets() throws {
        let awkward = "back\\slash \"quoted\"\nnext line {braces}, comma=equals"
        let help = "a \\ backslash, a\nline feed and \"quotes\""
        let counter = CounterFamily("lifecycled_test_total", labels: ["model", "state"], help: help)
        counter.increment([awkward, ""])
        counter.add([([awkward, ""], 2), (["plain", "x"], 1)])
        let histogram = HistogramFamily("lifecycled_test_seconds", labels: ["route"], bounds: [0.001, 0.5, 2], help: "h")
        // Binary fractions, so that the sum is exact whatever the order of additions.
        for value in [0.0009765625, 0.5, 3] { histogram.observe(value, ["/a"]) }
        var exposition = Exposition()
        counter.write(to: &exposition)
        histogram.write(to: &exposition)

        let parsed = try Scrape(parsing: exposition.text)
        #expect(parsed.value("lifecycled_test_total", ["model": awkward, "state": ""]) == 3)
        #expect(parsed.value("lifecycled_test_total", ["model": "plain", "state": "x"]) == 1)
        #expect(parsed.families["lifecycled_test"]?.help == help)
        #expect(parsed.families["lifecycled_test"]?.type == "counter")
        let buckets = parsed.series("lifecycled_test_seconds_bucket", by: ["route", "le"])
        #expect(buckets == [["/a", "0.001"]: 1, ["/a", "0.5"]: 2, ["/a", "2"]: 2, ["/a", "+Inf"]: 3])
        #expect(parsed.value("lifecycled_test_seconds_sum", ["route": "/a"]) == 3.5009765625)
        #expect(parsed.value("lifecycled_test_seconds_count", ["route": "/a"]) == 3)
    }

    @Test("the real parser refuses what the format does not allow (so the checks above can fail)")
    func parserRefusesMalformedText() {
        // An unescaped quote in a label value, a sample without HELP and TYPE, a histogram without +Inf.
        for text in [
            "# HELP x_total h\n# TYPE x_total counter\nx_total{a=\"b\"c\"} 1\n",
            "y 1\n",
            "# HELP z h\n# TYPE z histogram\nz_bucket{le=\"1\"} 1\nz_sum 1\nz_count 1\n",
        ] {
            #expect(throws: HTTPClientError.self, "\(text)") { try Scrape(parsing: text) }
        }
    }
}

/// What a helper thread failed with, for the test to check once it has finished.
private final class Failure: Sendable {
    let message = LockedValue<String?>(nil)
}
