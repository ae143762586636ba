import Foundation
import LifecycleTestSupport
import LifecycleLocks
import Testing
@testable import LifecycleService

@Suite("list index and names")
struct ListIndexTests {
    @Test("a filtered page reads only matching instances, however many others there are")
    func filteredPageIsBounded() throws {
        let server = try TestServer(.router)
        let registry = server.service!.registry
        let count = 20_000
        let ids = (0..<count).map { String(format: "i-%05d", $0) }
        let group = DispatchGroup()
        let created = LockedValue<Int>(0)
        for id in ids {
            group.enter()
            registry.submit(.create(id: id, model: "ios-app", isPut: true, key: nil)) { answer in
                if case .success(.created) = answer { created.withLock { $0 += 1 } }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 120) == .success)
        #expect(created.withLock { $0 } == count)
        let c = server.router()
        #expect(try c.event("i-19999", #"{"event": "didFinishLaunching"}"#).status == 200)

        let before = registry.instancesReadByLists
        #expect(registry.list(ListFilter(model: nil, state: "launching"), after: nil, limit: 100).items.map(\.id) == ["i-19999"])
        #expect(registry.list(ListFilter(model: nil, state: "foreground"), after: nil, limit: 100).items.isEmpty)
        #expect(registry.list(ListFilter(model: "android-activity", state: nil), after: nil, limit: 100).items.isEmpty)
        #expect(registry.list(ListFilter(model: "ios-app", state: "launching"), after: nil, limit: 100).items.map(\.id) == ["i-19999"])
        #expect(registry.list(ListFilter(model: "android-activity", state: "initializing"), after: nil, limit: 100).items.isEmpty)
        let page = registry.list(ListFilter(model: nil, state: "initializing"), after: "i-19990", limit: 5)
        #expect(page.items.map(\.id) == ["i-19991", "i-19992", "i-19993", "i-19994", "i-19995"] && page.hasMore)
        let last = registry.list(ListFilter(model: "ios-app", state: "initializing"), after: "i-19996", limit: 5)
        #expect(last.items.map(\.id) == ["i-19997", "i-19998"] && !last.hasMore)
        // Nine matching instances were listed; a scan would have read all 20,000 six times.
        #expect(registry.instancesReadByLists - before == 9)

        let none = try c.request("GET", "/v1/instances?state=foreground")
        #expect(none.status == 200 && (none.json["items"] as? [Any])?.isEmpty == true && none.json["nextCursor"] is NSNull)
    }

    @Test("the index follows every change: transitions, relaunches, deletes, and a re-create with another model")
    func indexMatchesInstances() throws {
        let server = try TestServer(.router)
        let c = server.router()
        let iosPaths: [[String]] = [[], ["didFinishLaunching"], coldStart, coldStart + ["didEnterBackground"]]
        let androidPaths: [[String]] = [[], ["onCreate"], ["onCreate", "onStart"], ["onCreate", "onStart", "onResume"]]
        for i in 0..<40 {
            let id = String(format: "n-%02d", i)
            if i % 2 == 0 {
                try c.makeInstance(id, events: iosPaths[i / 2 % 4])
            } else {
                try c.makeInstance(id, model: "android-activity", events: androidPaths[i / 2 % 4])
            }
        }
        for id in ["n-03", "n-17", "n-28"] { #expect(try c.request("DELETE", "/v1/instances/\(id)").status == 204) }
        #expect(try c.request("POST", "/v1/instances/n-06/relaunches", body: [], contentType: nil).status == 200)
        // Counted problems: incomplete launches (relaunched with a scene connected, counted when
        // the next launch starts), unexpected events, and both.
        for id in ["n-02", "n-18"] {
            #expect(try c.event(id, #"{"event": "willConnectToWindow", "window": "main"}"#).status == 200)
            #expect(try c.request("POST", "/v1/instances/\(id)/relaunches", body: [], contentType: nil).status == 200)
            #expect(try c.event(id, #"{"event": "didFinishLaunching"}"#).status == 200)
        }
        for id in ["n-00", "n-18", "n-24"] { #expect(try c.event(id, #"{"event": "didBecomeActive"}"#).status == 409) }
        // Divergences: a wrong belief on an unexpected event (n-24: both flags) and a wrong hook on an expected one.
        #expect(try c.event("n-24", #"{"event": "didBecomeActive", "believedState": "foreground"}"#).status == 409)
        #expect(try c.event("n-08", #"{"event": "didFinishLaunching", "ranHooks": []}"#).status == 200)
        // Deleted and made again with the other model in one batch: one staged change for the id.
        let answers = try commitAsOneBatch(server.service!.registry, [
            .delete(id: "n-10", expected: nil), .create(id: "n-10", model: "android-activity", isPut: false, key: nil),
            .delete(id: "n-11", expected: nil), .create(id: "n-11", model: "ios-app", isPut: true, key: nil),
            event("didFinishLaunching", on: "n-11"),
        ])
        #expect(answers.map(\.status) == [204, 201, 204, 201, 200])

        /// Every filter, paged 3 at a time, against the unfiltered list filtered here.
        func checkEveryFilter(_ c: some APIClient) throws {
            func ids(_ query: String) throws -> [String] {
                var seen: [String] = []
                var cursor: String?
                repeat {
                    let page = try c.request("GET", "/v1/instances?limit=3" + query + (cursor.map { "&cursor=\($0)" } ?? "")).json
                    seen += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    cursor = page["nextCursor"] as? String
                } while cursor != nil
                return seen
            }
            let everything = try #require(c.request("GET", "/v1/instances?limit=1000").json["items"] as? [[String: Any]])
            #expect(everything.count == 37)
            func counter(_ instance: [String: Any], _ name: String) -> Int { (instance["counters"] as? [String: Any])?[name] as? Int ?? 0 }
            var matched = 0
            var flagged: [String: Int] = [:]
            for model in [nil, "ios-app", "android-activity"] {
                for state in [nil] + server.service!.registry.stateNames {
                    for flags in 0..<8 {
                        let (unexpected, incomplete, divergent) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0)
                        let expected = everything.filter { instance in
                            (model == nil || instance["model"] as? String == model) && (state == nil || instance["state"] as? String == state)
                                && (!unexpected || counter(instance, "unexpected") > 0) && (!incomplete || counter(instance, "incompleteLaunches") > 0)
                                && (!divergent || counter(instance, "divergences") > 0)
                        }.compactMap { $0["id"] as? String }
                        let query = (model.map { "&model=\($0)" } ?? "") + (state.map { "&state=\($0)" } ?? "")
                            + (unexpected ? "&hasUnexpected=true" : "") + (incomplete ? "&hasIncompleteLaunch=true" : "")
                            + (divergent ? "&hasDivergence=true" : "")
                        #expect(try ids(query) == expected, "\(query)")
                        matched += expected.count
                        if model == nil, state == nil { flagged["\(unexpected) \(incomplete) \(divergent)"] = expected.count }
                    }
                }
            }
            #expect(matched > 37 * 3, "the filters matched something")
            #expect(
                flagged == [
                    "false false false": 37, "true false false": 3, "false true false": 2, "true true false": 1,
                    "false false true": 2, "true false true": 1, "false true true": 0, "true true true": 0,
                ],
                "each flag, and each pair but one, matched some"
            )
        }
        try checkEveryFilter(c)
        // Start-up builds the index in one pass from the store: the same answers.
        try server.restart()
        try checkEveryFilter(server.router())
    }

    @Test("a filter value no loaded model has is refused with 400 naming the valid ones")
    func unknownFilterValues() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app")
        let state = try c.request("GET", "/v1/instances?state=nope")
        #expect(state.status == 400 && state.header("content-type") == "application/problem+json")
        let states = server.service!.registry.stateNames
        #expect(states.contains("foreground") && states.contains("resumed") && states == states.sorted())
        #expect(state.json["detail"] as? String == "no loaded model has a state \"nope\"; valid states: \(states.joined(separator: ", "))")
        let typo = try c.request("GET", "/v1/instances?state=foregrund")
        #expect(typo.status == 400 && (typo.json["detail"] as? String)?.contains("did you mean \"foreground\"?") == true)
        let model = try c.request("GET", "/v1/instances?model=nokia")
        #expect(model.status == 400)
        #expect(model.json["detail"] as? String == "no model \"nokia\" is loaded; valid models: android-activity, ios-app")
        #expect(try c.request("GET", "/v1/instances?state=").status == 400)
        // The problem flags take only true: "false" would read as "only those without", which no list offers.
        for query in ["hasUnexpected=false", "hasUnexpected=1", "hasIncompleteLaunch=", "hasIncompleteLaunch=yes", "hasDivergence=false"] {
            let refused = try c.request("GET", "/v1/instances?\(query)")
            #expect(refused.status == 400 && (refused.json["detail"] as? String)?.contains("takes only true") == true, "\(query)")
        }
        // Valid names that happen to match nothing together are an empty page, not an error.
        let empty = try c.request("GET", "/v1/instances?model=android-activity&state=foreground")
        #expect(empty.status == 200 && (empty.json["items"] as? [Any])?.isEmpty == true)
    }

    @Test("an unknown event or action is refused with 422 suggesting the closest name")
    func unknownNames() throws {
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("app", events: ["didFinishLaunching", "willConnectToWindow"])
        let event = try c.event("app", #"{"event": "didBecomeActiv"}"#)
        #expect(event.status == 422)
        #expect((event.json["detail"] as? String)?.hasPrefix("model \"ios-app\" has no event \"didBecomeActiv\"; did you mean \"didBecomeActive\"?") == true)
        let action = try c.request("POST", "/v1/instances/app/actions", json: #"{"action": "openUrl", "url": "https://duckduckgo.com"}"#)
        #expect(action.status == 422)
        #expect((action.json["detail"] as? String)?.hasPrefix("model \"ios-app\" has no action \"openUrl\"; did you mean \"openURL\"?") == true)
        #expect(try c.request("GET", "/v1/instances/app").json["version"] as? Int == 2, "nothing was applied")
    }
}

@Suite("sorted id chunks", .sqliteOnly("a data structure; opens no store"))
struct SortedIDsTests {
    /// `appended`: ids first appended in order, as start-up files them, before the changes.
    @Test("inserts, removals and pages agree with a plain sorted array across many chunks", arguments: [0, 1000])
    func matchesSortedArray(appended: Int) {
        var ids = SortedIDs()
        var reference: [String] = []
        for i in 0..<appended {
            ids.append(greatest: String(format: "id-%05d", i * 4))
            reference.append(String(format: "id-%05d", i * 4))
        }
        #expect(ids.count == reference.count && ids.page(after: nil, limit: Int.max).ids == reference)
        // A fixed linear congruential sequence: the same operations on every run.
        var seed: UInt64 = 42
        func next(_ bound: Int) -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int((seed >> 33) % UInt64(bound))
        }
        var largest = 0
        for step in 0..<20_000 {
            let id = String(format: "id-%05d", next(4000))
            let position = reference.firstIndex { $0 >= id } ?? reference.count
            let present = position < reference.count && reference[position] == id
            // Mostly inserts at first, mostly removals later, so chunks split and then empty.
            if next(100) < (step < 12_000 ? 75 : 20) {
                #expect(ids.insert(id) == !present)
                if !present { reference.insert(id, at: position) }
                largest = max(largest, reference.count)
            } else {
                #expect(ids.remove(id) == present)
                if present { reference.remove(at: position) }
            }
            if step % 1000 == 999 {
                #expect(ids.count == reference.count)
                #expect(ids.page(after: nil, limit: Int.max).ids == reference)
                let cursor = String(format: "id-%05d", next(4000))
                let limit = 1 + next(700)
                let expected = reference.filter { $0 > cursor }
                let page = ids.page(after: cursor, limit: limit)
                #expect(page.ids == Array(expected.prefix(limit)) && page.hasMore == (expected.count > limit))
                // Questions in ascending order, a few ids apart or many (past whole chunks), from one position.
                var position = SortedIDs.Position()
                var asked = next(40)
                while asked < 4000 {
                    let id = String(format: "id-%05d", asked)
                    #expect(ids.contains(id, movingForward: &position) == reference.contains(id), "\(id)")
                    asked += next(2) == 0 ? 1 + next(4) : 1 + next(1500)
                }
            }
        }
        #expect(largest > 4 * SortedIDs.chunkCapacity, "the ids spanned several chunks")
        #expect(reference.count < largest / 2, "and many were removed again")
    }

    @Test("a page of labels and a state keeps exactly the ids every list holds, from any cursor")
    func combinedFilterMatchesAScan() {
        // Residues of coprime moduli: every combination occurs, at different rates, over many chunks.
        func facts(_ i: Int) -> InstanceIndex.Facts {
            (model: "ios-app", state: ["background", "foreground", "launching"][i % 3], hasUnexpected: i % 11 == 0,
             hasIncompleteLaunch: false, hasDivergence: false, labels: ["run": "r\(i % 10)", "rig": "g\(i % 7)"])
        }
        let ids = (0..<20_000).map { String(format: "i-%05d", $0) }
        let index = InstanceIndex(sortedByID: ids.indices.map { (id: ids[$0], facts: facts($0)) })
        let filters: [(ListFilter, (Int) -> Bool)] = [
            (ListFilter(state: "background", labels: [LabelMatch(key: "run", value: "r3")]), { $0 % 3 == 0 && $0 % 10 == 3 }),
            (ListFilter(labels: [LabelMatch(key: "run", value: "r3"), LabelMatch(key: "rig", value: "g5")]), { $0 % 10 == 3 && $0 % 7 == 5 }),
            (ListFilter(model: "ios-app", state: "launching", hasUnexpected: true, labels: [LabelMatch(key: "rig", value: "g0"), LabelMatch(key: "run", value: "r4")]),
             { $0 % 3 == 2 && $0 % 11 == 0 && $0 % 7 == 0 && $0 % 10 == 4 }),
        ]
        for (filter, isWanted) in filters {
            let expected = ids.indices.filter(isWanted).map { ids[$0] }
            #expect(expected.count > 2 && expected.count < 2000)
            for cursor in [nil, "i-00000", expected[expected.count / 2], "i-19998"] {
                for limit in [1, 7, 5000] {
                    let rest = expected.filter { cursor == nil || $0 > cursor! }
                    let page = index.page(filter, after: cursor, limit: limit)
                    #expect(page.ids == Array(rest.prefix(limit)) && page.hasMore == (rest.count > limit), "\(filter) after \(cursor ?? "nil") limit \(limit)")
                }
            }
        }
    }
}
