// An app's lifecycle assertions as docs/CHECKS.md shows them: compiled by Tests/package/run.sh
// (Swift 6, complete strict concurrency, warnings as errors), not run (no service here).
import Foundation
import LifecycleClient
import LifecycleTesting
import Testing
import XCTest

let client = LifecycleClient(configuration: .init(server: URL(string: "http://127.0.0.1:8080")!))

/// Swift Testing.
@Test func theRunsLifecycleIsClean() async {
    await expectCleanLifecycle(.labels(["run": "ui-1234"]), client: client, waitingUntil: .quiet(2))
}

/// XCTest.
final class LifecycleXCTests: XCTestCase {
    func testTheAppsInstanceIsClean() async {
        await expectCleanLifecycle(.ids(["qa-device-1"]), client: client, waitingUntil: .input("didEnterBackground"), timeout: 60)
    }
}
