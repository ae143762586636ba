import Foundation
import LifecycleKit
import LifecycleStore

/// An instance as the API shows it.
struct InstanceView: Encodable {
    var id: String
    var model: String
    var state: String
    var version: Int64
    var launchCount: Int64
    var bufferedAction: PendingAction?
    var window: String?
    var breadcrumb: Breadcrumb
    var counters: Counters
    var createdAt: Date
    var updatedAt: Date
    var labels: [String: String]

    init(_ instance: StoredInstance) {
        id = instance.id
        model = instance.model
        state = instance.state.state
        version = instance.state.version
        launchCount = instance.state.launchCount
        bufferedAction = instance.state.bufferedAction
        window = instance.state.window
        breadcrumb = instance.state.breadcrumb
        counters = instance.state.counters
        createdAt = instance.createdAt
        updatedAt = instance.updatedAt
        labels = instance.labels
    }

    enum CodingKeys: String, CodingKey {
        case id, model, state, version, launchCount, bufferedAction, window, breadcrumb, counters, createdAt, updatedAt, labels
    }

    /// Absent values are written as `null` so clients see every field.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(model, forKey: .model)
        try c.encode(state, forKey: .state)
        try c.encode(version, forKey: .version)
        try c.encode(launchCount, forKey: .launchCount)
        try c.encode(bufferedAction, forKey: .bufferedAction)
        try c.encode(window, forKey: .window)
        try c.encode(breadcrumb, forKey: .breadcrumb)
        try c.encode(counters, forKey: .counters)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(labels, forKey: .labels)
    }
}

/// A model as the API shows it: its definition, with a stable id on every row.
struct ModelView: Encodable {
    var name: String
    var title: String?
    var initialState: String
    var states: [StateDefinition]
    var events: [EventDefinition]
    var actions: [ActionDefinition]
    var transitions: [Row]

    struct Row: Encodable {
        var id: String
        var row: TransitionRow

        enum CodingKeys: String, CodingKey { case id }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try row.encode(to: encoder)
        }
    }

    init(_ model: Model) {
        let d = model.definition
        name = d.name
        title = d.title
        initialState = model.initialStateName
        states = d.states
        events = d.events
        actions = d.actions
        transitions = d.transitions.enumerated().map { Row(id: Model.rowID($0.offset), row: $0.element) }
    }
}
