import Foundation
import LifecycleKit

/// Where a problem is: a record of an instance's history (its sequence number) or a step of a
/// trace (0-based), as `lifecycled check` prints it.
public enum CheckPosition: Sendable, Hashable, CustomStringConvertible {
    case sequence(Int64)
    case step(Int)

    public var description: String {
        switch self {
        case .sequence(let sequence): "seq \(sequence)"
        case .step(let step): "step \(step)"
        }
    }
}

/// One thing a recorded history shows that went wrong: where, what happened, and what the
/// model expected instead.
public struct CheckProblem: Sendable, Equatable, CustomStringConvertible {
    /// The kinds a fleet's findings are grouped by too, and `invalidInput` for a trace step the
    /// model refuses (a history holds none: the service refuses such an input and records nothing).
    public enum Kind: String, Sendable, CaseIterable {
        /// An event the model does not expect in the state it arrived in.
        case unexpected
        /// A launch that stopped part-way: found by the next launch, or where the history ends.
        case incompleteLaunch
        /// What the app's code believed or ran differs from the model.
        case divergence
        /// Inputs the app's reporter dropped before it could deliver them.
        case gap
        /// A trace step with a name or parameters the model refuses.
        case invalidInput
    }

    public var kind: Kind
    public var position: CheckPosition
    /// What happened, in words (`didBecomeActive in launching`).
    public var happened: String
    /// What the model expected instead (`one of willConnectToWindow, didEnterBackground`).
    public var expected: String

    public init(kind: Kind, position: CheckPosition, happened: String, expected: String) {
        self.kind = kind
        self.position = position
        self.happened = happened
        self.expected = expected
    }

    /// `seq 14: unexpected: didBecomeActive in launching; the model expects willConnectToWindow, didEnterBackground`.
    public var description: String { "\(position): \(kind.rawValue): \(happened); the model expects \(expected)" }
}

/// What checking one instance's history (or one trace) found.
public struct InstanceCheck: Sendable, Equatable {
    /// The instance's id (for a trace, what names it, such as its file).
    public var instance: String
    /// The model it was checked against.
    public var model: String
    /// How many records (or trace steps) were checked.
    public var records: Int
    /// In the order they happened; empty when the history is clean.
    public var problems: [CheckProblem]

    public init(instance: String, model: String, records: Int, problems: [CheckProblem]) {
        self.instance = instance
        self.model = model
        self.records = records
        self.problems = problems
    }

    /// Whether nothing went wrong.
    public var isClean: Bool { problems.isEmpty }

    /// Its problems, a line each, as `lifecycled check` prints them: `app-2 seq 14: unexpected: …`.
    public var problemLines: [String] { problems.map { "\(instance) \($0)" } }
}

/// Turns recorded records into ``CheckProblem``s against one model: pure, no I/O, the one
/// piece of code `lifecycled check`, ``LifecycleClient/check(_:)`` and test assertions share.
///
/// A record is a problem when its outcome is `unexpected`, when it found an earlier launch
/// unfinished (`incompleteLaunch`), when it carries a `divergence` (one problem for the
/// believed state, one for the hooks), and when it is a gap. A history that ends with a
/// launch in progress is an incomplete launch too: nothing will finish it.
public struct HistoryCheck: Sendable {
    public let model: ModelDefinition
    private let events: [String: EventDefinition]
    private let rows: [String: TransitionRow]

    public init(model: ModelDefinition) {
        self.model = model
        events = Dictionary(model.events.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        rows = Dictionary(uniqueKeysWithValues: model.transitions.enumerated().map { (Model.rowID($0.offset), $0.element) })
    }

    /// The problems of a history, oldest record first, each at its sequence number; then the
    /// launch it ends in the middle of, if any. `breadcrumb`: where the instance's launch is now
    /// (``Instance/breadcrumb``); `nil` to follow the records' own launch effects from none.
    public func problems(in records: [Record], endingAt breadcrumb: Breadcrumb? = nil) -> [CheckProblem] {
        var problems = records.flatMap { self.problems(of: $0, at: .sequence($0.sequence)) }
        if let last = records.last, let unfinished = unfinishedLaunch(breadcrumb ?? self.breadcrumb(after: records), at: .sequence(last.sequence)) {
            problems.append(unfinished)
        }
        return problems
    }

    /// The problems one record shows.
    public func problems(of record: Record, at position: CheckPosition) -> [CheckProblem] {
        var problems: [CheckProblem] = []
        if let incomplete = record.incompleteLaunch {
            problems.append(CheckProblem(
                kind: .incompleteLaunch, position: position,
                happened: "\(Self.inputName(record)) started a launch while the one before was left at step \(Self.step(incomplete))",
                expected: "the launch before to reach \(launchEnds)"
            ))
        }
        if record.outcome == .unexpected {
            let expected = expectedInputs(in: record.from)
            problems.append(CheckProblem(
                kind: .unexpected, position: position, happened: "\(record.name) in \(record.from)",
                expected: expected.isEmpty ? "no event in \(record.from)" : "\(expected.joined(separator: ", ")) in \(record.from)"
            ))
        }
        if let state = record.divergence?.state {
            problems.append(Self.wrongBelief(after: record, believed: state.believed, actual: state.actual, at: position))
        }
        if let hooks = record.divergence?.hooks {
            var differences: [String] = []
            if !hooks.missing.isEmpty { differences.append("missing \(hooks.missing.joined(separator: ", "))") }
            if !hooks.extra.isEmpty { differences.append("extra \(hooks.extra.joined(separator: ", "))") }
            if hooks.orderOnly { differences.append("the same hooks in another order") }
            problems.append(CheckProblem(
                kind: .divergence, position: position,
                happened: "for \(Self.inputName(record)) the app ran \(Self.list(hooks.ran)) (\(differences.joined(separator: "; ")))",
                expected: Self.list(hooks.expected)
            ))
        }
        if record.kind == .gap {
            let dropped = record.dropped ?? 0
            problems.append(CheckProblem(
                kind: .gap, position: position, happened: "the app's reporter dropped \(dropped) input\(dropped == 1 ? "" : "s") before delivering \(dropped == 1 ? "it" : "them")",
                expected: "every input delivered"
            ))
        }
        return problems
    }

    /// A trace step's stated belief that the replay disagrees with, in the words of a recorded
    /// belief's divergence (a replayed record carries only the hooks' divergence: the belief is
    /// the step's); `nil` when the belief held or none was stated.
    public func belief(of step: ConformanceReport.Step, at position: CheckPosition) -> CheckProblem? {
        guard step.beliefCorrect == false, let believed = step.believedState, let record = step.record, record.divergence?.state == nil else { return nil }
        return Self.wrongBelief(after: record, believed: believed, actual: record.to, at: position)
    }

    /// The one wording of a belief that differs from the state the service put the app in,
    /// recorded by the service or found by a conformance run.
    private static func wrongBelief(after record: Record, believed: String, actual: String, at position: CheckPosition) -> CheckProblem {
        CheckProblem(kind: .divergence, position: position, happened: "after \(inputName(record)) the app believed it was in \(believed)", expected: actual)
    }

    /// The problems in records retention dropped: what the instance's `counters` (kept over its
    /// whole life) count beyond the `retained` records, a problem per kind, placed at the first
    /// record retained. A history retention cut is clean only when its counters say so too.
    public func dropped(by counters: Counters, retained: [Record]) -> [CheckProblem] {
        guard let first = retained.first else { return [] }
        let kept = retained.reduce(into: Counters()) { kept, record in
            if record.outcome == .unexpected { kept.unexpected += 1 }
            if record.incompleteLaunch != nil { kept.incompleteLaunches += 1 }
            if record.divergence != nil { kept.divergences += 1 }
            if record.kind == .gap { kept.dropped += record.dropped ?? 0 }
        }
        let older: [(CheckProblem.Kind, Int64, one: String, many: String, expected: String)] = [
            (.unexpected, counters.unexpected - kept.unexpected, "unexpected event", "unexpected events", "no unexpected event"),
            (.incompleteLaunch, counters.incompleteLaunches - kept.incompleteLaunches, "incomplete launch", "incomplete launches", "every launch finished"),
            (.divergence, counters.divergences - kept.divergences, "divergent record", "divergent records", "the app's code to agree with it"),
            (.gap, counters.dropped - kept.dropped, "input the app's reporter dropped", "inputs the app's reporter dropped", "every input delivered"),
        ]
        return older.filter { $0.1 > 0 }.map { kind, count, one, many, expected in
            CheckProblem(
                kind: kind, position: .sequence(first.sequence),
                happened: "\(count) \(count == 1 ? one : many) in older records retention dropped (counted on the instance)", expected: expected
            )
        }
    }

    /// The first record that names a state, event or action the model does not have, in words;
    /// `nil` when every record fits it. A history checked against another model would be judged
    /// by rows it never had.
    public func foreignName(in records: [Record]) -> String? {
        let states = Set(model.states.map(\.name))
        let inputs: [InputKind: Set<String>] = [.event: Set(events.keys), .action: Set(model.actions.map(\.name))]
        for record in records {
            if let state = [record.from, record.to].first(where: { !states.contains($0) }) {
                return "seq \(record.sequence) names the state \(state), which \(model.name) does not have"
            }
            if let known = inputs[record.kind], !known.contains(record.name) {
                return "seq \(record.sequence) names the \(record.kind.rawValue) \(record.name), which \(model.name) does not have"
            }
        }
        return nil
    }

    /// A trace step the model refused (`error`: the reason the service or the machine gave).
    public func invalidInput(_ error: String, at position: CheckPosition) -> CheckProblem {
        CheckProblem(kind: .invalidInput, position: position, happened: error, expected: "an input it declares, with its parameters")
    }

    /// The launch `breadcrumb` marks as unfinished where a history ends (at `position`, its last record); `nil` when none is.
    public func unfinishedLaunch(_ breadcrumb: Breadcrumb, at position: CheckPosition) -> CheckProblem? {
        guard let incomplete = breadcrumb.incompleteLaunch else { return nil }
        return CheckProblem(
            kind: .incompleteLaunch, position: position, happened: "it ends part-way through a launch, at step \(Self.step(incomplete))",
            expected: "the launch to reach \(launchEnds)"
        )
    }

    /// Where the launch is after `records`, from `start`: the launch effects of each event and
    /// of the row it took, as the machine ran them (a relaunch keeps the breadcrumb).
    public func breadcrumb(after records: [Record], from start: Breadcrumb = Breadcrumb()) -> Breadcrumb {
        records.reduce(start) { breadcrumb, record in
            guard record.kind == .event else { return breadcrumb }
            let effects = (events[record.name]?.effects ?? []) + (record.row.flatMap { rows[$0]?.effects } ?? [])
            return effects.reduce(breadcrumb) { $0.applying($1) }
        }
    }

    /// The events the model has a row for in `state`, in table order.
    public func expectedInputs(in state: String) -> [String] {
        var seen: Set<String> = []
        return model.transitions.filter { $0.from == state }.map(\.event).filter { seen.insert($0).inserted }
    }

    /// Where a launch finishes: the states the rows that clear the breadcrumb lead to.
    private var launchEnds: String {
        var seen: Set<String> = []
        let states = model.transitions.filter { $0.effects.contains(.clearBreadcrumb) }.map { $0.to ?? $0.from }.filter { seen.insert($0).inserted }
        return states.isEmpty ? "its end" : states.joined(separator: " or ")
    }

    private static func inputName(_ record: Record) -> String { record.kind == .relaunch ? "a relaunch" : record.name }

    private static func step(_ incomplete: IncompleteLaunch) -> String {
        incomplete.step + (incomplete.isSceneConnected ? " (a scene connected)" : "")
    }

    private static func list(_ hooks: [String]) -> String { hooks.isEmpty ? "no hook" : hooks.joined(separator: ", ") }
}

/// Which instances a check or a wait is about.
public enum InstanceSelection: Sendable, Equatable {
    /// These instances, by id.
    case ids([String])
    /// Every instance carrying all these labels (such as `["run": "1234"]`: every instance one
    /// test run made), as `GET /v1/instances?label=KEY=VALUE` lists them.
    case labels([String: String])
}

/// What to wait for before checking: an app's reporter in another process (a UI test's app)
/// may not have delivered its queue when the test ends.
public enum DeliveryCondition: Sendable, Equatable {
    /// Until every selected instance exists (by labels: at least one) and none has gained a
    /// record for this many seconds (by labels, nor has another appeared).
    case quiet(TimeInterval)
    /// Until every selected instance has recorded an event or action of this name: a marker the
    /// app sends last (by labels: and at least one instance carries them).
    case input(String)
}

/// A wait for delivery that its bound ended first.
public struct DeliveryTimeout: Error, Sendable, Equatable, CustomStringConvertible {
    public var condition: DeliveryCondition
    /// The bound, in seconds.
    public var timeout: TimeInterval
    /// The instances that had not met the condition (for `quiet`: those still changing; empty
    /// when, by labels, none carries them yet).
    public var waitingFor: [String]

    public var description: String {
        let what: String
        switch condition {
        case .quiet(let seconds): what = "quiet for \(Self.inWords(seconds))"
        case .input(let name): what = "\(name) recorded"
        }
        let who = waitingFor.isEmpty ? "no instance matched" : "still waiting for \(waitingFor.joined(separator: ", "))"
        return "not \(what) within \(Self.inWords(timeout)): \(who)"
    }

    /// Seconds as a message says them: `2 s`, `0.3 s`.
    static func inWords(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

extension LifecycleClient {
    /// Checks each instance's recorded history against its model; one ``InstanceCheck`` per
    /// instance, in the order given (by labels: in id order). An instance that does not exist
    /// throws its 404 problem. Reads only: nothing is stored.
    public func check(_ selection: InstanceSelection) async throws -> [InstanceCheck] {
        var models: [String: HistoryCheck] = [:]
        var checks: [InstanceCheck] = []
        for id in try await ids(of: selection) {
            // The instance first, then its history up to the instance's version: the breadcrumb
            // and the records describe the same moment, whatever arrives meanwhile.
            let instance = try await self.instance(id)
            let checker: HistoryCheck
            if let known = models[instance.model] {
                checker = known
            } else {
                checker = HistoryCheck(model: try await model(instance.model).definition)
                models[instance.model] = checker
            }
            var records: [Record] = []
            for try await record in history(of: id, pageSize: 1000) {
                guard record.version <= instance.version else { break }
                records.append(record)
            }
            checks.append(InstanceCheck(
                instance: id, model: instance.model, records: records.count,
                problems: checker.dropped(by: instance.counters, retained: records) + checker.problems(in: records, endingAt: instance.breadcrumb)
            ))
        }
        return checks
    }

    /// ``check(_:)`` of these instances.
    public func check(instances ids: [String]) async throws -> [InstanceCheck] {
        try await check(.ids(ids))
    }

    /// Waits until `condition` holds for the selected instances, at most `timeout` seconds
    /// (throwing ``DeliveryTimeout`` then), asking the service every `pollInterval` seconds.
    /// An instance that does not exist yet is waited for: its creation may still be queued.
    public func waitForDelivery(
        _ selection: InstanceSelection, until condition: DeliveryCondition, timeout: TimeInterval, pollInterval: TimeInterval = 0.2
    ) async throws {
        let start = ProcessInfo.processInfo.systemUptime
        let deadline = start + timeout.asWait
        var versions: [String: Int64] = [:]
        var quietSince = start
        var markerSeen: Set<String> = []
        var readAfter: [String: Int64] = [:]
        while true {
            let now = ProcessInfo.processInfo.systemUptime
            var waiting: [String] = []
            switch condition {
            case .quiet(let seconds):
                let current = try await self.versions(of: selection)
                if current != versions { (versions, quietSince) = (current, now) }
                // Quiet counts from when every instance named is there (by labels: one is), not
                // before: until then their reports may still be on the way.
                let absent: [String], isThere: Bool
                switch selection {
                case .ids(let ids):
                    absent = ids.filter { current[$0] == nil }
                    isThere = absent.isEmpty
                case .labels:
                    (absent, isThere) = ([], !current.isEmpty)
                }
                if !isThere {
                    quietSince = now
                } else if now - quietSince >= seconds {
                    return
                }
                waiting = absent.isEmpty ? current.keys.sorted() : absent
            case .input(let name):
                let ids = try await ids(of: selection)
                for id in ids where !markerSeen.contains(id) {
                    if try await recorded(name, by: id, after: &readAfter[id, default: 0]) { markerSeen.insert(id) }
                }
                waiting = ids.filter { !markerSeen.contains($0) }
                if !ids.isEmpty, waiting.isEmpty { return }
            }
            guard now < deadline else { throw DeliveryTimeout(condition: condition, timeout: timeout, waitingFor: waiting) }
            try await Task.sleep(nanoseconds: UInt64(min(pollInterval, max(deadline - now, 0.01)).asWait * 1e9))
        }
    }

    /// The ids a selection names, in its order (by labels: in id order).
    private func ids(of selection: InstanceSelection) async throws -> [String] {
        switch selection {
        case .ids(let ids): return ids
        case .labels(let labels):
            var ids: [String] = []
            for try await instance in instances(filter: InstanceFilter(labels: labels), pageSize: 1000) { ids.append(instance.id) }
            return ids
        }
    }

    /// Each selected instance's version now; an absent one is left out.
    private func versions(of selection: InstanceSelection) async throws -> [String: Int64] {
        var versions: [String: Int64] = [:]
        switch selection {
        case .ids(let ids):
            for id in ids {
                do {
                    versions[id] = try await instance(id).version
                } catch let error as LifecycleClientError where error.problem?.status == 404 {
                    continue
                }
            }
        case .labels(let labels):
            for try await instance in instances(filter: InstanceFilter(labels: labels), pageSize: 1000) { versions[instance.id] = instance.version }
        }
        return versions
    }

    /// Whether `id` recorded an event or action `name` after sequence `after` (moved past what was read).
    private func recorded(_ name: String, by id: String, after: inout Int64) async throws -> Bool {
        while true {
            let page: HistoryPage
            do {
                page = try await historyPage(of: id, after: after, limit: 1000)
            } catch let error as LifecycleClientError where error.problem?.status == 404 {
                return false
            }
            if let last = page.items.last { after = last.sequence }
            if page.items.contains(where: { ($0.kind == .event || $0.kind == .action) && $0.name == name }) { return true }
            guard page.nextAfter != nil else { return false }
        }
    }
}
