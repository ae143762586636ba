import Foundation
import LifecycleKit

/// An input waiting in a reporter's journal, as it was queued.
public struct QueuedItem: Sendable, Codable, Equatable {
    /// What the item is: the batch kind it is sent as.
    public enum Kind: String, Sendable, Codable {
        /// Creates the instance (`PUT /v1/instances/{id}`), of `model`.
        case create
        /// An event (`name`) with its parameters.
        case event
        /// An action (`name`) with its parameters.
        case action
        /// A relaunch of the instance.
        case launch
    }

    /// Its place in the queue: items are delivered in this order.
    public var sequence: UInt64
    /// Its idempotency key, a UUID made when it was queued; a resend carries it again.
    public var key: String
    /// The instance it is for.
    public var instance: String
    /// What it is.
    public var kind: Kind
    /// The event's or action's name.
    public var name: String?
    /// The event's or action's parameters.
    public var parameters: [String: Value]
    /// The model of a `create`.
    public var model: String?
    /// The state the app believed it was in after the input.
    public var believedState: String?
    /// The hooks the app ran for the input, in order.
    public var ranHooks: [String]?
    /// When it happened, on the device's clock.
    public var occurredAt: DeviceTime?
    /// The labels of a `create` (absent from entries journaled before labels).
    public var labels: [String: String]? = nil
}

/// A report that items were dropped past the bound, or lost to damage, waiting to be sent as a
/// `gap` item.
struct PendingGap: Codable, Equatable, Sendable {
    var key: String
    var instance: String
    var dropped: Int
    /// For items lost to damage, the first one's sequence number as reading could tell it: the
    /// gap is sent where they were, before the first queued item numbered from it on.
    var lostFrom: UInt64? = nil
}

extension DeviceTime {
    /// Now on the device's clock, in its current offset from UTC.
    static func now(_ date: Date = Date(), timeZone: TimeZone = .current) -> DeviceTime {
        DeviceTime(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)),
                   offsetMinutes: timeZone.secondsFromGMT(for: date) / 60)
    }
}
