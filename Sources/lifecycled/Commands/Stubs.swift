// TEMPORARY, until h-client commits models/conformance/stream (same signatures as its work in progress).
import Foundation
import LifecycleClient
import LifecycleKit

struct StubDescription { var definition: ModelDefinition }
struct StubProblem { var step: Int; var kind: String; var detail: String }
struct StubReport { var firstProblem: StubProblem?; var finalState = ""; var exercisedRows: [String] = [] }
struct StubGap { var droppedThrough: Int64 }
struct StubReset { var newest: Int64 }
enum StubEvent { case record(Record), gap(StubGap), reset(StubReset), created, deleted }
struct RecordFilter { var instances: [String]; var outcomes: [Outcome]; var divergent: Bool }
extension LifecycleClient {
    func model(_ name: String) async throws -> StubDescription { throw CommandFailure("stub") }
    func checkConformance(of model: String, steps: [Conformance.Step]) async throws -> StubReport { throw CommandFailure("stub") }
    func records(filter: RecordFilter, after: Int64?) -> AsyncThrowingStream<StubEvent, any Error> {
        AsyncThrowingStream { $0.finish(throwing: CommandFailure("stub")) }
    }
}
