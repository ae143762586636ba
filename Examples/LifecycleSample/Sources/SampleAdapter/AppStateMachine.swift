/// The sample app's own lifecycle state machine: the kind of object lifecycled referees. It is
/// the app's, not the library's; it is `@MainActor` because UIKit calls the app on the main
/// thread, and the adapter reads it there, as each notification arrives.
@MainActor
public final class AppStateMachine {
    /// Where the app believes it is; named as the `ios-app` model names its states, so what the
    /// app reports compares with the model.
    public enum State: String, Sendable {
        case initializing, launching, connected, foreground, background
    }

    /// The lifecycle events the app's delegates hand it, named as the model's events.
    public enum Event: String, Sendable {
        case didFinishLaunching, willConnectToWindow, didBecomeActive, willResignActive, willEnterForeground, didEnterBackground
    }

    /// The state now.
    public private(set) var state: State = .initializing
    // The hooks run since the adapter last read them: the report of one event.
    private var ranHooks: [String] = []

    /// Starts in `initializing`, as a new process does.
    public init() {}

    /// The state's name, as the adapter reports it (`believedState`).
    public var currentStateName: String { state.rawValue }

    /// Applies an event: moves to the next state and runs its hooks (here, only noted).
    public func handle(_ event: Event) {
        let (next, hooks) = Self.transition(from: state, on: event)
        state = next
        ranHooks += hooks
    }

    /// The hooks run since the last call, in order, and forgets them: each is reported once.
    public func takeRanHooks() -> [String] {
        defer { ranHooks.removeAll() }
        return ranHooks
    }

    /// The app's transition table, a pure function: the next state and the hooks it runs. An
    /// event the app does not expect leaves it where it is and runs nothing; the service is
    /// what counts it.
    static func transition(from state: State, on event: Event) -> (State, [String]) {
        switch (state, event) {
        case (.initializing, .didFinishLaunching): (.launching, ["Launching.init"])
        case (.launching, .willConnectToWindow), (.foreground, .willConnectToWindow), (.background, .willConnectToWindow):
            (.connected, ["Connected.init"])
        case (.connected, .didBecomeActive), (.background, .didBecomeActive):
            (.foreground, ["Foreground.onTransition", "Foreground.didReturn"])
        case (.foreground, .didBecomeActive): (.foreground, ["Foreground.didReturn"])
        case (.foreground, .willResignActive): (.foreground, ["Foreground.willLeave"])
        case (.connected, .didEnterBackground), (.foreground, .didEnterBackground):
            (.background, ["Background.onTransition", "Background.didReturn"])
        case (.background, .didEnterBackground): (.background, ["Background.didReturn"])
        case (.background, .willEnterForeground): (.background, ["Background.willLeave"])
        default: (state, [])
        }
    }
}
