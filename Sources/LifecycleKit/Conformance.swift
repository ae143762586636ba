import Foundation

/// Replays what an app recorded and says where it departed from the model.
public enum Conformance {
    /// One recorded input, with the state the app believed it was in afterwards and the hooks
    /// its code ran, where it said.
    public struct Step: Sendable, Equatable, Codable {
        public var input: Input
        public var believedState: String?
        public var ranHooks: [String]?

        public init(_ input: Input, believedState: String? = nil, ranHooks: [String]? = nil) {
            self.input = input
            self.believedState = believedState
            self.ranHooks = ranHooks
        }
    }

    /// Why a replay stopped conforming.
    public enum Problem: Sendable, Equatable {
        /// The model does not expect this event in the state the replay had reached.
        case unexpectedEvent(step: Int, event: String, state: String)
        /// The app believed it was somewhere else.
        case beliefMismatch(step: Int, believed: String, actual: String)
        /// The app's code ran other hooks than the model's row (see ``Divergence/Hooks``).
        case hookDivergence(step: Int, hooks: Divergence.Hooks)
        /// The model does not know the input or its parameters.
        case invalidInput(step: Int, error: InputError)
    }

    /// The outcome of one replayed step.
    public struct StepResult: Sendable, Equatable {
        public var record: Record?
        public var error: InputError?
        public var believedState: String?
        /// `nil` when the app stated no belief.
        public var isBeliefCorrect: Bool?
    }

    /// The whole replay.
    public struct Report: Sendable, Equatable {
        public var steps: [StepResult]
        public var firstProblem: Problem?
        public var finalState: String
        /// Stable ids of the transition rows the sequence exercised, in table order.
        public var exercisedRows: [String]
        public var isConforming: Bool { firstProblem == nil }
    }

    /// Replays `steps` on a fresh machine of `model`, reporting every step.
    public static func check(_ steps: [Step], against model: Model) -> Report {
        var machine = Machine(model: model)
        var results: [StepResult] = []
        var firstProblem: Problem?
        var exercised: Set<String> = []
        let time = Date(timeIntervalSince1970: 0)

        for (index, step) in steps.enumerated() {
            var result = StepResult(believedState: step.believedState)
            do {
                // The belief is checked below as it always was (a state the model lacks is a
                // mismatch here, not an invalid input); the hooks as a live event's are.
                let record = try machine.apply(step.input, reported: AppReport(ranHooks: step.ranHooks), at: time)
                result.record = record
                if let row = record.row { exercised.insert(row) }
                if record.outcome == .unexpected, firstProblem == nil {
                    firstProblem = .unexpectedEvent(step: index, event: record.name, state: record.from)
                }
                if let belief = step.believedState {
                    result.isBeliefCorrect = belief == record.to
                    if belief != record.to, firstProblem == nil {
                        firstProblem = .beliefMismatch(step: index, believed: belief, actual: record.to)
                    }
                }
                if let hooks = record.divergence?.hooks, firstProblem == nil {
                    firstProblem = .hookDivergence(step: index, hooks: hooks)
                }
            } catch {
                result.error = error
                if firstProblem == nil { firstProblem = .invalidInput(step: index, error: error) }
            }
            results.append(result)
        }
        let rowOrder = model.definition.transitions.indices.map(Model.rowID)
        return Report(
            steps: results, firstProblem: firstProblem, finalState: machine.stateName,
            exercisedRows: rowOrder.filter(exercised.contains)
        )
    }
}
