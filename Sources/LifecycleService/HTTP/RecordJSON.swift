import Foundation
import LifecycleKit
import LifecycleStore
import MicroHTTP

extension Record {
    /// The record's JSON, byte for byte what `JSON.encode(record)` writes through
    /// `Codable` (less the newline that ends a body), written directly. Records are encoded
    /// on the committer thread, the service's one serial path, where the generic encoder's
    /// cost capped durable write throughput; a test keeps the two identical.
    func jsonBytes() -> [UInt8] {
        var json = JSONBuffer(capacity: 320)
        json.raw("{\"sequence\":")
        json.integer(sequence)
        if let instance {
            json.raw(",\"instance\":")
            json.string(instance)
        }
        json.raw(",\"version\":")
        json.integer(version)
        json.raw(",\"kind\":")
        json.string(kind.rawValue)
        switch kind {
        case .event:
            json.raw(",\"event\":")
            json.string(name)
        case .action:
            json.raw(",\"action\":")
            json.string(name)
        case .relaunch:
            break
        }
        if !parameters.isEmpty {
            json.raw(",\"parameters\":")
            Self.write(parameters, to: &json)
        }
        json.raw(",\"from\":")
        json.string(from)
        json.raw(",\"to\":")
        json.string(to)
        json.raw(",\"outcome\":")
        json.string(outcome.rawValue)
        json.raw(",\"hooks\":[")
        for (index, hook) in hooks.enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.string(hook)
        }
        json.byte(UInt8(ascii: "]"))
        if let row {
            json.raw(",\"row\":")
            json.string(row)
        }
        if let disposition {
            json.raw(",\"disposition\":")
            json.string(disposition.rawValue)
        }
        // Not a loop over an array of the three: that array cost every record an allocation.
        func write(_ key: StaticString, _ action: PendingAction?) {
            guard let action else { return }
            json.raw(key)
            json.raw("{\"name\":")
            json.string(action.name)
            json.raw(",\"parameters\":")
            Self.write(action.parameters, to: &json)
            json.byte(UInt8(ascii: "}"))
        }
        write(",\"replacedAction\":", replacedAction)
        write(",\"deliveredAction\":", deliveredAction)
        write(",\"clearedAction\":", clearedAction)
        if let incompleteLaunch {
            json.raw(",\"incompleteLaunch\":{\"step\":")
            json.string(incompleteLaunch.step)
            json.raw(",\"sceneConnected\":")
            json.bool(incompleteLaunch.isSceneConnected)
            json.byte(UInt8(ascii: "}"))
        }
        if let windowChanged {
            json.raw(",\"windowChanged\":")
            json.bool(windowChanged)
        }
        json.raw(",\"time\":")
        json.time(time)
        json.byte(UInt8(ascii: "}"))
        return json.bytes
    }

    private static func write(_ parameters: [String: Value], to json: inout JSONBuffer) {
        json.byte(UInt8(ascii: "{"))
        for (index, key) in parameters.keys.sorted().enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.key(key)
            switch parameters[key]! {
            case .string(let s): json.string(s)
            case .bool(let b): json.bool(b)
            case .integer(let i): json.integer(i)
            case .number(let d): (try? json.number(d)) ?? json.raw("null")
            }
        }
        json.byte(UInt8(ascii: "}"))
    }
}

extension StoredInstance {
    /// The instance's JSON, as the API shows it; throws on a value JSON cannot hold.
    func jsonBytes() throws -> [UInt8] {
        try JSON.encode(InstanceView(self))
    }
}

/// The creation or deletion of an instance: numbered like a record and streamed
/// (`event: created`, `event: deleted`), so that a resumed stream sees it, but not part of
/// the instance's history, which holds applied inputs only.
///
/// `{"sequence":7,"instance":"my-iphone","version":0,"kind":"created","model":"ios-app","state":"initializing","time":"…"}`;
/// a deletion has the version and state the instance had when it was deleted.
struct InstanceChange {
    enum Kind: String {
        case created, deleted
    }

    var sequence: Int64
    var kind: Kind
    var instance: StoredInstance
    var time: Date

    func jsonBytes() -> [UInt8] {
        var json = JSONBuffer(capacity: 160)
        json.raw("{\"sequence\":")
        json.integer(sequence)
        json.raw(",\"instance\":")
        json.string(instance.id)
        json.raw(",\"version\":")
        json.integer(instance.state.version)
        json.raw(",\"kind\":")
        json.string(kind.rawValue)
        json.raw(",\"model\":")
        json.string(instance.model)
        json.raw(",\"state\":")
        json.string(instance.state.state)
        json.raw(",\"time\":")
        json.time(time)
        json.byte(UInt8(ascii: "}"))
        return json.bytes
    }
}
