import Foundation
import LifecycleClient
import LifecycleLocks
import LifecycleTesting
import Testing
import XCTest

/// Two instances on a live service: one whose launch went as the model has it, one with an
/// unexpected event that also left its launch incomplete.
private func cleanAndStuck(_ client: LifecycleClient) async throws {
    try await client.putInstance("clean")
    try await client.postEvent("didFinishLaunching", to: "clean")
    try await client.postEvent("willConnectToWindow", to: "clean", parameters: ["window": .string("main")])
    try await client.postEvent("didBecomeActive", to: "clean")
    try await client.putInstance("stuck")
    try await client.postEvent("didFinishLaunching", to: "stuck")
    try await client.postEvent("willConnectToWindow", to: "stuck", parameters: ["window": .string("main")])
    try await client.postEvent("didFinishLaunching", to: "stuck")
}

/// `expectCleanLifecycle` under Swift Testing: an issue of the running test, listing the problems.
@Suite struct LifecycleTestingSwiftTestingTests {
    @Test func aCleanInstancePassesAndReturnsItsCheck() async throws {
        let server = try ClientTestServer()
        try await cleanAndStuck(server.client())
        // Any issue it recorded would fail this test.
        let checks = await expectCleanLifecycle(.ids(["clean"]), client: server.client())
        #expect(checks.map(\.instance) == ["clean"] && checks[0].isClean && checks[0].records == 3)
    }

    @Test func problemsFailTheRunningTestListedAsCheckListsThem() async throws {
        let server = try ClientTestServer()
        try await cleanAndStuck(server.client())
        await withKnownIssue {
            await expectCleanLifecycle(.ids(["clean", "stuck"]), client: server.client())
        } matching: { issue in
            let text = issue.comments.map(\.rawValue).joined()
            return text.hasPrefix("2 problems in 1 of 2 instances\n")
                && text.contains("stuck seq ") && text.contains(": unexpected: didFinishLaunching in ")
                && text.contains(": incompleteLaunch: ") && !text.contains("\nclean ")
        }
    }

    @Test func everyInstanceARunMadeIsCheckedByItsLabel() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        try await cleanAndStuck(client)
        for id in ["run-a", "run-b"] {
            _ = try await client.createInstance(id: id, labels: ["run": "ui-7"])
            try await client.postEvent("didFinishLaunching", to: id)
            try await client.postEvent("willConnectToWindow", to: id, parameters: ["window": .string("main")])
            try await client.postEvent("didBecomeActive", to: id)
        }
        try await client.postEvent("didFinishLaunching", to: "run-b")
        await withKnownIssue {
            let checks = await expectCleanLifecycle(.labels(["run": "ui-7"]), client: client)
            #expect(checks.map(\.instance) == ["run-a", "run-b"], "only the run's instances, not clean or stuck")
        } matching: { issue in
            let text = issue.comments.map(\.rawValue).joined()
            return text.hasPrefix("1 problem in 1 of 2 instances\nrun-b seq ")
        }
        await withKnownIssue {
            await expectCleanLifecycle(.labels(["run": "ui-8"]), client: client)
        } matching: { issue in
            issue.comments.map(\.rawValue).joined() == "no instance carries the labels run=ui-8"
        }
    }

    @Test func aWaitThatRunsOutFailsTheTestSayingForWhat() async throws {
        let server = try ClientTestServer()
        try await cleanAndStuck(server.client())
        await withKnownIssue {
            await expectCleanLifecycle(.ids(["clean"]), client: server.client(), waitingUntil: .input("markerNeverSent"), timeout: 0.3)
        } matching: { issue in
            issue.comments.map(\.rawValue).joined() == "the lifecycle could not be checked: not markerNeverSent recorded within 0.3 s: still waiting for clean"
        }
    }

    @Test func theWaitLetsAQueueArriveBeforeTheCheck() async throws {
        let server = try ClientTestServer()
        let client = server.client()
        // The app's reporter delivers after the test has begun to wait.
        let delivery = Task {
            try await Task.sleep(nanoseconds: 100_000_000)
            try await cleanAndStuck(client)
            try await client.postEvent("didEnterBackground", to: "clean")
        }
        let checks = await expectCleanLifecycle(.ids(["clean"]), client: client, waitingUntil: .input("didEnterBackground"), timeout: 30)
        try await delivery.value
        #expect(checks.first?.records == 4, "checked once the marker arrived")
    }
}

/// `expectCleanLifecycle` under XCTest: an XCTest failure of the running test case, at the
/// assertion's line. The failures it records are caught here to be checked (and only while
/// `capturing`), so a failure of the assertion itself fails the test case as any would.
final class LifecycleTestingXCTestTests: XCTestCase {
    private let captured = LockedValue<[(description: String, line: Int)]?>(nil)

    override func recordFailure(withDescription description: String, inFile filePath: String, atLine lineNumber: Int, expected: Bool) {
        let kept = captured.withLock { captured -> Bool in
            guard captured != nil else { return false }
            captured!.append((description, lineNumber))
            return true
        }
        if !kept { super.recordFailure(withDescription: description, inFile: filePath, atLine: lineNumber, expected: expected) }
    }

    func testProblemsFailTheTestCaseAtTheAssertionsLine() async throws {
        let server = try ClientTestServer()
        try await cleanAndStuck(server.client())
        captured.withLock { $0 = [] }
        let line = #line + 1
        let checks = await expectCleanLifecycle(.ids(["stuck"]), client: server.client())
        let failures = captured.withLock { captured in
            defer { captured = nil }
            return captured!
        }
        XCTAssertEqual(failures.count, 1)
        XCTAssertEqual(failures.first?.line, line)
        XCTAssertTrue(failures.first?.description.contains("2 problems in 1 of 1 instance\nstuck seq ") == true, "\(failures)")
        XCTAssertEqual(checks.first?.problems.count, 2)
    }

    func testACleanInstanceRecordsNoFailure() async throws {
        let server = try ClientTestServer()
        try await cleanAndStuck(server.client())
        captured.withLock { $0 = [] }
        await expectCleanLifecycle(.ids(["clean"]), client: server.client())
        let failures = captured.withLock { captured in
            defer { captured = nil }
            return captured!
        }
        XCTAssertTrue(failures.isEmpty, "\(failures)")
    }
}
