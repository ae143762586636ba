import Foundation
import LifecycleClient
#if canImport(Testing)
import Testing
#endif
#if canImport(XCTest)
import XCTest
#endif

/// Fails the running test, under XCTest or Swift Testing alike, when the selected instances'
/// recorded histories show lifecycle problems: unexpected events, incomplete launches,
/// divergences or gaps, listed one a line as `lifecycled check` lists them.
///
/// For a test target only: this module imports XCTest, which an app target must not link.
///
/// ```swift
/// // A UI test: the app, in its own process, labels its instance with the run's id.
/// let run = UUID().uuidString
/// app.launchEnvironment["LIFECYCLED_RUN"] = run
/// app.launch()
/// // ... drive the app ...
/// await expectCleanLifecycle(.labels(["run": run]), client: client, waitingUntil: .quiet(2))
/// ```
///
/// - Parameters:
///   - selection: the instances, by id or by labels (every instance a test run made).
///   - client: a client of the service the app reports to.
///   - condition: what to wait for first, since the app's reporter may not have delivered its
///     queue when the test ends (nil: check at once). An instance not created yet is waited for.
///   - timeout: the longest wait, in seconds; a wait that runs out fails the test, saying for what.
/// - Returns: what each instance's check found (empty when the service could not be asked:
///   the test has failed then, with the reason).
@discardableResult
public func expectCleanLifecycle(
    _ selection: InstanceSelection,
    client: LifecycleClient,
    waitingUntil condition: DeliveryCondition? = nil,
    timeout: TimeInterval = 30,
    fileID: String = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
) async -> [InstanceCheck] {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    do {
        if let condition { try await client.waitForDelivery(selection, until: condition, timeout: timeout) }
        let checks = try await client.check(selection)
        if case .labels(let labels) = selection, checks.isEmpty {
            location.fail("no instance carries the labels \(labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))")
        } else if let report = checks.problemReport {
            location.fail(report)
        }
        return checks
    } catch {
        location.fail("the lifecycle could not be checked: \(error)")
        return []
    }
}

/// Where the assertion was written, as either framework reports it.
private struct TestLocation {
    let fileID: String
    let filePath: StaticString
    let line: UInt
    let column: UInt

    /// Records a failure in the test running now: Swift Testing's when one runs, else XCTest's.
    func fail(_ message: String) {
        #if canImport(Testing)
        if Test.current != nil {
            Issue.record(
                Comment(rawValue: message),
                sourceLocation: SourceLocation(fileID: fileID, filePath: "\(filePath)", line: Int(line), column: Int(column))
            )
            return
        }
        #endif
        #if canImport(XCTest)
        XCTFail(message, file: filePath, line: line)
        #endif
    }
}
