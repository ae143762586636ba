import Foundation
import LifecycleKit

/// Each stored shape written and read once for both stores, with every check that what is read is something lifecycled writes.
enum Codec {
    /// Times are kept in whole milliseconds; the service rounds its clock the same way.
    static func milliseconds(_ date: Date) -> Int64 { date.millisecondsSince1970 }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    // MARK: Instances

    static func columns(of instance: StoredInstance) throws(StoreError) -> [ColumnValue] {
        let s = instance.state
        var action: String?
        if let pending = s.bufferedAction {
            do {
                action = String(decoding: try JSONEncoder().encode(pending), as: UTF8.self)
            } catch {
                throw StoreError("the buffered action of instance \(instance.id) does not encode: \(error)", kind: .rejectedWrite)
            }
        }
        return [
            .text(instance.id), .text(instance.model), .text(s.state), .integer(s.version), .integer(s.launchCount), .text(action),
            .text(s.window), .text(s.breadcrumb.step), .boolean(s.breadcrumb.isSceneConnected), .integer(s.counters.unexpected),
            .integer(s.counters.ignored), .integer(s.counters.incompleteLaunches), .integer(milliseconds(instance.createdAt)),
            .integer(milliseconds(instance.updatedAt)), .integer(s.counters.divergences), .integer(s.counters.dropped),
            .text(try labelsText(instance.labels, of: instance.id)),
        ]
    }

    /// Labels as stored: a JSON object with its keys sorted (`{}` for none).
    static func labelsText(_ labels: [String: String], of id: String) throws(StoreError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(labels), as: UTF8.self)
        } catch {
            throw StoreError("the labels of instance \(id) do not encode: \(error)", kind: .rejectedWrite)
        }
    }

    static func instance<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> StoredInstance {
        let id = try row.text(0, named: "instances.id")
        var action: PendingAction?
        if let json = row.text(5) {
            do {
                action = try JSONDecoder().decode(PendingAction.self, from: Data(json.utf8))
            } catch {
                throw Row.damaged("the buffered action of instance \(id) does not decode (\(error)): \(json)")
            }
        }
        let state = InstanceState(
            state: try row.text(2, named: "instances.state of \(id)"), version: row.integer(3), launchCount: row.integer(4),
            bufferedAction: action, window: row.text(6), breadcrumb: Breadcrumb(step: row.text(7), isSceneConnected: row.boolean(8)),
            counters: Counters(unexpected: row.integer(9), ignored: row.integer(10), incompleteLaunches: row.integer(11), divergences: row.integer(14), dropped: row.integer(15))
        )
        let labelsJSON = try row.text(16, named: "instances.labels of \(id)")
        let labels: [String: String]
        do {
            labels = try JSONDecoder().decode([String: String].self, from: Data(labelsJSON.utf8))
        } catch {
            throw Row.damaged("the labels of instance \(id) do not decode (\(error)): \(labelsJSON)")
        }
        return StoredInstance(
            id: id, model: try row.text(1, named: "instances.model of \(id)"), createdAt: row.date(12), updatedAt: row.date(13), state: state,
            labels: labels
        )
    }

    // MARK: Records (seq, instance, version, kind, outcome, body, divergent) and deletion records (seq, instance, model, deleted_at, body)

    static func record(_ sequence: Int64, instance: String, version: Int64, kind: RecordKind, outcome: Outcome?, json: [UInt8], isDivergent: Bool = false) -> [ColumnValue] {
        [.integer(sequence), .text(instance), .integer(version), .integer(kind.rawValue), .integer(outcome?.storedCode), .bytes(json), .boolean(isDivergent)]
    }

    /// An input's record numbered `sequence` for `instance`: its JSON (encoded once numbered, as streams and answers carry it) and its row.
    static func numbered(
        _ record: Record, _ sequence: Int64, instance: String, encode: (Record) -> [UInt8]
    ) -> (encoded: EncodedRecord, row: [ColumnValue]) {
        var numbered = record
        numbered.sequence = sequence
        numbered.instance = instance
        let encoded = EncodedRecord(sequence: sequence, recordJSON: encode(numbered))
        let row = Self.record(sequence, instance: instance, version: record.version, kind: RecordKind(record.kind), outcome: record.outcome, json: encoded.recordJSON,
            isDivergent: record.divergence != nil)
        return (encoded, row)
    }

    static func tombstone(_ sequence: Int64, of instance: StoredInstance, at time: Date, json: [UInt8]) -> [ColumnValue] {
        [.integer(sequence), .text(instance.id), .text(instance.model), .integer(milliseconds(time)), .bytes(json)]
    }

    // MARK: Idempotency keys: key, fingerprint, result, instance, model, instance_created_at, body, created_at, released_at

    /// `result` 0 created an instance (`body` is its JSON), 1 applied an input, 2 an unexpected one (`body`: the record's);
    /// `instance` and `instance_created_at` name the instance either went to. `released_at` is not written: NULL while the
    /// instance lives (see ``StoredKey``).
    static func key(_ key: String, fingerprint: [UInt8], _ write: RememberedWrite, at time: Date) -> [ColumnValue] {
        let result: [ColumnValue] = switch write {
        case .created(let id, let model, let createdAt, let json): [.integer(0), .text(id), .text(model), .integer(milliseconds(createdAt)), .bytes(json)]
        case .applied(let json, let isUnexpected, let instance):
            [.integer(isUnexpected ? 2 : 1), .text(instance?.id), .text(nil), .integer(instance.map { milliseconds($0.createdAt) }), .bytes(json)]
        }
        return [.text(key), .bytes(fingerprint)] + result + [.integer(milliseconds(time))]
    }

    /// A key as stored: what identifies its request, what the write did, and when it was released.
    ///
    /// A key is kept as long as the instance its write went to, so a request replayed however late is answered as it
    /// first was, never applied twice. Deleting the instance releases its keys (``SQLTransaction/delete(_:at:encode:)``),
    /// which are kept a while longer, for as long as its deletion record, so that a replay is refused rather than
    /// applied to an instance made again under its id; keys stored before schema 7 (SQLite; 4 on PostgreSQL) count as
    /// released when made, and expire as they always did.
    struct StoredKey {
        var fingerprint: [UInt8]
        var write: RememberedWrite
        /// When its instance was deleted; `nil` while it lives.
        var releasedAt: Date?

        /// What a request with `key` gets at `now`: unused once `lifetime` has passed since the key's release.
        func lookUp(_ key: IdempotencyKey, now: Date, lifetime: TimeInterval) -> IdempotencyLookup {
            if let releasedAt, releasedAt.addingTimeInterval(lifetime) <= now { return .unused }
            return fingerprint == key.fingerprint || fingerprint == key.formerFingerprint ? .replay(write) : .conflict
        }
    }
}

extension Codec.StoredKey {
    /// The key's row, from its fingerprint on.
    init<Row: StoredRow>(_ row: Row, key: String) throws(Row.Failure) {
        fingerprint = row.bytes(0)
        releasedAt = row.isNull(6) ? nil : row.date(6)
        switch row.integer(1) {
        case 0:
            guard !row.isNull(4) else {
                throw Row.damaged("idempotency.instance_created_at of key \(key) is NULL for a created instance: the database is damaged")
            }
            write = .created(
                id: try row.text(2, named: "idempotency.instance of key \(key)"), model: try row.text(3, named: "idempotency.model of key \(key)"),
                createdAt: row.date(4), json: row.bytes(5)
            )
        case 1, 2:
            let instance = row.isNull(2) || row.isNull(4)
                ? nil : KeyedInstance(id: try row.text(2, named: "idempotency.instance of key \(key)"), createdAt: row.date(4))
            write = .applied(recordJSON: row.bytes(5), isUnexpected: row.integer(1) == 2, instance: instance)
        case let result:
            throw Row.unknown("idempotency key \(key) has result", result)
        }
    }
}

extension Codec {
    // MARK: Replays: seq, kind, body, instance, outcome, model, divergent

    /// The record in a replay row's columns from `first` on.
    static func replayed<Row: StoredRow>(_ row: Row, from first: Int) throws(Row.Failure) -> ReplayedRecord {
        let sequence = row.integer(first)
        guard let kind = RecordKind(rawValue: row.integer(first + 1)) else { throw Row.unknown("record \(sequence) has kind", row.integer(first + 1)) }
        var outcome: Outcome?
        if !row.isNull(first + 4) {
            guard let stored = Outcome(storedCode: row.integer(first + 4)) else {
                throw Row.unknown("record \(sequence) has outcome", row.integer(first + 4))
            }
            outcome = stored
        }
        return ReplayedRecord(
            sequence: sequence, kind: kind, instance: try row.text(first + 3, named: "records.instance of \(sequence)"),
            model: try row.text(first + 5, named: "the model of record \(sequence)"), outcome: outcome, json: row.bytes(first + 2),
            isDivergent: row.boolean(first + 6)
        )
    }

    /// Reads the replay's bounds (see ``SQLConnection/replayBounds``, three columns) into `page`.
    static func bounds<Row: StoredRow>(_ row: Row, into page: inout ReplayPage) {
        page.droppedThrough = row.integer(0)
        page.oldestKept = [1, 2].compactMap { row.isNull($0) ? nil : row.integer($0) }.min()
    }

    // MARK: Findings: key, signature, label, kind, model, state, aspect, name, count, instances, first_seen, last_seen, examples

    static let selectFindings = "SELECT signature, label, kind, model, state, aspect, name, count, instances, first_seen, last_seen, examples FROM findings"

    static func columns(_ finding: StoredFinding) -> [ColumnValue] {
        let s = finding.subject
        let t = finding.totals
        return [
            .text(finding.key.stored), .text(s.signature), .text(finding.label), .text(s.kind.rawValue), .text(s.model), .text(s.state), .text(s.aspect),
            .text(s.name), .integer(t.count), .integer(t.instances), .integer(milliseconds(t.firstSeen)), .integer(milliseconds(t.lastSeen)),
            // Instance ids hold no space.
            .text(t.examples.joined(separator: " ")),
        ]
    }

    static func finding<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> StoredFinding {
        let signature = try row.text(0, named: "findings.signature")
        guard let kind = FindingKind(rawValue: try row.text(2, named: "findings.kind of \(signature)")) else {
            throw Row.damaged("finding \(signature) has a kind lifecycled does not write")
        }
        let subject = FindingSubject(kind: kind, model: try row.text(3, named: "findings.model of \(signature)"), state: row.text(4), aspect: row.text(5), name: row.text(6))
        let examples = try row.text(11, named: "findings.examples of \(signature)")
        let totals = FindingTotals(
            count: row.integer(7), instances: row.integer(8), firstSeen: row.date(9), lastSeen: row.date(10),
            examples: examples.split(separator: " ").map(String.init)
        )
        return StoredFinding(subject: subject, label: try row.text(1, named: "findings.label of \(signature)"), totals: totals)
    }

    static func findingInstance<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> FindingInstance {
        FindingInstance(instance: try row.text(0, named: "finding_instances.instance"), signature: try row.text(1, named: "finding_instances.signature"))
    }

    // MARK: Coverage counters: model, kind, name, count

    static func counters(_ counts: CoverageCounts) -> [[ColumnValue]] {
        counts.counts.map { [.text($0.key.model), .integer($0.key.kind.rawValue), .text($0.key.name), .integer($0.value)] }
    }

    static func addCounter<Row: StoredRow>(_ row: Row, to counts: inout CoverageCounts) throws(Row.Failure) {
        guard let kind = CoverageCounts.Kind(rawValue: row.integer(1)) else { throw Row.unknown("a coverage counter has kind", row.integer(1)) }
        let key = CoverageCounts.Key(model: try row.text(0, named: "coverage.model"), kind: kind, name: try row.text(2, named: "coverage.name"))
        counts.add(row.integer(3), to: key)
    }
}

extension Outcome {
    /// The outcome an `outcome` column's code stands for; `nil` for a code no lifecycled writes.
    init?(storedCode: Int64) {
        guard let outcome = Outcome.allCases.first(where: { $0.storedCode == storedCode }) else { return nil }
        self = outcome
    }

    /// How the `outcome` column keeps it (SQLite's migration v2 writes the same codes).
    var storedCode: Int64 {
        switch self {
        case .transitioned: 0
        case .stayed: 1
        case .ignored: 2
        case .unexpected: 3
        }
    }
}

/// One result row, read by column position: what SQLite's rows and libpq's results both offer to the codec.
protocol StoredRow {
    associatedtype Failure: Error
    /// The error for stored data no lifecycled writes: the database is damaged.
    static func damaged(_ message: String) -> Failure
    func isNull(_ column: Int) -> Bool
    /// An integer column; 0 for NULL.
    func integer(_ column: Int) -> Int64
    /// A boolean column (an integer in SQLite); `false` for NULL.
    func boolean(_ column: Int) -> Bool
    /// A text column; `nil` for NULL.
    func text(_ column: Int) -> String?
    /// A blob (`bytea`) column's bytes; empty for NULL.
    func bytes(_ column: Int) -> [UInt8]
    /// The size of a blob or text column, without reading it.
    func byteCount(_ column: Int) -> Int
}

extension StoredRow {
    /// The text of a column the schema declares NOT NULL: NULL there is damage, never an empty string.
    func text(_ column: Int, named name: String) throws(Failure) -> String {
        guard let text = text(column) else { throw Self.damaged("\(name) is NULL, which the schema does not allow: the database is damaged") }
        return text
    }

    /// A time column: whole milliseconds since 1970.
    func date(_ column: Int) -> Date { Codec.date(integer(column)) }

    /// The one wording of a code no lifecycled writes: `subject` is what has it ("record 7 has kind").
    static func unknown(_ subject: String, _ code: Int64) -> Failure {
        damaged("\(subject) \(code), which no lifecycled writes")
    }
}

/// A value for one column, typed even when NULL, since PostgreSQL gathers a column of them into one array for `unnest`.
enum ColumnValue: Sendable, Equatable {
    case integer(Int64?)
    case text(String?)
    case bytes([UInt8])
    case boolean(Bool)
    /// Arrays, which PostgreSQL takes for `unnest` and `ANY`; SQLite binds each value instead.
    case integers([Int64?]), texts([String?]), byteas([[UInt8]]), booleans([Bool])
}
