import Foundation
import LifecycleKit
import LifecycleStore
import LifecycleHTTP

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
        case .relaunch, .gap:
            break
        }
        if !parameters.isEmpty {
            json.raw(",\"parameters\":")
            Self.write(parameters, to: &json)
        }
        if let dropped {
            json.raw(",\"dropped\":")
            json.integer(dropped)
        }
        json.raw(",\"from\":")
        json.string(from)
        json.raw(",\"to\":")
        json.string(to)
        json.raw(",\"outcome\":")
        json.string(outcome.rawValue)
        json.raw(",\"hooks\":")
        Self.write(hooks, to: &json)
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
        if let believedState {
            json.raw(",\"believedState\":")
            json.string(believedState)
        }
        if let ranHooks {
            json.raw(",\"ranHooks\":")
            Self.write(ranHooks, to: &json)
        }
        if let divergence {
            json.raw(",\"divergence\":{")
            if let state = divergence.state {
                json.raw("\"state\":{\"believed\":")
                json.string(state.believed)
                json.raw(",\"actual\":")
                json.string(state.actual)
                json.byte(UInt8(ascii: "}"))
            }
            if let hooks = divergence.hooks {
                json.raw(divergence.state == nil ? "\"hooks\":{\"expected\":" : ",\"hooks\":{\"expected\":")
                Self.write(hooks.expected, to: &json)
                json.raw(",\"ran\":")
                Self.write(hooks.ran, to: &json)
                json.raw(",\"missing\":")
                Self.write(hooks.missing, to: &json)
                json.raw(",\"extra\":")
                Self.write(hooks.extra, to: &json)
                json.raw(",\"orderOnly\":")
                json.bool(hooks.orderOnly)
                json.byte(UInt8(ascii: "}"))
            }
            json.byte(UInt8(ascii: "}"))
        }
        json.raw(",\"time\":")
        json.time(time)
        if let occurredAt {
            json.raw(",\"occurredAt\":")
            json.string(occurredAt.description)
        }
        json.byte(UInt8(ascii: "}"))
        return json.bytes
    }

    private static func write(_ names: [String], to json: inout JSONBuffer) {
        json.byte(UInt8(ascii: "["))
        for (index, name) in names.enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.string(name)
        }
        json.byte(UInt8(ascii: "]"))
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
    /// The instance's JSON, as the API shows it, byte for byte what `JSON.encode(InstanceView(self))`
    /// writes (a body, ending with a newline), written directly: every create renders one on the
    /// committer thread, where the generic encoder cost a batch of creates a tenth of its time; a
    /// test keeps the two identical. Throws on a value JSON cannot hold (a number that is not finite).
    func jsonBytes() throws -> [UInt8] {
        var json = JSONBuffer(capacity: 384)
        try write(to: &json)
        json.byte(JSON.newline)
        return json.bytes
    }

    /// Appends the instance's JSON object, without ``jsonBytes()``'s newline, to `json`.
    func write(to json: inout JSONBuffer) throws {
        json.raw("{\"id\":")
        json.string(id)
        json.raw(",\"model\":")
        json.string(model)
        json.raw(",\"state\":")
        json.string(state.state)
        json.raw(",\"version\":")
        json.integer(state.version)
        json.raw(",\"launchCount\":")
        json.integer(state.launchCount)
        json.raw(",\"bufferedAction\":")
        if let action = state.bufferedAction {
            json.raw("{\"name\":")
            json.string(action.name)
            json.raw(",\"parameters\":{")
            for (index, key) in action.parameters.keys.sorted().enumerated() {
                if index > 0 { json.byte(UInt8(ascii: ",")) }
                json.key(key)
                switch action.parameters[key]! {
                case .string(let s): json.string(s)
                case .bool(let b): json.bool(b)
                case .integer(let i): json.integer(i)
                case .number(let d): try json.number(d)
                }
            }
            json.raw("}}")
        } else {
            json.raw("null")
        }
        json.raw(",\"window\":")
        if let window = state.window { json.string(window) } else { json.raw("null") }
        json.raw(",\"breadcrumb\":{")
        if let step = state.breadcrumb.step {
            json.raw("\"step\":")
            json.string(step)
            json.byte(UInt8(ascii: ","))
        }
        json.raw("\"sceneConnected\":")
        json.bool(state.breadcrumb.isSceneConnected)
        json.raw("},\"counters\":{\"unexpected\":")
        json.integer(state.counters.unexpected)
        json.raw(",\"ignored\":")
        json.integer(state.counters.ignored)
        json.raw(",\"incompleteLaunches\":")
        json.integer(state.counters.incompleteLaunches)
        json.raw(",\"divergences\":")
        json.integer(state.counters.divergences)
        json.raw(",\"dropped\":")
        json.integer(state.counters.dropped)
        json.raw("},\"createdAt\":")
        json.time(createdAt)
        json.raw(",\"updatedAt\":")
        json.time(updatedAt)
        json.raw(",\"labels\":{")
        for (index, key) in labels.keys.sorted().enumerated() {
            if index > 0 { json.byte(UInt8(ascii: ",")) }
            json.key(key)
            json.string(labels[key]!)
        }
        json.raw("}}")
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
