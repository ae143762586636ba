import Foundation
import Testing
@testable import LifecycleHTTP

@Suite("time format")
struct TimeFormatTests {
    @Test("rounded to the millisecond, UTC, before and after 1970")
    func times() {
        #expect(JSON.formatTime(Date(timeIntervalSince1970: 1_700_000_000.123)) == "2023-11-14T22:13:20.123Z")
        #expect(JSON.formatTime(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(JSON.formatTime(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        #expect(JSON.formatTime(Date(timeIntervalSince1970: 1_801_234_567.0996)) == "2027-01-29T14:56:07.100Z")
    }
}
