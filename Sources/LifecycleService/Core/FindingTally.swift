import Foundation
import LifecycleKit
import LifecycleStore

extension FindingSubject {
    /// The findings a record of an instance of `model` shows, each once: an unexpected event or
    /// action (in its `from` state), the incomplete launch it found, each kind of divergence it
    /// carries (in its `to` state; hooks in another order only are not one), or a gap.
    static func of(_ record: Record, model: String) -> [FindingSubject] {
        var subjects: [FindingSubject] = []
        if record.kind == .gap { subjects.append(FindingSubject(kind: .gap, model: model)) }
        if record.outcome == .unexpected, record.kind == .event || record.kind == .action {
            subjects.append(FindingSubject(kind: .unexpected, model: model, state: record.from, aspect: record.kind == .event ? "event" : "action", name: record.name))
        }
        if let incomplete = record.incompleteLaunch {
            subjects.append(FindingSubject(kind: .incompleteLaunch, model: model, aspect: "step", name: incomplete.step))
        }
        if let divergence = record.divergence {
            if let state = divergence.state {
                subjects.append(FindingSubject(kind: .divergence, model: model, state: record.to, aspect: "believedState", name: state.believed))
            }
            for (aspect, hooks) in [("missingHook", divergence.hooks?.missing ?? []), ("extraHook", divergence.hooks?.extra ?? [])] {
                for hook in Set(hooks).sorted() {
                    subjects.append(FindingSubject(kind: .divergence, model: model, state: record.to, aspect: aspect, name: hook))
                }
            }
        }
        return subjects
    }
}

/// What one transaction's records add to the findings, tallied in memory as they are applied
/// and written once at its end (``store(in:)``): one row per finding and label it touched,
/// however many records, so a batch of a thousand inputs costs its findings a few writes, and
/// nothing reads history.
struct FindingTally {
    private struct Added {
        var subject: FindingSubject
        var count: Int64 = 0
        var firstSeen: Date
        var lastSeen: Date

        /// One more record showing it, at `time`.
        mutating func count(at time: Date) {
            count += 1
            firstSeen = min(firstSeen, time)
            lastSeen = max(lastSeen, time)
        }
    }

    /// Per finding and label, what the records added.
    private var added: [FindingKey: Added] = [:]
    /// Each instance that showed a finding, in the order first seen, with its labels.
    private var seen: [(pair: FindingInstance, labels: [String])] = []
    private var seenPairs: Set<FindingInstance> = []
    /// Instances deleted after showing a finding in this transaction: counted, not kept.
    private var deleted: Set<String> = []

    var isEmpty: Bool { added.isEmpty }

    /// Counts what `record`, applied to `instance`, shows: under every instance and under each of its labels.
    mutating func count(_ record: Record, of instance: StoredInstance) {
        let subjects = FindingSubject.of(record, model: instance.model)
        guard !subjects.isEmpty else { return }
        let labels = instance.labels.map { "\($0.key)=\($0.value)" }
        for subject in subjects {
            let signature = subject.signature
            for label in [""] + labels {
                // In place: a key's signature is some 100 bytes, hashed once rather than for a read and a write.
                added[FindingKey(signature: signature, label: label), default: Added(subject: subject, firstSeen: record.time, lastSeen: record.time)]
                    .count(at: record.time)
            }
            let pair = FindingInstance(instance: instance.id, signature: signature)
            if seenPairs.insert(pair).inserted { seen.append((pair, labels)) }
        }
        // Made again after a delete in this transaction: it lives, and keeps what it shows.
        deleted.remove(instance.id)
    }

    /// `id` was deleted: its findings count it, but it has them no more.
    mutating func delete(_ id: String) {
        if seen.contains(where: { $0.pair.instance == id }) { deleted.insert(id) }
    }

    /// Reads the findings touched and which of their instances counted already (two round
    /// trips), adds this transaction's to them and stores them: one row per finding and label.
    /// Returns what was stored, for the cache.
    func store(in transaction: any StoreTransaction) throws(StoreError) -> (findings: [StoredFinding], instances: [FindingInstance]) {
        guard !added.isEmpty else { return ([], []) }
        let known = try transaction.findingInstances(of: Array(Set(seen.map(\.pair.instance))))
        var current = Dictionary(try transaction.findings(Array(added.keys)).map { ($0.key, $0) }) { first, _ in first }
        for (key, entry) in added {
            if var finding = current[key] {
                finding.totals.count += entry.count
                finding.totals.firstSeen = min(finding.totals.firstSeen, entry.firstSeen)
                finding.totals.lastSeen = max(finding.totals.lastSeen, entry.lastSeen)
                current[key] = finding
            } else {
                let totals = FindingTotals(count: entry.count, instances: 0, firstSeen: entry.firstSeen, lastSeen: entry.lastSeen, examples: [])
                current[key] = StoredFinding(subject: entry.subject, label: key.label, totals: totals)
            }
        }
        var new: [FindingInstance] = []
        for (pair, labels) in seen where !known.contains(pair) {
            for label in [""] + labels {
                let key = FindingKey(signature: pair.signature, label: label)
                current[key]!.totals.instances += 1
                if current[key]!.totals.examples.count < FindingTotals.maxExamples { current[key]!.totals.examples.append(pair.instance) }
            }
            if !deleted.contains(pair.instance) { new.append(pair) }
        }
        let findings = Array(current.values)
        try transaction.storeFindings(findings, instances: new)
        return (findings, new)
    }
}

/// What a commit did to the findings, for the cache.
enum FindingChanges {
    case none
    /// These were stored (each replacing the one under its key), and these instances have a finding they had not.
    case written([StoredFinding], instances: [FindingInstance])
    /// All of them, as read from the store (after others committed).
    case replaced(StoredFindings)
}
