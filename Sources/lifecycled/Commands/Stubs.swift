// TEMPORARY, until h-client has models/conformance/stream and h-reporter lands.
import Foundation
import LifecycleClient
import LifecycleKit

struct QueuedPost {
    let directory: String
    let client: LifecycleClient
    struct Delivery { var delivered = 0; var failure: LifecycleClientError?; var pending = 0 }
    func post(_ item: BatchItem) async throws -> Int32 { throw CommandFailure("--queue is not built yet") }
    func flush() async throws -> Delivery { throw CommandFailure("--queue is not built yet") }
}
struct StubReport { var firstProblem: (step: Int, kind: String, detail: String)?; var finalState = ""; var exercisedRows: [String] = [] }
extension LifecycleClient {
    func model(_ name: String) async throws -> ModelDefinition { throw CommandFailure("stub") }
    func checkConformance(_ model: String, steps: [JSONValue]) async throws -> StubReport { throw CommandFailure("stub") }
    func stream(instances: [String], outcomes: [Outcome], divergent: Bool, after: Int64?) -> AsyncThrowingStream<Record, any Error> {
        AsyncThrowingStream { $0.finish(throwing: CommandFailure("stub")) }
    }
}
