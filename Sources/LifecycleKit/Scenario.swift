import Foundation

/// A named flow of the iOS lifecycle rule, runnable against a model.
///
/// `setup` brings a fresh instance to where the flow begins; the hooks of `steps`
/// alone are compared with `expectedHooks`.
public struct Scenario: Sendable, Codable, Equatable {
    public var name: String
    public var title: String
    public var model: String
    public var setup: [Input]
    public var steps: [Input]
    public var expectedHooks: [String]
    public var expectedState: String

    /// What running a scenario produced.
    public struct Result: Sendable, Equatable {
        public var hooks: [String]
        public var finalState: String
        public var records: [Record]
        public var isPassing: Bool
    }

    /// Runs the scenario on a fresh machine of `model`.
    public func run(on model: Model) throws(InputError) -> Result {
        var machine = Machine(model: model)
        let time = Date(timeIntervalSince1970: 0)
        for input in setup { _ = try machine.apply(input, at: time) }
        var records: [Record] = []
        for input in steps { records.append(try machine.apply(input, at: time)) }
        let hooks = records.flatMap(\.hooks)
        return Result(
            hooks: hooks, finalState: machine.stateName, records: records,
            isPassing: hooks == expectedHooks && machine.stateName == expectedState
        )
    }
}

extension Scenario {
    private static let coldStart: [Input] = [
        .event("didFinishLaunching"), .event("willConnectToWindow", ["window": .string("main")]), .event("didBecomeActive"),
    ]
    private static let toBackground: [Input] = coldStart + [.event("willResignActive"), .event("didEnterBackground")]

    /// The flows of DuckDuckGo's "App Lifecycle State Machine" rule, on the `ios-app` model.
    public static let iosApp: [Scenario] = [
        Scenario(
            name: "cold-start", title: "Cold start", model: "ios-app", setup: [], steps: coldStart,
            expectedHooks: ["Launching.init", "Connected.init", "Foreground.onTransition", "Foreground.didReturn"],
            expectedState: "foreground"
        ),
        Scenario(
            name: "backgrounding", title: "App backgrounding", model: "ios-app", setup: coldStart,
            steps: [.event("willResignActive"), .event("didEnterBackground")],
            expectedHooks: ["Foreground.willLeave", "Background.onTransition", "Background.didReturn"],
            expectedState: "background"
        ),
        Scenario(
            name: "foregrounding", title: "App foregrounding", model: "ios-app", setup: toBackground,
            steps: [.event("willEnterForeground"), .event("didBecomeActive")],
            expectedHooks: ["Background.willLeave", "Foreground.onTransition", "Foreground.didReturn"],
            expectedState: "foreground"
        ),
        Scenario(
            name: "alert-dismissed", title: "Interrupted foreground: alert dismissed", model: "ios-app", setup: coldStart,
            steps: [.event("willResignActive"), .event("didBecomeActive")],
            expectedHooks: ["Foreground.willLeave", "Foreground.didReturn"],
            expectedState: "foreground"
        ),
        Scenario(
            name: "app-switcher-return", title: "App switcher, then back to the app", model: "ios-app", setup: coldStart,
            steps: [.event("willResignActive"), .event("didBecomeActive")],
            expectedHooks: ["Foreground.willLeave", "Foreground.didReturn"],
            expectedState: "foreground"
        ),
        Scenario(
            name: "app-switcher-leave", title: "App switcher, then another app", model: "ios-app", setup: coldStart,
            steps: [.event("willResignActive"), .event("didEnterBackground")],
            expectedHooks: ["Foreground.willLeave", "Background.onTransition", "Background.didReturn"],
            expectedState: "background"
        ),
        Scenario(
            name: "face-id-success-cold-start", title: "System Face ID on cold start: success", model: "ios-app", setup: [],
            steps: [
                .event("didFinishLaunching"), .event("willConnectToWindow", ["window": .string("main")]),
                .event("willEnterForeground"), .event("didBecomeActive"),
            ],
            expectedHooks: ["Launching.init", "Connected.init", "Foreground.onTransition", "Foreground.didReturn"],
            expectedState: "foreground"
        ),
        Scenario(
            name: "face-id-failure-cold-start", title: "System Face ID on cold start: failure", model: "ios-app", setup: [],
            steps: [
                .event("didFinishLaunching"), .event("willConnectToWindow", ["window": .string("main")]),
                .event("willEnterForeground"), .event("didEnterBackground"),
            ],
            expectedHooks: ["Launching.init", "Connected.init", "Background.onTransition", "Background.didReturn"],
            expectedState: "background"
        ),
        Scenario(
            name: "ddg-face-id-lock", title: "DuckDuckGo Face ID lock on cold start", model: "ios-app", setup: [],
            steps: coldStart + [.event("willResignActive"), .event("didBecomeActive")],
            expectedHooks: [
                "Launching.init", "Connected.init", "Foreground.onTransition", "Foreground.didReturn",
                "Foreground.willLeave", "Foreground.didReturn",
            ],
            expectedState: "foreground"
        ),
        Scenario(
            name: "critical-setup-failure", title: "Critical setup failure", model: "ios-app", setup: [],
            steps: [
                .event("didFinishLaunching", ["setupError": .string("disk full")]),
                .event("willConnectToWindow", ["window": .string("main")]),
            ],
            expectedHooks: ["Launching.init", "Terminating.init", "Terminating.alertAndTerminate"],
            expectedState: "terminating"
        ),
        Scenario(
            name: "launch-under-tests", title: "Launch under tests", model: "ios-app", setup: [],
            steps: [
                .event("didFinishLaunching", ["isTesting": .bool(true)]),
                .event("willConnectToWindow", ["window": .string("main")]),
            ],
            expectedHooks: ["Simulated.init", "Simulated.configure"],
            expectedState: "simulated"
        ),
    ]
}
