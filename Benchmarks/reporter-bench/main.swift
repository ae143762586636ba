import Foundation
import LifecycleClient
import LifecycleKit

// `reporter-bench SERVER_URL [EVENTS] [ROUNDS]` (Benchmarks/reporter-bench.sh starts the
// service): what LifecycleReporter costs an app and how fast it delivers.
// - The journal's cost per `report` call (append + fsync): median and p99 in µs, every call
//   of every round timed.
// - Delivery: a queue of EVENTS events flushed through POST /v1/batch one item per request
//   (batchSize 1: what single posts cost) and in batches of 100, rounds alternating in order,
//   medians of events/s.
// Exits 1 unless every event was stored exactly once (the instance's version counts them).

let arguments = CommandLine.arguments
guard arguments.count >= 2, let server = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: reporter-bench SERVER_URL [EVENTS] [ROUNDS]\n".utf8))
    exit(2)
}
let events = arguments.count > 2 ? Int(arguments[2]) ?? 1000 : 1000
let rounds = arguments.count > 3 ? Int(arguments[3]) ?? 3 : 3
let client = LifecycleClient(configuration: .init(server: server))
let cycle = ["willResignActive", "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]
let launch: [(String, [String: Value])] = [("didFinishLaunching", [:]), ("willConnectToWindow", ["window": .string("main")]), ("didBecomeActive", [:])]

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

var reportMicroseconds: [Double] = []
var rates: [Int: [Double]] = [1: [], 100: []]

/// Queues `events` events on a fresh instance (timing each `report`), flushes them in batches
/// of `batchSize` and returns events/s of the flush.
@MainActor func round(_ batchSize: Int, _ label: String) async throws -> Double {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-bench-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }  // a leftover temporary folder is no failure of the bench
    let reporter = try LifecycleReporter(
        client: client, configuration: .init(directory: folder, batchSize: batchSize, maxItems: events + 10, deliversAutomatically: false)
    )
    let instance = "reporter-bench-\(label)"
    try reporter.create(instance: instance)
    for (event, parameters) in launch { try reporter.report(event: event, parameters: parameters, instance: instance) }
    try await reporter.flush()
    for index in 0..<events {
        let start = now()
        try reporter.report(event: cycle[index % cycle.count], instance: instance)
        reportMicroseconds.append(Double(now() - start) / 1000)
    }
    let start = now()
    let delivered = try await reporter.flush()
    let seconds = Double(now() - start) / 1e9
    let version = try await client.instance(instance).version
    guard delivered == events, version == Int64(events + launch.count) else {
        FileHandle.standardError.write(Data("\(label): \(delivered) delivered, version \(version), \(events + launch.count) expected\n".utf8))
        exit(1)
    }
    return Double(events) / seconds
}

for r in 0..<rounds {
    for size in r % 2 == 0 ? [1, 100] : [100, 1] {
        rates[size]!.append(try await round(size, "\(r)-\(size)"))
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
}

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

let single = median(rates[1]!)
let batched = median(rates[100]!)
print("report() journal cost: median \(String(format: "%.0f", median(reportMicroseconds))) µs, p99 \(String(format: "%.0f", percentile(reportMicroseconds, 0.99))) µs (\(reportMicroseconds.count) calls, append + fsync)")
print("delivery, \(events) queued events, median of \(rounds) rounds: one per request \(Int(single)) events/s, batches of 100 \(Int(batched)) events/s (\(String(format: "%.1f", batched / single))x)")
