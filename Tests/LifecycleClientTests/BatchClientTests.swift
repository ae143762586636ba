import Foundation
@testable import LifecycleClient
import LifecycleKit
import LifecycleTestSupport
import Testing

@Suite("LifecycleClient batch")
struct BatchClientTests {
    @Test("a batch answers one typed result per item: instance, records, an unexpected event's record, problems")
    func typedResults() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let launched = DeviceTime(rfc3339: "2026-12-02T05:00:00.123+01:00")!
        let results = try await client.batch([
            .create("b-1"),
            .event("didFinishLaunching", to: "b-1", occurredAt: launched),
            .event("willConnectToWindow", to: "b-1", parameters: ["window": .string("main")], believedState: "background", ranHooks: ["x"]),
            .event("didBecomeActive", to: "b-1", expectedVersion: 2),
            .event("didFinishLaunching", to: "b-1"),
            .event("didBecomeActive", to: "b-1", expectedVersion: 1),
            .event("didFinishLaunching", to: "absent"),
            .event("noSuchEvent", to: "b-1"),
        ])
        try #require(results.count == 8)

        guard case .instance(201, let instance) = results[0] else { Issue.record("create: \(results[0])"); return }
        #expect(instance.id == "b-1" && instance.model == "ios-app" && instance.version == 0)

        guard case .record(200, let launch) = results[1] else { Issue.record("launch: \(results[1])"); return }
        #expect(launch.name == "didFinishLaunching" && launch.version == 1 && launch.instance == "b-1")
        #expect(launch.occurredAt == launched, "occurredAt keeps the device's offset and milliseconds")
        #expect(launch.occurredAt?.description == "2026-12-02T05:00:00.123+01:00")

        guard case .record(200, let window) = results[2] else { Issue.record("window: \(results[2])"); return }
        #expect(window.parameters == ["window": .string("main")])
        #expect(window.believedState == "background" && window.ranHooks == ["x"])
        #expect(window.divergence?.state?.actual == window.to, "the belief differs from the model: a divergence is recorded")

        #expect(results[3].record?.outcome == .transitioned)
        guard case .problem(409, let unexpected) = results[4] else { Issue.record("unexpected: \(results[4])"); return }
        #expect(unexpected.kind == "unexpected-event")
        #expect(unexpected.record?.outcome == .unexpected && unexpected.record?.version == 4, "recorded, as version 4")
        #expect(results[4].record?.name == "didFinishLaunching")

        guard case .problem(412, let stale) = results[5] else { Issue.record("stale: \(results[5])"); return }
        #expect(stale.record == nil && stale.type.hasPrefix("/problems/"))
        guard case .problem(404, let missing) = results[6] else { Issue.record("missing: \(results[6])"); return }
        #expect(missing.detail.contains("absent"))
        guard case .problem(422, let unknown) = results[7] else { Issue.record("unknown: \(results[7])"); return }
        #expect(unknown.document["detail"]?.stringValue == unknown.detail && !unknown.body.isEmpty)
    }

    @Test("a batch refused whole throws the problem, and a replayed batch is applied once by its keys")
    func refusedAndReplayed() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        do {
            _ = try await client.batch([BatchItem(instance: "bad id!", kind: .event, name: "didFinishLaunching")])
            Issue.record("a bad instance id is refused")
        } catch let error as LifecycleClientError {
            #expect(error.problem?.status == 400 && error.problem?.detail.contains("items[0]") == true, "\(error)")
        }
        let items: [BatchItem] = [.create("r-1", idempotencyKey: "k0"), .event("didFinishLaunching", to: "r-1", idempotencyKey: "k1")]
        let first = try await client.batch(items)
        let again = try await client.batch(items)
        #expect(first.map(\.status) == [201, 200] && again.map(\.status) == [201, 200])
        #expect(first[1].record == again[1].record, "the replay answers the stored record")
        #expect(try await client.instance("r-1").version == 1, "applied once")
    }

    @Test("a gap item is encoded as the gap endpoint's body")
    func gapBody() throws {
        let item = BatchItem.gap("g-1", dropped: 7, occurredAt: DeviceTime(rfc3339: "2026-12-02T05:00:00Z")!, idempotencyKey: "g")
        let json = try JSONEncoder().encode(item.json)
        let object = try JSONSerialization.jsonObject(with: json) as? [String: Any]
        #expect(object?["kind"] as? String == "gap" && object?["idempotencyKey"] as? String == "g")
        let body = object?["body"] as? [String: Any]
        #expect(body?["dropped"] as? Int == 7 && body?["occurredAt"] as? String == "2026-12-02T05:00:00.000Z")
        #expect(body?.count == 2)
    }
}
