import Foundation
import LifecycleClient
import LifecycleKit

/// `lifecycled check --instance ID … | --label KEY=VALUE … | MODEL FILE`: whether what
/// happened conforms to the model, as a CI job's step (docs/CHECKS.md).
struct CheckCommand {
    static let usage = """
        usage: lifecycled check [options] --instance ID [--instance ID ...]
               lifecycled check [options] --label KEY=VALUE [--label KEY=VALUE ...]
               lifecycled check [options] MODEL FILE

        Checks what happened against the model and lists every problem, one line each: where
        (an instance's record by its sequence number, "seq N", or a trace's step, "step N",
        0-based), its kind, what happened and what the model expects:
          unexpected        an event the model does not expect in the state it arrived in
          incompleteLaunch  a launch that stopped part-way: found by the next launch, or where
                            the history or trace ends
          divergence        the state the app's code believed, or the hooks it ran, differ
                            from the model's
          gap               inputs the app's reporter dropped before delivering them
          invalidInput      a trace step with a name or parameters the model refuses

        --instance and --label check instances' recorded histories on the service (reads
        only). MODEL FILE checks a file: a saved history page (GET .../history written to a
        file) as recorded, or a trace ({"steps": [...]} or the bare array of steps, each
        {"event": NAME, ...parameters}, {"action": NAME, ...parameters} or {"relaunch": true},
        with an optional "believedState" and "ranHooks"), replayed on a fresh machine of MODEL
        (POST /v1/models/MODEL/conformance: nothing is stored).

        exit status: 0 clean; 1 a problem (each listed on standard output), a wait that ran
        out, an instance or model the service does not have, or a service that refuses or
        cannot be reached (said on standard error); 2 a bad command line (a label or id the
        service cannot take, a marker no model has), or a FILE that is not JSON (a trailing
        comma, a comment), is neither a trace nor a history page, is one page of a longer
        history, or names states or inputs MODEL does not have.

        options:
          --instance ID       check this instance's history (repeatable)
          --label KEY=VALUE   check every instance carrying this label, such as run=1234: every
                              instance a test run made (repeatable: all must match)
          --junit FILE        also write a JUnit XML report to FILE: one test case per instance
                              (or the trace), failed with its problems
          --quiet-for TIME    first wait until no instance has gained a record for TIME (the
                              app's queue delivered), at most --timeout; TIME is 500ms, 5s, 2m
                              or plain seconds
          --until-input NAME  first wait until every instance has recorded the event or action
                              NAME (a marker the app sends last, which a model on the service
                              must have), at most --timeout
          --timeout TIME      the bound of the wait (default 60s); past it, exit 1 naming the
                              instances still waited for

        """ + ServerOptions.help + "\n"

    /// What a check reads.
    enum Subject {
        case instances(InstanceSelection)
        /// A trace file, replayed on the service.
        case trace(model: String, path: String, steps: [Conformance.Step])
        /// A saved history page, checked as recorded.
        case history(model: String, path: String, page: HistoryPage)
    }

    static let defaultTimeout: TimeInterval = 60

    let server: ServerOptions
    let subject: Subject
    let junit: String?
    /// The wait before checking instances, and its bound.
    let wait: (condition: DeliveryCondition, timeout: TimeInterval)?

    init(_ arguments: [String], environment: [String: String]) throws {
        let parsed = try Arguments(
            arguments, command: "check",
            valued: ServerOptions.flags.union(["--instance", "--label", "--junit", "--quiet-for", "--until-input", "--timeout"]), switches: []
        )
        server = try ServerOptions(parsed, environment: environment, command: "check")
        junit = try parsed.single("--junit", command: "check")
        if junit?.isEmpty == true { throw UsageError("--junit needs a file; see lifecycled check --help") }
        let ids = parsed.all("--instance")
        let labels = try Self.labels(parsed.all("--label"))
        if ids.contains("") { throw UsageError("--instance needs an id; see lifecycled check --help") }

        let quiet = try parsed.single("--quiet-for", command: "check").map { (text: String) throws(UsageError) in try Self.duration(text, flag: "--quiet-for") }
        let marker = try parsed.single("--until-input", command: "check")
        let timeout = try parsed.single("--timeout", command: "check").map { (text: String) throws(UsageError) in try Self.duration(text, flag: "--timeout") }
        if marker?.isEmpty == true { throw UsageError("--until-input needs an event or action name; see lifecycled check --help") }
        switch (quiet, marker) {
        case (let quiet?, nil): wait = (.quiet(quiet), timeout ?? Self.defaultTimeout)
        case (nil, let marker?): wait = (.input(marker), timeout ?? Self.defaultTimeout)
        case (nil, nil):
            if timeout != nil { throw UsageError("--timeout bounds a wait: give --quiet-for or --until-input too; see lifecycled check --help") }
            wait = nil
        case (_?, _?): throw UsageError("--quiet-for and --until-input are two ways to wait: give one; see lifecycled check --help")
        }

        switch (ids.isEmpty, labels.isEmpty, parsed.positional.count) {
        case (false, true, 0): subject = .instances(.ids(ids))
        case (true, false, 0): subject = .instances(.labels(labels))
        case (true, true, 2):
            if wait != nil { throw UsageError("--quiet-for and --until-input wait for instances, not for a FILE; see lifecycled check --help") }
            subject = try Self.file(model: parsed.positional[0], path: parsed.positional[1])
        case (false, false, _):
            throw UsageError("--instance and --label are two ways to name instances: give one; see lifecycled check --help")
        case (_, _, let count) where count > 0 && !(ids.isEmpty && labels.isEmpty):
            throw UsageError("MODEL FILE is checked alone, without --instance or --label; see lifecycled check --help")
        case (_, _, let count):
            throw UsageError("needs --instance ID, --label KEY=VALUE, or MODEL and FILE (\(count) given); see lifecycled check --help")
        }
    }

    /// `KEY=VALUE` words as labels (split at the first `=`).
    private static func labels(_ words: [String]) throws(UsageError) -> [String: String] {
        var labels: [String: String] = [:]
        for word in words {
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex, word.index(after: equals) != word.endIndex else {
                throw UsageError("invalid value \"\(word)\" for --label: KEY=VALUE, such as run=1234")
            }
            let key = String(word[..<equals])
            guard labels.updateValue(String(word[word.index(after: equals)...]), forKey: key) == nil else {
                throw UsageError("--label \(key) given twice: an instance carries one value per key")
            }
        }
        return labels
    }

    /// `500ms`, `5s`, `2m` or plain seconds, above 0 and at most a day.
    static func duration(_ text: String, flag: String) throws(UsageError) -> TimeInterval {
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
        let unit = units.first { text.hasSuffix($0.suffix) && Double(text.dropLast($0.suffix.count)) != nil }
        let number = Double(unit.map { String(text.dropLast($0.suffix.count)) } ?? text)
        guard let number, number.isFinite, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "." || $0.isLetter) }) else {
            throw UsageError("invalid value \"\(text)\" for \(flag): a time such as 500ms, 5s, 2m or plain seconds")
        }
        let seconds = number * (unit?.seconds ?? 1)
        guard seconds > 0, seconds <= 86_400 else { throw UsageError("invalid value \"\(text)\" for \(flag): above 0 and at most a day") }
        return seconds
    }

    /// The file's subject: a history page (an object with `items`) or a trace.
    private static func file(model: String, path: String) throws(UsageError) -> Subject {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw UsageError("cannot read \(path): \((error as NSError).localizedDescription)")
        }
        try StrictJSON.check(data, path: path)
        let document: JSONValue
        do {
            document = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw UsageError("\(path) is not JSON: \(error)")
        }
        let members: [JSONValue]
        switch document {
        case .object(let object) where object["items"] != nil:
            let page: HistoryPage
            do {
                page = try HistoryPage(json: data)
            } catch {
                throw UsageError("\(path) is not a history page (GET /v1/instances/ID/history): \(Self.reason(error))")
            }
            // Checked as the whole history, a page would pass what the pages after it hold, and
            // take a launch they finish for one left unfinished.
            if let next = page.nextAfter {
                throw UsageError(
                    "\(path) is one page of a longer history (more records follow after seq \(next)): "
                        + "check the instance on the service with --instance ID, or save the whole history in one page (?limit=1000)"
                )
            }
            return .history(model: model, path: path, page: page)
        case .array(let steps): members = steps
        case .object(let object) where object.keys.sorted() == ["steps"]:
            guard case .array(let steps)? = object["steps"] else { throw UsageError("\(path): \"steps\" is not an array") }
            members = steps
        default:
            throw UsageError("\(path) is neither a trace ({\"steps\": [...]} or an array of steps) nor a history page ({\"items\": [...], ...})")
        }
        let steps = try members.enumerated().map { index, member throws(UsageError) in
            guard case .object(let step) = member, let parsed = Self.step(step) else {
                throw UsageError("\(path): step \(index) is not {\"event\" | \"action\": NAME, ...parameters} or {\"relaunch\": true}")
            }
            return parsed
        }
        return .trace(model: model, path: path, steps: steps)
    }

    /// A step as the conformance endpoint takes it; `nil` when it is not one.
    private static func step(_ members: [String: JSONValue]) -> Conformance.Step? {
        var parameters: [String: Value] = [:]
        for (name, value) in members where !["event", "action", "relaunch", "believedState", "ranHooks"].contains(name) {
            switch value {
            case .string(let text): parameters[name] = .string(text)
            case .bool(let flag): parameters[name] = .bool(flag)
            case .integer(let number): parameters[name] = .integer(number)
            case .number(let number): parameters[name] = .number(number)
            default: return nil
            }
        }
        let input: Input
        if let name = members["event"]?.stringValue {
            input = .event(name, parameters)
        } else if let name = members["action"]?.stringValue {
            input = .action(name, parameters)
        } else if members["relaunch"] == .bool(true), parameters.isEmpty {
            input = .relaunch
        } else {
            return nil
        }
        var ranHooks: [String]?
        if let hooks = members["ranHooks"] {
            guard case .array(let names) = hooks else { return nil }
            ranHooks = names.compactMap(\.stringValue)
            guard ranHooks?.count == names.count else { return nil }
        }
        if members["believedState"] != nil, members["believedState"]?.stringValue == nil { return nil }
        return Conformance.Step(input, believedState: members["believedState"]?.stringValue, ranHooks: ranHooks)
    }

    /// A decoding error in words: what is wrong and where.
    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return String(describing: error) }
        switch error {
        case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context):
            let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            return (path.isEmpty ? "" : "at \(path): ") + context.debugDescription
        @unknown default: return String(describing: error)
        }
    }

    func run() async throws -> Int32 {
        do {
            return try await check()
        } catch {
            // A report an earlier run left must not stand for this one: CI publishes the file.
            let reason = (error as? LifecycleClientError)?.problem.map { "\($0.status) \($0.title): \($0.detail)" } ?? ClientCommand.describe(error)
            try writeJUnit(JUnitReport(.error(reason)))
            throw error
        }
    }

    private func check() async throws -> Int32 {
        let client = ClientCommand.client(server)
        let checks: [InstanceCheck]
        switch subject {
        case .instances(let selection):
            if case .input(let name)? = wait?.condition {
                // A marker no model has can never be recorded: said now, not when the wait runs out.
                let models = try await client.models()
                if !models.contains(where: { $0.definition.events.contains { $0.name == name } || $0.definition.actions.contains { $0.name == name } }) {
                    throw UsageError(
                        "no model on the service has an event or action \(name): it can never be recorded (the models: "
                            + models.map(\.name).joined(separator: ", ") + "); wait for the input the app sends last, or --quiet-for"
                    )
                }
            }
            do {
                if let wait { try await client.waitForDelivery(selection, until: wait.condition, timeout: wait.timeout) }
                checks = try await client.check(selection)
            } catch let error as LifecycleClientError where error.problem?.status == 400 {
                // Only what the command line named can be refused so (a label or an id the service cannot take).
                throw UsageError(error.problem?.detail ?? "\(error)")
            } catch let timeout as DeliveryTimeout {
                Output.error("lifecycled check: \(timeout)")
                try writeJUnit(JUnitReport(.error(timeout.description)))
                return ClientCommand.Status.failure
            }
            if checks.isEmpty, case .labels(let labels) = selection {
                // A run that made no instance is a rig that reported nothing: not a clean run.
                let named = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                Output.error("lifecycled check: no instance carries \(named)")
                try writeJUnit(JUnitReport(.nothingReported(labels: named)))
                return ClientCommand.Status.failure
            }
            for line in checks.flatMap(\.problemLines) { Output.line(Readable.escaped(line)) }
            let failed = checks.filter { !$0.isClean }
            let records = checks.reduce(0) { $0 + $1.records }
            Output.line(
                "checked \(Output.counted(checks.count, "instance")), \(Output.counted(records, "record")): "
                    + (failed.isEmpty
                        ? "clean"
                        : "\(Output.counted(failed.reduce(0) { $0 + $1.problems.count }, "problem")) in \(Output.counted(failed.count, "instance"))")
            )
        case .trace(let model, let path, let steps):
            let report = try await client.checkConformance(of: model, steps: steps)
            let checker = HistoryCheck(model: try await client.model(model).definition)
            var problems: [CheckProblem] = []
            for (index, step) in report.steps.enumerated() {
                if let record = step.record { problems += checker.problems(of: record, at: .step(index)) }
                if let belief = checker.belief(of: step, at: .step(index)) { problems.append(belief) }
                if let error = step.error { problems.append(checker.invalidInput(error, at: .step(index))) }
            }
            let records = report.steps.compactMap(\.record)
            if !records.isEmpty, let unfinished = checker.unfinishedLaunch(checker.breadcrumb(after: records), at: .step(report.steps.count - 1)) {
                problems.append(unfinished)
            }
            checks = [InstanceCheck(instance: path, model: model, records: steps.count, problems: problems)]
            for problem in problems { Output.line(Readable.escaped(problem.description)) }
            let rows = report.exercisedRows.isEmpty ? "" : ", rows \(report.exercisedRows.joined(separator: " "))"
            Output.line(
                (problems.isEmpty ? "conforming: " : "not conforming: \(Output.counted(problems.count, "problem")) in ")
                    + "\(Output.counted(steps.count, "step")), final state \(report.finalState)\(rows)"
            )
        case .history(let model, let path, let page):
            let checker = HistoryCheck(model: try await client.model(model).definition)
            if let foreign = checker.foreignName(in: page.items) {
                throw UsageError("\(path) is not the history of an instance of \(model): \(foreign)")
            }
            let problems = checker.problems(in: page.items)
            checks = [InstanceCheck(instance: page.items.first?.instance ?? path, model: model, records: page.items.count, problems: problems)]
            for problem in problems { Output.line(Readable.escaped(problem.description)) }
            Output.line(
                "\(path): \(Output.counted(page.items.count, "record"))"
                    + (problems.isEmpty ? ", clean" : ", \(Output.counted(problems.count, "problem"))")
                    + (page.olderDropped ? " (older records were dropped by retention: not checked)" : "")
            )
        }
        try writeJUnit(JUnitReport(checks: checks))
        return checks.allSatisfy(\.isClean) ? ClientCommand.Status.success : ClientCommand.Status.failure
    }

    /// Writes the JUnit report when `--junit` asked for one.
    private func writeJUnit(_ report: JUnitReport) throws {
        guard let junit else { return }
        do {
            try Data(report.xml.utf8).write(to: URL(fileURLWithPath: junit), options: .atomic)
        } catch {
            throw CommandFailure("cannot write \(junit): \((error as NSError).localizedDescription)")
        }
    }
}
