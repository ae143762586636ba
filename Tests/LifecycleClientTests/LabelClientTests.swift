import Foundation
import LifecycleClient
import LifecycleKit
import LifecycleTestSupport
import Testing

@Suite("labels in the client")
struct LabelClientTests {
    @Test("createInstance, putInstance and a batch create carry labels; Instance has them; the list filters by them")
    func createAndList() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        let made = try await client.createInstance(id: "l-1", labels: ["run": "r1", "app.version": "2.1"])
        #expect(made.labels == ["run": "r1", "app.version": "2.1"])
        #expect(try await client.putInstance("l-2", labels: ["run": "r1"]).instance.labels == ["run": "r1"])
        _ = try await client.batch([.create("l-3", labels: ["run": "r2"])])
        #expect(try await client.instance("l-3").labels == ["run": "r2"])
        #expect(try await client.putInstance("l-4").instance.labels.isEmpty)
        let page = try await client.instancePage(filter: InstanceFilter(labels: ["run": "r1"]))
        #expect(page.items.map(\.id) == ["l-1", "l-2"])
        let both = try await client.instancePage(filter: InstanceFilter(labels: ["run": "r1", "app.version": "2.1"]))
        #expect(both.items.map(\.id) == ["l-1"])
        let refused = await problem { try await client.createInstance(id: "l-5", labels: ["bad key": "x"]) }
        #expect(refused?.status == 422 && refused?.detail.contains("labels.bad key") == true)
    }

    @Test("the reporter's create carries labels through its journal")
    func reporterCreate() async throws {
        let server = try ClientTestServer()
        let folder = TemporaryDirectory()
        let reporter = try LifecycleReporter(
            client: server.client(), configuration: .init(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false)
        )
        try reporter.create(instance: "q-1", model: "ios-app", labels: ["run": "ci-7"])
        #expect(try await reporter.flush() == 1)
        #expect(try await server.client().instance("q-1").labels == ["run": "ci-7"])
    }

    @Test("the adapter's labels: the bundle's versions, the OS, the device, LIFECYCLED_RUN, then the app's own")
    func adapterLabels() throws {
        let folder = TemporaryDirectory()
        let bundle = URL(fileURLWithPath: folder.path).appendingPathComponent("App.app")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        let info: [String: Any] = ["CFBundleShortVersionString": "2.1", "CFBundleVersion": "412", "CFBundleIdentifier": "com.example.app"]
        try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0).write(to: bundle.appendingPathComponent("Info.plist"))
        let labels = LifecycleAppObserver.labels(
            bundleURL: bundle, environment: ["LIFECYCLED_RUN": "ci-1234"], adding: ["team": "qa", "app.build": "413", "bad key": "x", "empty": ""]
        )
        #expect(labels["app.version"] == "2.1")
        #expect(labels["app.build"] == "413", "the app's own win")
        #expect(labels["run"] == "ci-1234" && labels["team"] == "qa")
        #expect(labels["bad key"] == nil && labels["empty"] == nil, "what the service would refuse is left out")
        let os = ProcessInfo.processInfo.operatingSystemVersion
        #expect(labels["os.version"] == "\(os.majorVersion).\(os.minorVersion).\(os.patchVersion)")
        #expect(labels["device.model"]?.isEmpty == false)
        #expect(LifecycleAppObserver.labels(bundleURL: bundle, environment: ["SIMULATOR_MODEL_IDENTIFIER": "iPhone15,2"])["device.model"] == "iPhone15,2")
        #expect(LifecycleAppObserver.labels(bundleURL: bundle, environment: [:])["run"] == nil)
        let many = Dictionary(uniqueKeysWithValues: (0..<20).map { ("k\($0)", "v") })
        #expect(LifecycleAppObserver.labels(bundleURL: bundle, environment: [:], adding: many).count == 16)
    }

    @Test("the adapter creates the install's instance with its labels and those of its configuration")
    @MainActor func adapterCreates() async throws {
        let server = try ClientTestServer()
        let folder = TemporaryDirectory()
        let observer = try LifecycleAppObserver(
            client: server.client(),
            configuration: .init(directory: URL(fileURLWithPath: folder.path), deliversAutomatically: false, labels: ["run": "ui-9"]),
            center: NotificationCenter(), bundleURL: AppDevice.appBundle
        )
        try await observer.reporter.flush()
        let instance = try await server.client().instance(try #require(observer.instance))
        #expect(instance.labels["run"] == "ui-9" && instance.labels["os.version"] != nil)
    }
}

@Suite("findings in the client")
struct FindingClientTests {
    @Test("findings decode, filter, and name their instances")
    func findings() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        for id in ["f-1", "f-2"] {
            try await client.putInstance(id, labels: ["run": id == "f-1" ? "r1" : "r2"])
            _ = try await client.postEvent("didBecomeActive", to: id)
        }
        try await client.postEvent("didFinishLaunching", to: "f-1", believedState: "foreground")
        let all = try await client.findings()
        #expect(all.map(\.kind) == [.unexpected, .divergence])
        let unexpected = try #require(all.first)
        #expect(unexpected.state == "initializing" && unexpected.event == "didBecomeActive" && unexpected.count == 2 && unexpected.instances == 2)
        #expect(unexpected.examples == ["f-1", "f-2"] && unexpected.firstSeen <= unexpected.lastSeen)
        #expect(all.last?.diverged?.believedState == "foreground" && all.last?.diverged?.missingHook == nil && all.last?.state == "launching")
        #expect(try await client.findings(kind: .divergence).map(\.signature) == [all[1].signature])
        #expect(try await client.findings(label: ("run", "r2")).map(\.count) == [1])
        #expect(try await client.findings(since: Date().addingTimeInterval(3600)).isEmpty)
        #expect(try await client.findings(since: Date(timeIntervalSince1970: 0)).count == 2)
        let listed = try await client.instancePage(filter: InstanceFilter(finding: unexpected.signature))
        #expect(listed.items.map(\.id) == ["f-1", "f-2"])
        let refused = await problem { try await client.findings(model: "nokia") }
        #expect(refused?.status == 400)
    }
}
