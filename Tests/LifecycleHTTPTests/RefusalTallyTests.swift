import Testing
@testable import LifecycleHTTP

/// How often refused connections are logged (``RefusalTally``), on a clock the test sets.
@Suite("refusal tally")
struct RefusalTallyTests {
    @Test("the first refusal is logged at once, then one line per reason an interval with the count since")
    func rhythm() {
        var tally = RefusalTally(interval: 10)
        #expect(tally.record(1, reason: "per-client", now: 100) == 1)
        #expect(tally.record(2, reason: "per-client", now: 105) == nil)
        #expect(tally.record(1, reason: "capacity", now: 105) == 1, "each reason has its own rhythm")
        #expect(tally.record(3, reason: "per-client", now: 109) == nil)
        #expect(tally.record(1, reason: "per-client", now: 110) == 6, "2 + 3 + this one")
        #expect(tally.record(1, reason: "per-client", now: 115) == nil)
        #expect(tally.record(0, reason: "per-client", now: 120) == 1)
    }

    // Threads read the clock in one order and take the lock in another; the old code
    // subtracted the last line's time from an earlier one and trapped (a CI run crashed so).
    @Test("a time before the last line's is counted, not trapped on")
    func earlierTime() {
        var tally = RefusalTally(interval: 10)
        #expect(tally.record(1, reason: "per-client", now: 1_000) == 1)
        #expect(tally.record(1, reason: "per-client", now: 999) == nil)
        #expect(tally.record(1, reason: "per-client", now: 0) == nil)
        #expect(tally.record(1, reason: "per-client", now: 1_010) == 3)
    }
}
