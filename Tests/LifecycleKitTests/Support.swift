import Foundation
@testable import LifecycleKit

let t0 = Date(timeIntervalSince1970: 1_700_000_000)
let window: [String: Value] = ["window": .string("main")]

/// Inputs that bring a fresh `ios-app` instance to each state.
let iosPaths: [String: [Input]] = [
    "initializing": [],
    "launching": [.event("didFinishLaunching")],
    "connected": [.event("didFinishLaunching"), .event("willConnectToWindow", window)],
    "foreground": [.event("didFinishLaunching"), .event("willConnectToWindow", window), .event("didBecomeActive")],
    "background": [.event("didFinishLaunching"), .event("willConnectToWindow", window), .event("didEnterBackground")],
    "simulated": [.event("didFinishLaunching", ["isTesting": .bool(true)])],
    "terminating": [.event("didFinishLaunching", ["setupError": .string("disk full")])],
]

let androidPaths: [String: [Input]] = [
    "initialized": [],
    "created": [.event("onCreate")],
    "started": [.event("onCreate"), .event("onStart")],
    "resumed": [.event("onCreate"), .event("onStart"), .event("onResume")],
    "destroyed": [.event("onCreate"), .event("onDestroy")],
]

func machine(_ model: Model, after inputs: [Input]) throws -> Machine {
    var m = Machine(model: model)
    for input in inputs { _ = try m.apply(input, at: t0) }
    return m
}

func iosMachine(in state: String) throws -> Machine {
    let m = try machine(.iosApp, after: iosPaths[state]!)
    precondition(m.stateName == state)
    return m
}

/// Parameters that satisfy an event's required parameters.
func minimalParameters(for event: String) -> [String: Value] {
    event == "willConnectToWindow" ? window : [:]
}
