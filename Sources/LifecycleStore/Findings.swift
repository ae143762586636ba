import Foundation

/// What kind of problem a finding groups (docs/TRIAGE.md defines each one's signature).
public enum FindingKind: String, Sendable, CaseIterable {
    /// An event or action no row of the model matched, in a state.
    case unexpected
    /// A launch that found an earlier one unfinished, by the step that one stopped at.
    case incompleteLaunch
    /// What the app reported differing from the model: a belief, a hook missing or extra.
    case divergence
    /// Inputs an app's reporter dropped before delivery.
    case gap
}

/// What a finding is about: its kind, model and what the kind adds. Its ``signature`` names it.
public struct FindingSubject: Hashable, Sendable {
    public var kind: FindingKind
    public var model: String
    /// The state (``FindingKind/unexpected``: the record's `from`; ``FindingKind/divergence``: its `to`).
    public var state: String?
    /// Which member ``name`` is: `event` or `action` (unexpected), `believedState`, `missingHook` or `extraHook`
    /// (divergence), `step` (incomplete launch); `nil` for a gap.
    public var aspect: String?
    /// The event's or action's name, the step, the believed state or the hook.
    public var name: String?

    public init(kind: FindingKind, model: String, state: String? = nil, aspect: String? = nil, name: String? = nil) {
        self.kind = kind
        self.model = model
        self.state = state
        self.aspect = aspect
        self.name = name
    }

    /// `kind:model[:state][:aspect:name]`, each part with `%`, `:` and control characters percent-encoded, so
    /// that two subjects never share one and it holds no control character (a store key joins it to a label
    /// with a newline).
    public var signature: String {
        var parts = [kind.rawValue, model]
        if let state { parts.append(state) }
        // An incomplete launch's aspect is always "step": the name alone says it.
        if let aspect, kind != .incompleteLaunch { parts.append(aspect) }
        if let name { parts.append(name) }
        return parts.map(Self.escaped).joined(separator: ":")
    }

    /// `part` with `%`, `:` and control characters percent-encoded, byte by byte of their UTF-8.
    /// Most parts need nothing and are returned as they are: a record with a finding computes its
    /// signature on the committer thread, where a scalar-by-scalar copy cost some 40k instructions.
    static func escaped(_ part: String) -> String {
        guard part.unicodeScalars.contains(where: needsEscape) else { return part }
        let hex = Array("0123456789ABCDEF".utf8)
        var escaped: [UInt8] = []
        escaped.reserveCapacity(part.utf8.count + 8)
        for scalar in part.unicodeScalars {
            if needsEscape(scalar) {
                for byte in UTF8.encode(scalar)! { escaped += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]] }
            } else {
                escaped += UTF8.encode(scalar)!
            }
        }
        return String(decoding: escaped, as: UTF8.self)
    }

    /// `%`, `:`, or a control character: General_Category Cc, which Unicode fixes as U+0000–U+001F
    /// and U+007F–U+009F (the property lookup this replaces cost hundreds of instructions a scalar).
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "%" || scalar == ":" || scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}

/// What the records of one finding add up to, as committed.
public struct FindingTotals: Sendable, Equatable {
    /// The most instance ids a finding keeps as ``examples``.
    public static let maxExamples = 5

    /// Records.
    public var count: Int64
    /// Distinct instances (an instance deleted and made again under its id counts again).
    public var instances: Int64
    public var firstSeen: Date
    public var lastSeen: Date
    /// The first instances it was seen on, up to ``maxExamples``.
    public var examples: [String]

    public init(count: Int64, instances: Int64, firstSeen: Date, lastSeen: Date, examples: [String]) {
        self.count = count
        self.instances = instances
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.examples = examples
    }
}

/// One stored finding: over every instance (`label` empty), or over those carrying one label (`key=value`).
public struct StoredFinding: Sendable, Equatable {
    public var subject: FindingSubject
    /// `""`: every instance; else `key=value`, the instances carrying that label.
    public var label: String
    public var totals: FindingTotals

    public init(subject: FindingSubject, label: String, totals: FindingTotals) {
        self.subject = subject
        self.label = label
        self.totals = totals
    }

    /// What it is stored under.
    public var key: FindingKey { FindingKey(signature: subject.signature, label: label) }
}

/// What a stored finding is found by: its signature and its label (`""` for every instance).
public struct FindingKey: Hashable, Sendable {
    public var signature: String
    public var label: String

    public init(signature: String, label: String) {
        self.signature = signature
        self.label = label
    }

    /// The store's primary key: signature and label joined by a newline, which neither holds.
    var stored: String { signature + "\n" + label }
}

/// An instance that has a finding: kept so that each instance counts once in ``FindingTotals/instances``.
public struct FindingInstance: Hashable, Sendable {
    public var instance: String
    public var signature: String

    public init(instance: String, signature: String) {
        self.instance = instance
        self.signature = signature
    }
}

/// Every stored finding, and which instances have which.
public struct StoredFindings: Sendable {
    public var findings: [StoredFinding]
    public var instances: [FindingInstance]

    public init(findings: [StoredFinding] = [], instances: [FindingInstance] = []) {
        self.findings = findings
        self.instances = instances
    }
}
