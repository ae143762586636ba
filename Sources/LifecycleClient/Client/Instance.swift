import Foundation
import LifecycleKit

/// An instance as the service answers it (openapi `Instance`): one app process line under one
/// model, where it is and what it has counted.
public struct Instance: Sendable, Equatable, Decodable {
    public var id: String
    /// The model's name (`ios-app`, `android-activity`, …).
    public var model: String
    /// Its current state.
    public var state: String
    /// 0 at creation; one more with every record. Pass it as `expectedVersion` to write only at it.
    public var version: Int64
    /// 1 at creation, plus one per relaunch.
    public var launchCount: Int64
    /// An action kept until the app reaches a state that handles actions.
    public var bufferedAction: PendingAction?
    /// The window it remembers, for a model that remembers one.
    public var window: String?
    /// The launch in progress, if any.
    public var breadcrumb: Breadcrumb
    /// Unexpected and ignored events, incomplete launches, divergences.
    public var counters: Counters
    public var createdAt: Date
    public var updatedAt: Date
    /// Who it is, as set when it was created (`app.version`, `run`, …); empty when none, and from a
    /// service that has no labels.
    public var labels: [String: String]

    private enum CodingKeys: String, CodingKey {
        case id, model, state, version, launchCount, bufferedAction, window, breadcrumb, counters, createdAt, updatedAt, labels
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        model = try c.decode(String.self, forKey: .model)
        state = try c.decode(String.self, forKey: .state)
        version = try c.decode(Int64.self, forKey: .version)
        launchCount = try c.decode(Int64.self, forKey: .launchCount)
        bufferedAction = try c.decodeIfPresent(PendingAction.self, forKey: .bufferedAction)
        window = try c.decodeIfPresent(String.self, forKey: .window)
        breadcrumb = try c.decode(Breadcrumb.self, forKey: .breadcrumb)
        counters = try c.decode(Counters.self, forKey: .counters)
        createdAt = try c.decode(Date.self, forKey: .createdAt)
        updatedAt = try c.decode(Date.self, forKey: .updatedAt)
        labels = try c.decodeIfPresent([String: String].self, forKey: .labels) ?? [:]
    }
}

/// The service's health (`GET /healthz`).
public struct Health: Sendable, Equatable, Decodable {
    /// `ok` while the service answers.
    public var status: String
    /// Whether writes need the token (the server has one).
    public var writesNeedToken: Bool
    /// Whether reads and streams need it too (`--protect-reads`).
    public var readsNeedToken: Bool
}
