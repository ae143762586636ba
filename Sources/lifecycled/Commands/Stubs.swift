// TEMPORARY, until h-client has models/conformance/stream.
import Foundation
import LifecycleClient
import LifecycleKit

struct StubReport { var firstProblem: (step: Int, kind: String, detail: String)?; var finalState = ""; var exercisedRows: [String] = [] }
extension LifecycleClient {
    func model(_ name: String) async throws -> ModelDefinition { throw CommandFailure("stub") }
    func checkConformance(_ model: String, steps: [JSONValue]) async throws -> StubReport { throw CommandFailure("stub") }
    func stream(instances: [String], outcomes: [Outcome], divergent: Bool, after: Int64?) -> AsyncThrowingStream<Record, any Error> {
        AsyncThrowingStream { $0.finish(throwing: CommandFailure("stub")) }
    }
}
