import Foundation
import Testing
@testable import LifecycleClient

/// What the library makes of the delays a server or a proxy sends: never one that traps a
/// conversion to nanoseconds, never longer than a day.
@Suite("Retry-After and other delays")
struct RetryAfterTests {
    @Test("Retry-After is whole seconds, at most a day; a date, a fraction or a number Double reads but HTTP does not is no delay")
    func retryAfter() {
        func parsed(_ value: String) -> TimeInterval? {
            APIResponse(status: 503, headers: ["retry-after": value], body: Data()).retryAfter
        }
        #expect(parsed("120") == 120)
        #expect(parsed(" 7 ") == 7)
        #expect(parsed("0") == 0)
        #expect(parsed("99999999999999999999999") == 86_400)
        for value in ["inf", "nan", "1e400", "-1", "1.5", "", "Wed, 21 Oct 2015 07:28:00 GMT"] {
            #expect(parsed(value) == nil, "\(value)")
        }
    }

    @Test("a delay as a wait: NaN and negative as 0, infinity as a day")
    func asWait() {
        #expect(TimeInterval.nan.asWait == 0)
        #expect((-3.0).asWait == 0)
        #expect(TimeInterval.infinity.asWait == 86_400)
        #expect(2.5.asWait == 2.5)
    }
}
