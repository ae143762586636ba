import Foundation

/// What the app says its own code did for one input: checked against the model, never obeyed.
///
/// An app built like DuckDuckGo's keeps a state object of its own; what that object believes
/// and which hooks its code ran is where its lifecycle bugs show (a hook run twice after a quick
/// background and foreground, a state object left in the foreground). Either part may be absent.
public struct AppReport: Sendable, Equatable {
    /// The state the app's own machine is in after handling the input.
    public var believedState: String?
    /// The hooks its code ran for the input, in order.
    public var ranHooks: [String]?

    /// The most hook names one report holds, and the longest name (in characters).
    public static let maxHooks = 64
    public static let maxHookLength = 128

    public init(believedState: String? = nil, ranHooks: [String]? = nil) {
        self.believedState = believedState
        self.ranHooks = ranHooks
    }

    /// The names a model may not give a parameter: they carry the report (and the device's
    /// clock) beside an input's parameters in the same body.
    public static let reservedNames: Set<String> = ["believedState", "ranHooks", "occurredAt"]
}

/// Where what the app reported differs from what the model says happened.
public struct Divergence: Sendable, Codable, Equatable {
    /// The app believes it is in `believed`; the model put it in `actual`.
    public struct State: Sendable, Codable, Equatable {
        public var believed: String
        public var actual: String
    }

    /// The hooks the model expected against those the app ran.
    public struct Hooks: Sendable, Codable, Equatable {
        public var expected: [String]
        public var ran: [String]
        /// Expected and not run (as many times as they are short).
        public var missing: [String]
        /// Run and not expected (a hook run twice appears here once).
        public var extra: [String]
        /// The same hooks, as many times each, in another order.
        public var orderOnly: Bool
    }

    /// The kinds a divergence is counted by (metrics labels, coverage).
    public enum Kind: String, Sendable, CaseIterable {
        case state, missingHook, extraHook, hookOrder
    }

    public var state: State?
    public var hooks: Hooks?

    public init(state: State?, hooks: Hooks?) {
        self.state = state
        self.hooks = hooks
    }

    /// What `report` says against what `record` shows; `nil` when they agree or nothing was reported.
    public init?(_ report: AppReport, against record: Record) {
        if let believed = report.believedState, believed != record.to {
            state = State(believed: believed, actual: record.to)
        }
        if let ran = report.ranHooks, ran != record.hooks {
            let missing = Self.subtracting(ran, from: record.hooks)
            let extra = Self.subtracting(record.hooks, from: ran)
            hooks = Hooks(expected: record.hooks, ran: ran, missing: missing, extra: extra, orderOnly: missing.isEmpty && extra.isEmpty)
        }
        if state == nil, hooks == nil { return nil }
    }

    /// Its kinds, in ``Kind``'s order.
    public var kinds: [Kind] {
        var kinds: [Kind] = []
        if state != nil { kinds.append(.state) }
        if let hooks {
            if !hooks.missing.isEmpty { kinds.append(.missingHook) }
            if !hooks.extra.isEmpty { kinds.append(.extraHook) }
            if hooks.orderOnly { kinds.append(.hookOrder) }
        }
        return kinds
    }

    /// `names` less each of `removed` once, in order: a multiset difference, so a hook run twice
    /// where the model runs it once leaves one.
    private static func subtracting(_ removed: [String], from names: [String]) -> [String] {
        var left = Dictionary(removed.map { ($0, 1) }, uniquingKeysWith: +)
        return names.filter { name in
            guard let count = left[name], count > 0 else { return true }
            left[name] = count - 1
            return false
        }
    }
}

/// A time on the device's own clock: an instant and the offset the device gave it, so that
/// it reads back as the device wrote it (RFC 3339, milliseconds, the same offset).
///
/// The server's `time` orders nothing either: records keep the order they arrived in. This is
/// what the app says, kept beside it, for events that reach the service late.
public struct DeviceTime: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970 (UTC).
    public var milliseconds: Int64
    /// The device's offset from UTC in minutes.
    public var offsetMinutes: Int

    public init(milliseconds: Int64, offsetMinutes: Int) {
        self.milliseconds = milliseconds
        self.offsetMinutes = offsetMinutes
    }

    /// The instant.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// Reads `2026-12-02T05:00:00.123+01:00` (RFC 3339's date-time: an offset or `Z` is required;
    /// a fraction is optional, and digits past the millisecond are dropped); `nil` for anything else.
    /// A leap second (`23:59:60`, RFC 3339 §5.6) is read as the last millisecond of the second
    /// before it (`23:59:59.999`, whatever its fraction), which keeps the order of the times around
    /// it in a type that has no 61st second. It is taken in any minute and offset: which minutes
    /// had one is a table the device knows better than the service, and a refusal would cost the input.
    public init?(rfc3339 text: String) {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= b.count else { return nil }
            var value = 0
            for byte in b[at..<at + count] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        func byte(_ at: Int, _ expected: Character...) -> Bool {
            at < b.count && expected.contains { $0.asciiValue == b[at] }
        }
        guard let year = digits(0, 4), byte(4, "-"), let month = digits(5, 2), byte(7, "-"), let day = digits(8, 2),
              byte(10, "T", "t"), let hour = digits(11, 2), byte(13, ":"), let minute = digits(14, 2), byte(16, ":"),
              let second = digits(17, 2),
              (1...12).contains(month), day >= 1, day <= Self.days(inMonth: month, year: year), hour < 24, minute < 60, second <= 60
        else { return nil }
        var at = 19
        var millisecond = 0
        if byte(at, ".") {
            at += 1
            let start = at
            while at < b.count, b[at] >= 0x30, b[at] <= 0x39 { at += 1 }
            guard at > start else { return nil }
            for (index, digit) in b[start..<min(at, start + 3)].enumerated() { millisecond += Int(digit - 0x30) * [100, 10, 1][index] }
        }
        let isLeapSecond = second == 60
        var offset = 0
        if byte(at, "Z", "z") {
            at += 1
        } else if byte(at, "+", "-"), let hours = digits(at + 1, 2), byte(at + 3, ":"), let minutes = digits(at + 4, 2), hours < 24, minutes < 60 {
            offset = (hours * 60 + minutes) * (b[at] == UInt8(ascii: "-") ? -1 : 1)
            at += 6
        } else {
            return nil
        }
        guard at == b.count else { return nil }
        let days = Self.daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59)) - Int64(offset * 60)
        self.init(milliseconds: seconds * 1000 + Int64(isLeapSecond ? 999 : millisecond), offsetMinutes: offset)
    }

    /// RFC 3339 with milliseconds, in the device's offset (`Z` for none).
    public var description: String {
        let local = milliseconds + Int64(offsetMinutes) * 60_000
        let (days, inDay) = local.quotientAndRemainder(dividingBy: 86_400_000)
        let (dayNumber, ms) = inDay < 0 ? (days - 1, inDay + 86_400_000) : (days, inDay)
        let (year, month, day) = Self.civil(daysSince1970: Int(dayNumber))
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let clock = Int(ms)
        var text = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(clock / 3_600_000, 2)):\(pad(clock / 60_000 % 60, 2))"
            + ":\(pad(clock / 1000 % 60, 2)).\(pad(clock % 1000, 3))"
        if offsetMinutes == 0 {
            text += "Z"
        } else {
            let size = abs(offsetMinutes)
            text += "\(offsetMinutes < 0 ? "-" : "+")\(pad(size / 60, 2)):\(pad(size % 60, 2))"
        }
        return text
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let time = DeviceTime(rfc3339: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an RFC 3339 date-time: \(text)"))
        }
        self = time
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    // Howard Hinnant's days-from-civil and its inverse: the proleptic Gregorian calendar in integers.
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, dayOfYear - (153 * mp + 2) / 5 + 1)
    }

    private static func days(inMonth month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

/// An input as the app sent it: what happened, what its code reported of it, and when by its clock.
public struct ReportedInput: Sendable, Equatable {
    public var input: Input
    public var report: AppReport
    public var occurredAt: DeviceTime?

    public init(_ input: Input, report: AppReport = AppReport(), occurredAt: DeviceTime? = nil) {
        self.input = input
        self.report = report
        self.occurredAt = occurredAt
    }

    /// An event with nothing reported.
    public static func event(_ name: String, _ parameters: [String: Value] = [:]) -> ReportedInput { ReportedInput(.event(name, parameters)) }
    /// An action with nothing reported.
    public static func action(_ name: String, _ parameters: [String: Value] = [:]) -> ReportedInput { ReportedInput(.action(name, parameters)) }
    /// A relaunch with nothing reported.
    public static let relaunch = ReportedInput(.relaunch)
}
