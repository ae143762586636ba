import Foundation

/// An action waiting for the app to reach a state that handles actions.
public struct PendingAction: Sendable, Codable, Equatable {
    public var name: String
    public var parameters: [String: Value]

    public init(name: String, parameters: [String: Value] = [:]) {
        self.name = name
        self.parameters = parameters
    }
}

/// Tracks a launch in progress so a launch that never finished is noticed at the next one.
public struct Breadcrumb: Sendable, Codable, Equatable {
    /// The last step the launch reached; `nil` when no launch is in progress.
    public var step: String?
    /// Whether a scene connected during this launch.
    public var isSceneConnected: Bool

    public init(step: String? = nil, isSceneConnected: Bool = false) {
        self.step = step
        self.isSceneConnected = isSceneConnected
    }

    /// The launch this breadcrumb marks, as the next launch would report it if the process
    /// ended here; `nil` when none is unfinished. A launch that reached `launched` without a
    /// scene (a background launch, such as a push that woke the app) is not left unfinished.
    public var incompleteLaunch: IncompleteLaunch? {
        guard let step, step != "launched" || isSceneConnected else { return nil }
        return IncompleteLaunch(step: step, isSceneConnected: isSceneConnected)
    }

    /// The breadcrumb after `effect` ran: the one place that says what each launch effect does to it.
    public func applying(_ effect: Effect) -> Breadcrumb {
        var next = self
        switch effect {
        case .startLaunch: next = Breadcrumb(step: "launching-started", isSceneConnected: false)
        case .breadcrumb(let step): next.step = step
        case .clearBreadcrumb: next = Breadcrumb()
        case .markSceneConnected: next.isSceneConnected = true
        case .rememberWindow, .deliverAction, .clearAction: break
        }
        return next
    }

    enum CodingKeys: String, CodingKey { case step, isSceneConnected = "sceneConnected" }
}

/// A launch that started but never reached foreground or background.
public struct IncompleteLaunch: Sendable, Codable, Equatable {
    /// The step the earlier launch was left at.
    public var step: String
    public var isSceneConnected: Bool

    public init(step: String, isSceneConnected: Bool) {
        self.step = step
        self.isSceneConnected = isSceneConnected
    }

    enum CodingKeys: String, CodingKey { case step, isSceneConnected = "sceneConnected" }
}

/// Running totals kept per instance.
public struct Counters: Sendable, Codable, Equatable {
    public var unexpected: Int64 = 0
    public var ignored: Int64 = 0
    public var incompleteLaunches: Int64 = 0
    /// Records where what the app reported differed from the model (see ``Divergence``).
    public var divergences: Int64 = 0
    /// Inputs the app's reporter dropped before delivery, as its gap records reported them.
    public var dropped: Int64 = 0

    public init(unexpected: Int64 = 0, ignored: Int64 = 0, incompleteLaunches: Int64 = 0, divergences: Int64 = 0, dropped: Int64 = 0) {
        self.unexpected = unexpected
        self.ignored = ignored
        self.incompleteLaunches = incompleteLaunches
        self.divergences = divergences
        self.dropped = dropped
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        unexpected = try c.decode(Int64.self, forKey: .unexpected)
        ignored = try c.decode(Int64.self, forKey: .ignored)
        incompleteLaunches = try c.decode(Int64.self, forKey: .incompleteLaunches)
        // Absent from what a lifecycled before divergences wrote.
        divergences = try c.decodeIfPresent(Int64.self, forKey: .divergences) ?? 0
        dropped = try c.decodeIfPresent(Int64.self, forKey: .dropped) ?? 0
    }
}

/// Everything that identifies where one instance is; enough to restore its machine exactly.
public struct InstanceState: Sendable, Codable, Equatable {
    public var state: String
    /// Increments by one with every record.
    public var version: Int64
    /// Processes started for this instance: 1 at creation, plus one per relaunch.
    public var launchCount: Int64
    public var bufferedAction: PendingAction?
    public var window: String?
    public var breadcrumb: Breadcrumb
    public var counters: Counters

    public init(
        state: String, version: Int64 = 0, launchCount: Int64 = 1, bufferedAction: PendingAction? = nil,
        window: String? = nil, breadcrumb: Breadcrumb = Breadcrumb(), counters: Counters = Counters()
    ) {
        self.state = state
        self.version = version
        self.launchCount = launchCount
        self.bufferedAction = bufferedAction
        self.window = window
        self.breadcrumb = breadcrumb
        self.counters = counters
    }
}

/// The kind of input a record describes.
public enum InputKind: String, Sendable, Codable {
    case event, action, relaunch
    /// Inputs the app's reporter dropped before delivery: a hole in the history, not an input to the model.
    case gap
}

/// What became of an action.
public enum ActionDisposition: String, Sendable, Codable {
    /// Handled at once by the state's action hook.
    case handled
    /// Kept until the app reaches a state that handles actions.
    case buffered
}

/// One applied input and everything it caused.
public struct Record: Sendable, Codable, Equatable {
    /// Global sequence number; 0 until a store assigns one.
    public var sequence: Int64
    /// The id of the instance the record belongs to: set by whoever keeps the record (the
    /// machine knows no ids); `nil` for a record of no instance, such as a conformance replay's.
    public var instance: String?
    /// The instance version after this record.
    public var version: Int64
    public var kind: InputKind
    /// The event or action name, `relaunch` or `gap`.
    public var name: String
    public var parameters: [String: Value]
    /// For a gap: how many inputs the app's reporter dropped before delivery.
    public var dropped: Int64?
    public var from: String
    public var to: String
    public var outcome: Outcome
    /// Hooks in the order they ran.
    public var hooks: [String]
    /// Stable id of the transition row that matched (see ``Model/rowID(_:)``).
    public var row: String?
    /// For an action: handled or buffered.
    public var disposition: ActionDisposition?
    /// For a buffered action: the earlier buffered action it replaced.
    public var replacedAction: PendingAction?
    /// A buffered action handed to the new state's hook.
    public var deliveredAction: PendingAction?
    /// A buffered action dropped by this record.
    public var clearedAction: PendingAction?
    /// A launch that never finished, found when this launch started.
    public var incompleteLaunch: IncompleteLaunch?
    /// For a remembered window: whether it differs from the one remembered before.
    public var windowChanged: Bool?
    /// What the app said its machine believed after this input, as reported.
    public var believedState: String?
    /// The hooks the app said its code ran, as reported.
    public var ranHooks: [String]?
    /// Where what was reported differs from what the model says happened.
    public var divergence: Divergence?
    /// When the server recorded it: records are in the order they arrived, whatever their ``occurredAt``.
    public var time: Date
    /// When it happened on the device's clock, as the app reported it.
    public var occurredAt: DeviceTime?

    public init(
        sequence: Int64 = 0, instance: String? = nil, version: Int64, kind: InputKind, name: String, parameters: [String: Value] = [:],
        dropped: Int64? = nil, from: String, to: String, outcome: Outcome, hooks: [String] = [], row: String? = nil,
        disposition: ActionDisposition? = nil, replacedAction: PendingAction? = nil,
        deliveredAction: PendingAction? = nil, clearedAction: PendingAction? = nil,
        incompleteLaunch: IncompleteLaunch? = nil, windowChanged: Bool? = nil, believedState: String? = nil, ranHooks: [String]? = nil,
        divergence: Divergence? = nil, time: Date, occurredAt: DeviceTime? = nil
    ) {
        self.sequence = sequence
        self.instance = instance
        self.version = version
        self.kind = kind
        self.name = name
        self.parameters = parameters
        self.dropped = dropped
        self.from = from
        self.to = to
        self.outcome = outcome
        self.hooks = hooks
        self.row = row
        self.disposition = disposition
        self.replacedAction = replacedAction
        self.deliveredAction = deliveredAction
        self.clearedAction = clearedAction
        self.incompleteLaunch = incompleteLaunch
        self.windowChanged = windowChanged
        self.believedState = believedState
        self.ranHooks = ranHooks
        self.divergence = divergence
        self.time = time
        self.occurredAt = occurredAt
    }
}

extension Record {
    /// JSON names: the input's name goes under `event` or `action` (openapi.yaml's `Record`), a relaunch or gap has neither.
    enum CodingKeys: String, CodingKey {
        case sequence, instance, version, kind, event, action, parameters, dropped, from, to, outcome, hooks, row, disposition
        case replacedAction, deliveredAction, clearedAction, incompleteLaunch, windowChanged, believedState, ranHooks, divergence, time
        case occurredAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try c.decode(Int64.self, forKey: .sequence)
        instance = try c.decodeIfPresent(String.self, forKey: .instance)
        version = try c.decode(Int64.self, forKey: .version)
        kind = try c.decode(InputKind.self, forKey: .kind)
        switch kind {
        case .event: name = try c.decode(String.self, forKey: .event)
        case .action: name = try c.decode(String.self, forKey: .action)
        case .relaunch: name = "relaunch"
        case .gap: name = "gap"
        }
        parameters = try c.decodeIfPresent([String: Value].self, forKey: .parameters) ?? [:]
        dropped = try c.decodeIfPresent(Int64.self, forKey: .dropped)
        from = try c.decode(String.self, forKey: .from)
        to = try c.decode(String.self, forKey: .to)
        outcome = try c.decode(Outcome.self, forKey: .outcome)
        hooks = try c.decode([String].self, forKey: .hooks)
        row = try c.decodeIfPresent(String.self, forKey: .row)
        disposition = try c.decodeIfPresent(ActionDisposition.self, forKey: .disposition)
        replacedAction = try c.decodeIfPresent(PendingAction.self, forKey: .replacedAction)
        deliveredAction = try c.decodeIfPresent(PendingAction.self, forKey: .deliveredAction)
        clearedAction = try c.decodeIfPresent(PendingAction.self, forKey: .clearedAction)
        incompleteLaunch = try c.decodeIfPresent(IncompleteLaunch.self, forKey: .incompleteLaunch)
        windowChanged = try c.decodeIfPresent(Bool.self, forKey: .windowChanged)
        believedState = try c.decodeIfPresent(String.self, forKey: .believedState)
        ranHooks = try c.decodeIfPresent([String].self, forKey: .ranHooks)
        divergence = try c.decodeIfPresent(Divergence.self, forKey: .divergence)
        time = try c.decode(Date.self, forKey: .time)
        occurredAt = try c.decodeIfPresent(DeviceTime.self, forKey: .occurredAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sequence, forKey: .sequence)
        try c.encodeIfPresent(instance, forKey: .instance)
        try c.encode(version, forKey: .version)
        try c.encode(kind, forKey: .kind)
        switch kind {
        case .event: try c.encode(name, forKey: .event)
        case .action: try c.encode(name, forKey: .action)
        case .relaunch, .gap: break
        }
        if !parameters.isEmpty { try c.encode(parameters, forKey: .parameters) }
        try c.encodeIfPresent(dropped, forKey: .dropped)
        try c.encode(from, forKey: .from)
        try c.encode(to, forKey: .to)
        try c.encode(outcome, forKey: .outcome)
        try c.encode(hooks, forKey: .hooks)
        try c.encodeIfPresent(row, forKey: .row)
        try c.encodeIfPresent(disposition, forKey: .disposition)
        try c.encodeIfPresent(replacedAction, forKey: .replacedAction)
        try c.encodeIfPresent(deliveredAction, forKey: .deliveredAction)
        try c.encodeIfPresent(clearedAction, forKey: .clearedAction)
        try c.encodeIfPresent(incompleteLaunch, forKey: .incompleteLaunch)
        try c.encodeIfPresent(windowChanged, forKey: .windowChanged)
        try c.encodeIfPresent(believedState, forKey: .believedState)
        try c.encodeIfPresent(ranHooks, forKey: .ranHooks)
        try c.encodeIfPresent(divergence, forKey: .divergence)
        try c.encode(time, forKey: .time)
        try c.encodeIfPresent(occurredAt, forKey: .occurredAt)
    }
}
