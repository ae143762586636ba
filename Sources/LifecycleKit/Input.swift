import Foundation

/// One input to a machine, as scenarios and conformance checks describe them.
public enum Input: Sendable, Equatable, Codable {
    case event(String, [String: Value] = [:])
    case action(String, [String: Value] = [:])
    case relaunch
    /// Items the app's reporter had to drop before delivery (see ``Machine/recordGap(dropped:at:)``).
    case gap(dropped: Int64)

    enum CodingKeys: String, CodingKey { case event, action, relaunch, dropped, parameters }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let parameters = try c.decodeIfPresent([String: Value].self, forKey: .parameters) ?? [:]
        if let name = try c.decodeIfPresent(String.self, forKey: .event) {
            self = .event(name, parameters)
        } else if let name = try c.decodeIfPresent(String.self, forKey: .action) {
            self = .action(name, parameters)
        } else if try c.decodeIfPresent(Bool.self, forKey: .relaunch) == true {
            self = .relaunch
        } else if let dropped = try c.decodeIfPresent(Int64.self, forKey: .dropped) {
            self = .gap(dropped: dropped)
        } else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "an input needs \"event\", \"action\", \"relaunch\": true or \"dropped\""))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .event(let name, let parameters):
            try c.encode(name, forKey: .event)
            if !parameters.isEmpty { try c.encode(parameters, forKey: .parameters) }
        case .action(let name, let parameters):
            try c.encode(name, forKey: .action)
            if !parameters.isEmpty { try c.encode(parameters, forKey: .parameters) }
        case .relaunch:
            try c.encode(true, forKey: .relaunch)
        case .gap(let dropped):
            try c.encode(dropped, forKey: .dropped)
        }
    }
}

extension Machine {
    /// Applies any kind of input.
    public mutating func apply(_ input: Input, at time: Date) throws(InputError) -> Record {
        switch input {
        case .event(let name, let parameters): try apply(event: name, parameters: parameters, at: time)
        case .action(let name, let parameters): try perform(action: name, parameters: parameters, at: time)
        case .relaunch: relaunch(at: time)
        case .gap(let dropped): recordGap(dropped: dropped, at: time)
        }
    }
}
