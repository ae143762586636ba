import Foundation
import Testing
@testable import LifecycleKit

/// The referee of what the app's code did: beliefs and hooks against the model, and the device's clock.
@Suite("divergence")
struct DivergenceTests {
    /// `didBecomeActive` from background: the model runs `Foreground.onTransition` then `Foreground.didReturn`.
    static let expected = ["Foreground.onTransition", "Foreground.didReturn"]

    func fromBackground(_ report: AppReport) throws -> (Record, Machine) {
        var m = try iosMachine(in: "background")
        let record = try m.apply(.event("didBecomeActive"), reported: report, at: t0)
        return (record, m)
    }

    @Test("a report that agrees with the model is kept and makes no divergence")
    func agreeing() throws {
        let (record, m) = try fromBackground(AppReport(believedState: "foreground", ranHooks: Self.expected))
        #expect(record.believedState == "foreground" && record.ranHooks == Self.expected)
        #expect(record.divergence == nil)
        #expect(m.snapshot.counters.divergences == 0)
    }

    @Test("a state object that believes it is in the background while the model is in the foreground")
    func stateDivergence() throws {
        let (record, m) = try fromBackground(AppReport(believedState: "background"))
        #expect(record.divergence == Divergence(state: .init(believed: "background", actual: "foreground"), hooks: nil))
        #expect(record.divergence?.kinds == [.state])
        #expect(record.to == "foreground", "the report changes nothing the model decides")
        #expect(m.snapshot.counters.divergences == 1)
    }

    @Test("onTransition run twice after a quick background and foreground is an extra hook")
    func extraHook() throws {
        let ran = ["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"]
        let (record, _) = try fromBackground(AppReport(ranHooks: ran))
        let hooks = try #require(record.divergence?.hooks)
        #expect(hooks.expected == Self.expected && hooks.ran == ran)
        #expect(hooks.extra == ["Foreground.onTransition"] && hooks.missing.isEmpty && !hooks.orderOnly)
        #expect(record.divergence?.kinds == [.extraHook])
    }

    @Test("a hook the model runs and the app did not is missing")
    func missingHook() throws {
        let (record, _) = try fromBackground(AppReport(ranHooks: ["Foreground.didReturn"]))
        let hooks = try #require(record.divergence?.hooks)
        #expect(hooks.missing == ["Foreground.onTransition"] && hooks.extra.isEmpty && !hooks.orderOnly)
        #expect(record.divergence?.kinds == [.missingHook])
    }

    @Test("the same hooks in another order differ in order only")
    func orderOnly() throws {
        let (record, _) = try fromBackground(AppReport(ranHooks: Self.expected.reversed()))
        let hooks = try #require(record.divergence?.hooks)
        #expect(hooks.missing.isEmpty && hooks.extra.isEmpty && hooks.orderOnly)
        #expect(record.divergence?.kinds == [.hookOrder])
    }

    @Test("state and hooks diverge together; an unexpected event's reported hooks are all extra; each record counts once")
    func together() throws {
        var m = try iosMachine(in: "background")
        let both = try m.apply(.event("didBecomeActive"), reported: AppReport(believedState: "background", ranHooks: ["Other.hook"]), at: t0)
        #expect(both.divergence?.kinds == [.state, .missingHook, .extraHook])
        let unexpected = try m.apply(.event("didFinishLaunching"), reported: AppReport(ranHooks: ["Launching.init"]), at: t0)
        #expect(unexpected.outcome == .unexpected && unexpected.divergence?.hooks?.extra == ["Launching.init"])
        #expect(m.snapshot.counters.divergences == 2 && m.snapshot.counters.unexpected == 1)
    }

    @Test("a belief in a state the model lacks, or hooks past the bounds, throw and change nothing")
    func refusedReports() throws {
        var m = try iosMachine(in: "background")
        let before = m.snapshot
        #expect(throws: InputError.self) { try m.apply(.event("didBecomeActive"), reported: AppReport(believedState: "foregrund"), at: t0) }
        #expect(throws: InputError.self) {
            try m.apply(.event("didBecomeActive"), reported: AppReport(ranHooks: Array(repeating: "h", count: AppReport.maxHooks + 1)), at: t0)
        }
        #expect(throws: InputError.self) { try m.apply(.event("didBecomeActive"), reported: AppReport(ranHooks: [""]), at: t0) }
        #expect(m.snapshot == before)
        do {
            _ = try m.apply(.event("didBecomeActive"), reported: AppReport(believedState: "foregrund"), at: t0)
        } catch {
            #expect(error.description.contains("did you mean \"foreground\""), "\(error.description)")
        }
    }

    @Test("the device's time is kept on the record, whatever it says")
    func deviceTime() throws {
        var m = try iosMachine(in: "background")
        let early = DeviceTime(rfc3339: "2001-01-01T00:00:00.000Z")!
        let record = try m.apply(reported: ReportedInput(.event("didBecomeActive"), occurredAt: early), at: t0)
        #expect(record.occurredAt == early && record.time == t0)
        #expect(record.version == 4, "an early device time does not move the record")
    }

    @Test("model validation reserves the report's names for every input")
    func reservedNames() {
        for name in AppReport.reservedNames {
            let error = validationError { $0.events[1].parameters = [ParameterDefinition(name: name, type: .string)] }
            #expect(error == .reservedParameter(owner: "pull", parameter: name))
        }
    }

    @Test("conformance traces report hook divergences, after the problems they had before")
    func conformanceHooks() {
        let path: [Conformance.Step] = iosPaths["background"]!.map { Conformance.Step($0) }
        let cases: [([String], Divergence.Kind)] = [
            (["Foreground.didReturn"], .missingHook),
            (["Foreground.onTransition", "Foreground.onTransition", "Foreground.didReturn"], .extraHook),
            (Self.expected.reversed(), .hookOrder),
        ]
        for (ran, kind) in cases {
            let report = Conformance.check(path + [Conformance.Step(.event("didBecomeActive"), ranHooks: ran)], against: .iosApp)
            guard case .hookDivergence(let step, let hooks)? = report.firstProblem else {
                Issue.record("no hook divergence for \(ran): \(String(describing: report.firstProblem))")
                continue
            }
            #expect(step == path.count && hooks.ran == ran)
            #expect(Divergence(state: nil, hooks: hooks).kinds == [kind])
        }
        let agreeing = Conformance.check(path + [Conformance.Step(.event("didBecomeActive"), believedState: "foreground", ranHooks: Self.expected)], against: .iosApp)
        #expect(agreeing.isConforming)
        let belief = Conformance.check(
            path + [Conformance.Step(.event("didBecomeActive"), believedState: "background", ranHooks: ["x"])], against: .iosApp
        )
        #expect(belief.firstProblem == .beliefMismatch(step: path.count, believed: "background", actual: "foreground"))
    }
}

@Suite("device time")
struct DeviceTimeTests {
    @Test("RFC 3339 read and written back with milliseconds and the device's offset")
    func roundTrip() throws {
        let cases: [(String, Int64, Int, String)] = [
            ("2026-12-02T05:00:00.123+01:00", 1_796_184_000_123, 60, "2026-12-02T05:00:00.123+01:00"),
            ("2026-12-02T04:00:00.123Z", 1_796_184_000_123, 0, "2026-12-02T04:00:00.123Z"),
            ("2026-12-01T22:30:00-05:30", 1_796_184_000_000, -330, "2026-12-01T22:30:00.000-05:30"),
            ("2024-02-29t23:59:59.9999z", 1_709_251_199_999, 0, "2024-02-29T23:59:59.999Z"),
            ("1969-12-31T23:59:59.500Z", -500, 0, "1969-12-31T23:59:59.500Z"),
            ("2000-03-01T00:00:00.000+14:00", 951_818_400_000, 840, "2000-03-01T00:00:00.000+14:00"),
        ]
        for (text, milliseconds, offset, written) in cases {
            let time = try #require(DeviceTime(rfc3339: text), "\(text)")
            #expect(time.milliseconds == milliseconds && time.offsetMinutes == offset, "\(text)")
            #expect(time.description == written)
            #expect(DeviceTime(rfc3339: written) == time)
        }
        // Foundation agrees on the instant.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try #require(formatter.date(from: "2026-12-02T05:00:00.123+01:00"))
        #expect(DeviceTime(rfc3339: "2026-12-02T05:00:00.123+01:00")!.date.timeIntervalSince1970 == date.timeIntervalSince1970)
    }

    @Test("a leap second (23:59:60, RFC 3339 §5.6) reads as .999 of the second before, in its order")
    func leapSecond() throws {
        let cases: [(String, Int64, Int, String)] = [
            ("2016-12-31T23:59:60Z", 1_483_228_799_999, 0, "2016-12-31T23:59:59.999Z"),
            ("2016-12-31T15:59:60.25-08:00", 1_483_228_799_999, -480, "2016-12-31T15:59:59.999-08:00"),
            ("2016-12-31T23:59:60+01:00", 1_483_225_199_999, 60, "2016-12-31T23:59:59.999+01:00"),
        ]
        for (text, milliseconds, offset, written) in cases {
            let time = try #require(DeviceTime(rfc3339: text), "\(text)")
            #expect(time.milliseconds == milliseconds && time.offsetMinutes == offset, "\(text)")
            #expect(time.description == written)
        }
        let before = try #require(DeviceTime(rfc3339: "2016-12-31T23:59:59.998Z"))
        let leap = try #require(DeviceTime(rfc3339: "2016-12-31T23:59:60.000Z"))
        let after = try #require(DeviceTime(rfc3339: "2017-01-01T00:00:00Z"))
        #expect(before.milliseconds < leap.milliseconds && leap.milliseconds < after.milliseconds)
    }

    @Test("anything but an RFC 3339 date-time with an offset is refused")
    func refused() {
        for text in [
            "", "2026-12-02", "2026-12-02T05:00:00", "2026-12-02T05:00:00.123", "2026-12-02 05:00:00Z", "2026-13-02T05:00:00Z",
            "2026-02-29T05:00:00Z", "2026-12-02T24:00:00Z", "2026-12-02T05:60:00Z", "2026-12-02T05:00:61Z", "2026-12-02T05:00:99Z", "2026-12-02T05:00:00.Z", "2026-12-02T05:00:00+0100",
            "2026-12-02T05:00:00Z ", "２026-12-02T05:00:00Z", "2026-12-02T05:00:00+24:00", "1796184000123",
        ] {
            #expect(DeviceTime(rfc3339: text) == nil, "\(text)")
        }
    }
}
