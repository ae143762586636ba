import Foundation
import LifecycleClient
import LifecycleKit

/// `lifecycled check MODEL TRACE.json`.
struct CheckCommand {
    static let usage = """
        usage: lifecycled check [options] MODEL TRACE.json

        Replays the trace in TRACE.json on a fresh machine of MODEL, on the service
        (POST /v1/models/MODEL/conformance: nothing is stored), and prints "conforming" and
        where the replay ended, or the first problem: its step (0-based), kind
        (unexpectedEvent, beliefMismatch, hookDivergence, invalidInput) and detail.

        TRACE.json holds {"steps": [...]} or the bare array of steps, each
        {"event": NAME, ...parameters}, {"action": NAME, ...parameters} or {"relaunch": true},
        with an optional "believedState" and "ranHooks" (README.md, "The API in brief").

        exit status: 0 the trace conforms; 1 it does not (the first problem on standard
        output), or the service refused it (a name the model lacks, an unknown model: the
        problem on standard error) or cannot be reached; 2 a bad command line or a file that
        is no trace.

        options:

        """ + ServerOptions.help + "\n"

    let server: ServerOptions
    let model: String
    let steps: [Conformance.Step]

    init(_ arguments: [String], environment: [String: String]) throws {
        let parsed = try Arguments(arguments, command: "check", valued: ServerOptions.flags, switches: [])
        server = try ServerOptions(parsed, environment: environment, command: "check")
        guard parsed.positional.count == 2 else {
            throw UsageError("needs MODEL and TRACE.json (\(parsed.positional.count) given); see lifecycled check --help")
        }
        model = parsed.positional[0]
        let path = parsed.positional[1]
        let trace: JSONValue
        do {
            trace = try JSONDecoder().decode(JSONValue.self, from: try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch let error as DecodingError {
            throw UsageError("\(path) is not JSON: \(Self.reason(error))")
        } catch {
            throw UsageError("cannot read \(path): \((error as NSError).localizedDescription)")
        }
        let members: [JSONValue]
        switch trace {
        case .array(let steps): members = steps
        case .object(let document) where document.keys.sorted() == ["steps"]:
            guard case .array(let steps)? = document["steps"] else { throw UsageError("\(path): \"steps\" is not an array") }
            members = steps
        default:
            throw UsageError("\(path) is not a trace: {\"steps\": [...]} or an array of steps")
        }
        steps = try members.enumerated().map { index, member throws(UsageError) in
            guard case .object(let step) = member, let parsed = Self.step(step) else {
                throw UsageError("\(path): step \(index) is not {\"event\" | \"action\": NAME, ...parameters} or {\"relaunch\": true}")
            }
            return parsed
        }
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

    private static func reason(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context):
            context.underlyingError.map { ($0 as NSError).localizedDescription } ?? context.debugDescription
        @unknown default: String(describing: error)
        }
    }

    func run() async throws -> Int32 {
        let report = try await ClientCommand.client(server).checkConformance(of: model, steps: steps)
        guard let problem = report.firstProblem else {
            Output.line("conforming: \(steps.count) steps, final state \(report.finalState), rows \(report.exercisedRows.joined(separator: " "))")
            return ClientCommand.Status.success
        }
        Output.line("step \(problem.step): \(problem.kind): \(problem.detail)")
        return ClientCommand.Status.failure
    }
}
