import Foundation
import LifecycleKit

// Benchmarks that need no server: `lifecycle-bench engine` and `lifecycle-bench startup`.
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

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "engine": try benchEngine()
default:
    FileHandle.standardError.write(Data("usage: lifecycle-bench engine\n".utf8))
    exit(2)
}
