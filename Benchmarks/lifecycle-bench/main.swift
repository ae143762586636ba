import Foundation
import LifecycleKit
import LifecycleStore

// Benchmarks that need no server: `lifecycle-bench engine` and `lifecycle-bench pages DIR`.
// Run through `make bench` (release build); each prints a figure and a ratio against
// a baseline measured in the same run.

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// A foreground/background cycle of events every one of which is valid where it arrives.
let cycle = ["willResignActive", "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"]

/// The same cycle through a hand-written switch: what a machine with no table and no
/// validation costs, as the ceiling the table-driven engine is measured against.
struct HandWrittenMachine {
    enum State { case foreground, background }
    var state = State.foreground
    var version: Int64 = 0
    static let hooks: [String: [String]] = [
        "fg.willResignActive": ["Foreground.willLeave"], "fg.didBecomeActive": ["Foreground.didReturn"],
        "fg.didEnterBackground": ["Background.onTransition", "Background.didReturn"],
        "bg.willEnterForeground": ["Background.willLeave"],
        "bg.didBecomeActive": ["Foreground.onTransition", "Foreground.didReturn"],
    ]
    mutating func apply(_ event: String, at time: Date) -> Record {
        let from = state
        let hooks: [String]
        switch (state, event) {
        case (.foreground, "willResignActive"): hooks = Self.hooks["fg.willResignActive"]!
        case (.foreground, "didBecomeActive"): hooks = Self.hooks["fg.didBecomeActive"]!
        case (.foreground, "didEnterBackground"): state = .background; hooks = Self.hooks["fg.didEnterBackground"]!
        case (.background, "willEnterForeground"): hooks = Self.hooks["bg.willEnterForeground"]!
        case (.background, "didBecomeActive"): state = .foreground; hooks = Self.hooks["bg.didBecomeActive"]!
        default: hooks = []
        }
        version += 1
        return Record(
            version: version, kind: .event, name: event, from: from == .foreground ? "foreground" : "background",
            to: state == .foreground ? "foreground" : "background", outcome: from == state ? .stayed : .transitioned,
            hooks: hooks, time: time
        )
    }
}

func benchEngine() throws {
    let count = 6_000_000
    var machine = Machine(model: .iosApp)
    let now = Date()
    for event in ["didFinishLaunching", "willConnectToWindow", "didBecomeActive"] {
        _ = try machine.apply(event: event, parameters: event == "willConnectToWindow" ? ["window": .string("w")] : [:], at: now)
    }
    var baseline = HandWrittenMachine()
    var sink = 0
    // Warm-up, then the measured runs.
    for i in 0..<100_000 { sink &+= baseline.apply(cycle[i % cycle.count], at: now).hooks.count }
    for i in 0..<100_000 { sink &+= try machine.apply(event: cycle[i % cycle.count], at: now).hooks.count }

    let baselineTime = seconds { for i in 0..<count { sink &+= baseline.apply(cycle[i % cycle.count], at: Date()).hooks.count } }
    let engineTime = try seconds { for i in 0..<count { sink &+= try machine.apply(event: cycle[i % cycle.count], at: Date()).hooks.count } }
    let engineRate = Double(count) / engineTime
    let baselineRate = Double(count) / baselineTime
    print(String(format: "engine: %.0f events/s on one core (goal 1,000,000)", engineRate))
    print(String(format: "baseline (hand-written switch): %.0f events/s; ratio %.2f", baselineRate, engineRate / baselineRate))
    if sink == 42 { print("") }
}

/// History and replay pages read from a SQLite store with the default options, as the service reads them: 200 instances of
/// 250 relaunch records each, in 50 transactions. Made in `directory` if it holds no store yet (so that two builds read the
/// same file); prints one line of milliseconds a page per kind of read (Benchmarks/store-pages-bench.sh compares builds).
func benchPages(directory: String) throws {
    let fresh = !FileManager.default.fileExists(atPath: directory + "/" + SQLiteStore.fileName)
    let store = try SQLiteStore(directory: directory)
    defer { store.close() }
    let instances = 200
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .millisecondsSince1970
    let time = Date(timeIntervalSince1970: 1_800_000_000)
    if fresh {
        for group in stride(from: 0, to: instances, by: 4) {
            var written: [(StoredInstance, [Record])] = []
            for i in group..<group + 4 {
                var machine = Machine(model: .iosApp)
                var records: [Record] = []
                for _ in 0..<250 { records.append(try machine.apply(.relaunch, at: time)) }
                written.append((StoredInstance(id: "i\(i)", model: "ios-app", createdAt: time, updatedAt: time, state: machine.snapshot), records))
            }
            _ = try store.write { (t) throws(StoreError) in
                for (instance, records) in written {
                    _ = try t.insert(instance) { Array(#"{"sequence":\#($0),"instance":"\#(instance.id)","kind":"created"}"#.utf8) }
                    for record in records { _ = try t.append(record, instanceID: instance.id) { Array(try! encoder.encode($0)) } }
                }
            }
        }
    }
    let newest = store.lastSequence
    /// Milliseconds a page, over `pages` reads.
    func perPage(_ pages: Int, _ read: (Int) throws -> Void) throws -> Double {
        try seconds { for page in 0..<pages { try read(page) } } * 1000 / Double(pages)
    }
    let history = try perPage(2000) { page in
        _ = try store.history(instanceID: "i\(page % instances)", after: 0, divergentOnly: false, limit: PageLimit(records: 100))
    }
    let replay = try perPage(300) { page in
        _ = try store.replay(after: Int64(page % 40) * 1000, through: newest, filter: RecordFilter(), limit: PageLimit(records: 1000))
    }
    let filtered = try perPage(500) { page in
        let filter = RecordFilter(instances: ["i\(page % instances)"])
        _ = try store.replay(after: 0, through: newest, filter: filter, limit: PageLimit(records: 1000))
    }
    let divergent = try perPage(500) { page in
        _ = try store.replay(after: Int64(page % 40) * 1000, through: newest, filter: RecordFilter(divergentOnly: true), limit: PageLimit(records: 1000))
    }
    print(String(format: "history100 %.3f replay1000 %.3f instanceReplay %.3f divergentReplay %.3f", history, replay, filtered, divergent))
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "engine": try benchEngine()
case "pages" where arguments.count == 2: try benchPages(directory: arguments.last!)
default:
    FileHandle.standardError.write(Data("usage: lifecycle-bench engine | pages DIR\n".utf8))
    exit(2)
}
