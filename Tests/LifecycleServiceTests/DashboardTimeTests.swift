import Foundation
import LifecycleTestSupport
import Testing
@testable import LifecycleService

/// The dashboard's device time (issue 31, point 9): the `occurredAt` a record holds, shown by
/// `formatDeviceTime` in `Public/js/model.js` (run by node, as the page runs it) as the
/// device's clock read it, in the device's offset, whatever the page's zone.
@Suite("dashboard device time")
struct DashboardTimeTests {
    static let module = repositoryRoot.appendingPathComponent("Public/js/model.js").path

    /// What `formatDeviceTime` shows for each of `times`, in a page whose zone is `zone`.
    static func shown(_ times: [String], zone: String) throws -> [String] {
        let input = String(decoding: try JSONSerialization.data(withJSONObject: times), as: UTF8.self)
        let script = """
            import { formatDeviceTime } from \(String(decoding: try JSONSerialization.data(withJSONObject: module, options: .fragmentsAllowed), as: UTF8.self));
            console.log(JSON.stringify(\(input).map(formatDeviceTime)));
            """
        let node = Process()
        node.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        node.arguments = ["node", "--input-type=module", "-e", script]
        node.environment = ["TZ": zone, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
        let output = Pipe()
        node.standardOutput = output
        try node.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        node.waitUntilExit()
        #expect(node.terminationStatus == 0)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String])
    }

    @Test("occurredAt shows as the device's wall clock in its own offset, at any valid offset and year, in any page zone")
    func deviceWallClock() throws {
        // What the service stores and answers for times a device may send.
        let server = try TestServer(.router)
        let c = server.router()
        try c.makeInstance("clock", events: ["didFinishLaunching"])
        let sent = ["0000-01-01T00:00:00+23:59", "2016-12-31T23:59:60Z", "2026-12-02T05:00:00.1-05:30", "1969-12-31T23:59:59.5+14:00"]
        var stored: [String] = []
        for time in sent {
            let answer = try c.event("clock", #"{"event": "willConnectToWindow", "window": "main", "occurredAt": "\#(time)"}"#)
            stored.append(try #require(answer.json["occurredAt"] as? String, "\(answer.text)"))
        }
        #expect(stored == ["0000-01-01T00:00:00.000+23:59", "2016-12-31T23:59:59.999Z", "2026-12-02T05:00:00.100-05:30", "1969-12-31T23:59:59.500+14:00"])
        let expected = ["0000-01-01 00:00:00.000 +23:59", "2016-12-31 23:59:59.999 UTC", "2026-12-02 05:00:00.100 -05:30", "1969-12-31 23:59:59.500 +14:00"]
        for zone in ["UTC", "America/Los_Angeles", "Pacific/Kiritimati"] {
            #expect(try Self.shown(stored, zone: zone) == expected, "\(zone)")
        }
        #expect(try Self.shown(["not a time"], zone: "UTC") == ["not a time"], "anything else is shown as it is")
    }
}
