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
