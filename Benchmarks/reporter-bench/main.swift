import Foundation
import LifecycleClient
import LifecycleKit
import LifecycleLocks

// `reporter-bench SERVER_URL [EVENTS] [ROUNDS]` (Benchmarks/reporter-bench.sh starts the
// service): what LifecycleReporter costs an app and how fast it delivers.
// - What `report` costs its caller (the main thread in an app): 5,000 calls on a queue that
//   does not deliver, against the path it replaced, a write and an fsync of the same bytes on
//   the calling thread, in blocks of 500 alternating; median, p99 and max in µs.
// - The same while the automatic sender delivers to the service: acks synced and the journal
//   compacted (a 64 KiB threshold) during the calls, as in an app that is online.
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

/// `count` calls of `report` on a fresh queue that does not deliver, each timed, in µs.
func reportCalls(_ reporter: LifecycleReporter, _ count: Int, _ instance: String, offset: Int = 0) throws -> [Double] {
    try (offset..<offset + count).map { index in
        let start = now()
        try reporter.report(event: cycle[index % cycle.count], instance: instance)
        return Double(now() - start) / 1000
    }
}

/// `count` appends of `bytes` with an fsync each, as `report` did before the group sync, in µs.
func writeAndSync(_ descriptor: Int32, _ bytes: [UInt8], _ count: Int, _ offset: inout Int) -> [Double] {
    (0..<count).map { _ in
        let start = now()
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
        guard written == bytes.count, fsync(descriptor) == 0 else {
            FileHandle.standardError.write(Data("write or fsync failed: \(String(cString: strerror(errno)))\n".utf8))
            exit(1)
        }
        offset += bytes.count
        return Double(now() - start) / 1000
    }
}

let callFolder = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-bench-calls-\(UUID().uuidString)")
let callReporter = try LifecycleReporter(
    client: client, configuration: .init(directory: callFolder, maxItems: 100_000, deliversAutomatically: false)
)
try callReporter.create(instance: "reporter-bench-calls")
let baselinePath = callFolder.appendingPathComponent("baseline").path
let baseline = open(baselinePath, O_RDWR | O_CREAT | O_TRUNC, 0o644)
guard baseline >= 0 else { fatalError("cannot open \(baselinePath)") }
// An item's entry is about 300 bytes (header and JSON): the baseline writes as many.
let entryBytes = [UInt8](repeating: 0x61, count: 300)
var baselineOffset = 0
var callMicroseconds: [Double] = []
var baselineMicroseconds: [Double] = []
for block in 0..<10 {
    if block % 2 == 0 {
        callMicroseconds += try reportCalls(callReporter, 500, "reporter-bench-calls")
        baselineMicroseconds += writeAndSync(baseline, entryBytes, 500, &baselineOffset)
    } else {
        baselineMicroseconds += writeAndSync(baseline, entryBytes, 500, &baselineOffset)
        callMicroseconds += try reportCalls(callReporter, 500, "reporter-bench-calls")
    }
}
close(baseline)
// The reporter's folder is temporary: a leftover is no failure of the bench.
try? FileManager.default.removeItem(at: callFolder)

/// Delivered items counted from the sender's events, read while it runs.
final class Delivered: Sendable {
    private let count = LockedValue(0)
    var value: Int { count.withLock { $0 } }
    func record(_ event: LifecycleReporter.Event) {
        if case .delivered = event { count.withLock { $0 += 1 } }
    }
}

/// 5,000 `report` calls, each timed, while the reporter's own sender delivers them as they come;
/// how many were delivered during the calls (the overlap), in µs.
func reportCallsWhileDelivering() async throws -> (calls: [Double], deliveredMeanwhile: Int) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-bench-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }  // a leftover temporary folder is no failure of the bench
    let delivered = Delivered()
    let reporter = try LifecycleReporter(
        client: client, configuration: .init(directory: folder, maxItems: 100_000, compactionThreshold: 64 << 10), onEvent: delivered.record
    )
    let instance = "reporter-bench-live-\(UUID().uuidString.prefix(8))"
    try reporter.create(instance: instance)
    for (event, parameters) in launch { try reporter.report(event: event, parameters: parameters, instance: instance) }
    var calls: [Double] = []
    for block in 0..<10 {
        calls += try reportCalls(reporter, 500, instance, offset: block * 500)
        // A pause as between an app's notifications, so that batches are answered meanwhile.
        try await Task.sleep(nanoseconds: 20_000_000)
    }
    let meanwhile = delivered.value
    let deadline = now() + 60_000_000_000
    while reporter.status.pendingItems > 0 && now() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
    let version = try await client.instance(instance).version
    guard version == Int64(calls.count + launch.count) else {
        FileHandle.standardError.write(Data("live: version \(version), \(calls.count + launch.count) expected\n".utf8))
        exit(1)
    }
    return (calls, meanwhile)
}

let (liveMicroseconds, deliveredMeanwhile) = try await reportCallsWhileDelivering()

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
func row(_ label: String, _ values: [Double]) -> String {
    "| \(label) | \(values.count) | \(String(format: "%.1f", median(values))) | \(String(format: "%.1f", percentile(values, 0.99))) | \(String(format: "%.0f", values.max() ?? 0)) |"
}
print("| the caller's wait per call | calls | median µs | p99 µs | max µs |")
print("|---|---|---|---|---|")
print(row("`report()`: write, group sync off the thread", callMicroseconds))
print(row("baseline: write + fsync on the thread (the old path)", baselineMicroseconds))
print(row("`report()` while its sender delivers (acks, compactions)", liveMicroseconds))
print(row("`report()` queueing the delivery rounds below", reportMicroseconds))
print()
print("while delivering: \(deliveredMeanwhile) of \(liveMicroseconds.count + launch.count + 1) items delivered during the calls")
print("delivery, \(events) queued events, median of \(rounds) rounds: one per request \(Int(single)) events/s, batches of 100 \(Int(batched)) events/s (\(String(format: "%.1f", batched / single))x)")
