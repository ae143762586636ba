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
        let labels = try labelsText(instance.labels, of: instance.id)
        return InstanceColumn.row([
            .text(instance.id), .text(instance.model), .text(s.state), .integer(s.version), .integer(s.launchCount), .text(action),
            .text(s.window), .text(s.breadcrumb.step), .boolean(s.breadcrumb.isSceneConnected), .integer(s.counters.unexpected),
            .integer(s.counters.ignored), .integer(s.counters.incompleteLaunches), .integer(milliseconds(instance.createdAt)),
            .integer(milliseconds(instance.updatedAt)), .integer(s.counters.divergences), .integer(s.counters.dropped), .text(labels),
        ])
    }

    /// Labels as stored: a JSON object with its keys sorted (`{}` for none).
    static func labelsText(_ labels: [String: String], of id: String) throws(StoreError) -> String {
        // Most instances have none: no encoder for them (it was a row's dearest column to write).
        if labels.isEmpty { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(labels), as: UTF8.self)
        } catch {
            throw StoreError("the labels of instance \(id) do not encode: \(error)", kind: .rejectedWrite)
        }
    }

    static func instance<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> StoredInstance {
        var labels = LabelDecoder()
        return try instance(row, labels: &labels)
    }

    /// An instance, its labels decoded by `labels`: rows read together share one, so labels they share decode once.
    static func instance<Row: StoredRow>(_ row: Row, labels decoder: inout LabelDecoder) throws(Row.Failure) -> StoredInstance {
        let row = row.columns(InstanceColumn.self)
        let id = try row.text(.id, named: "instances.id")
        var action: PendingAction?
        if let json = row.text(.bufferedAction) {
            do {
                action = try JSONDecoder().decode(PendingAction.self, from: Data(json.utf8))
            } catch {
                throw Row.damaged("the buffered action of instance \(id) does not decode (\(error)): \(json)")
            }
        }
        let state = InstanceState(
            state: try row.text(.state, named: "instances.state of \(id)"), version: row.integer(.version), launchCount: row.integer(.launchCount),
            bufferedAction: action, window: row.text(.window),
            breadcrumb: Breadcrumb(step: row.text(.breadcrumbStep), isSceneConnected: row.boolean(.sceneConnected)),
            counters: Counters(
                unexpected: row.integer(.unexpected), ignored: row.integer(.ignored), incompleteLaunches: row.integer(.incompleteLaunches),
                divergences: row.integer(.divergences), dropped: row.integer(.dropped)
            )
        )
        let labelsJSON = try row.text(.labels, named: "instances.labels of \(id)")
        let labels: [String: String]
        do {
            labels = try decoder.labels(labelsJSON)
        } catch {
            throw Row.damaged("the labels of instance \(id) do not decode (\(error)): \(labelsJSON)")
        }
        return StoredInstance(
            id: id, model: try row.text(.model, named: "instances.model of \(id)"), createdAt: row.date(.createdAt), updatedAt: row.date(.updatedAt), state: state,
            labels: labels
        )
    }

    // MARK: Records and deletion records

    static func record(_ sequence: Int64, instance: String, version: Int64, kind: RecordKind, outcome: Outcome?, json: [UInt8], isDivergent: Bool = false) -> [ColumnValue] {
        RecordColumn.row([
            .integer(sequence), .text(instance), .integer(version), .integer(kind.rawValue), .integer(outcome?.storedCode), .bytes(json), .boolean(isDivergent),
        ])
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
        TombstoneColumn.row([.integer(sequence), .text(instance.id), .text(instance.model), .integer(milliseconds(time)), .bytes(json)])
    }

    // MARK: Idempotency keys

    /// `result` 0 created an instance (`body` is its JSON), 1 applied an input, 2 an unexpected one (`body`: the record's);
    /// `instance` and `instance_created_at` name the instance either went to. `released_at` is NULL while the instance
    /// lives (see ``StoredKey``).
    static func key(_ key: String, fingerprint: [UInt8], _ write: RememberedWrite, at time: Date) -> [ColumnValue] {
        let (result, instance, model, createdAt, json): (Int64, String?, String?, Int64?, [UInt8]) = switch write {
        case .created(let id, let model, let createdAt, let json): (0, id, model, milliseconds(createdAt), json)
        case .applied(let json, let isUnexpected, let instance): (isUnexpected ? 2 : 1, instance?.id, nil, instance.map { milliseconds($0.createdAt) }, json)
        }
        return KeyColumn.row([
            .text(key), .bytes(fingerprint), .integer(result), .text(instance), .text(model), .integer(createdAt), .bytes(json), .integer(milliseconds(time)),
            .integer(nil),
        ])
    }

    /// The SELECT of keys' rows, for a condition to follow.
    static let selectKeys = "SELECT \(KeyColumn.list()) FROM idempotency"
    /// The SELECT of a key's row, by its key (`$1`).
    static let selectKey = "\(selectKeys) WHERE key = $1"

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
    /// The key's row (``Codec/selectKey``).
    init<Row: StoredRow>(_ row: Row, key: String) throws(Row.Failure) {
        let row = row.columns(KeyColumn.self)
        fingerprint = row.bytes(.fingerprint)
        releasedAt = row.isNull(.releasedAt) ? nil : row.date(.releasedAt)
        switch row.integer(.result) {
        case 0:
            guard !row.isNull(.instanceCreatedAt) else {
                throw Row.damaged("idempotency.instance_created_at of key \(key) is NULL for a created instance: the database is damaged")
            }
            write = .created(
                id: try row.text(.instance, named: "idempotency.instance of key \(key)"), model: try row.text(.model, named: "idempotency.model of key \(key)"),
                createdAt: row.date(.instanceCreatedAt), json: row.bytes(.body)
            )
        case 1, 2:
            let instance = row.isNull(.instance) || row.isNull(.instanceCreatedAt)
                ? nil : KeyedInstance(id: try row.text(.instance, named: "idempotency.instance of key \(key)"), createdAt: row.date(.instanceCreatedAt))
            write = .applied(recordJSON: row.bytes(.body), isUnexpected: row.integer(.result) == 2, instance: instance)
        case let result:
            throw Row.unknown("idempotency key \(key) has result", result)
        }
    }
}

extension Codec {
    // MARK: History and replays

    /// The columns of a history page (``HistoryColumn``) and of its oldest record (``OldestColumn``), selected once.
    static let historyColumns = HistoryColumn.list()
    static let oldestColumns = OldestColumn.list()

    /// The record in a replay row (``ReplayColumn``).
    static func replayed<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> ReplayedRecord {
        let row = row.columns(ReplayColumn.self)
        let sequence = row.integer(.seq)
        guard let kind = RecordKind(rawValue: row.integer(.kind)) else { throw Row.unknown("record \(sequence) has kind", row.integer(.kind)) }
        var outcome: Outcome?
        if !row.isNull(.outcome) {
            guard let stored = Outcome(storedCode: row.integer(.outcome)) else {
                throw Row.unknown("record \(sequence) has outcome", row.integer(.outcome))
            }
            outcome = stored
        }
        return ReplayedRecord(
            sequence: sequence, kind: kind, instance: try row.text(.instance, named: "records.instance of \(sequence)"),
            model: try row.text(.model, named: "the model of record \(sequence)"), outcome: outcome, json: row.bytes(.body),
            isDivergent: row.boolean(.divergent)
        )
    }

    /// Reads the replay's bounds (``BoundsColumn``, from `offset` on) into `page`.
    static func bounds<Row: StoredRow>(_ row: Row, from offset: Int = 0, into page: inout ReplayPage) {
        let row = row.columns(BoundsColumn.self, from: offset)
        page.droppedThrough = row.integer(.droppedThrough)
        page.oldestKept = [BoundsColumn.oldestRecord, .oldestTombstone].compactMap { row.isNull($0) ? nil : row.integer($0) }.min()
    }

    // MARK: Findings

    static let selectFindings = "SELECT \(FindingColumn.list()) FROM findings"
    static let selectFindingInstances = "SELECT \(FindingInstanceColumn.list()) FROM finding_instances"

    static func columns(_ finding: StoredFinding) -> [ColumnValue] {
        let s = finding.subject
        let t = finding.totals
        return FindingColumn.row([
            .text(finding.key.stored), .text(s.signature), .text(finding.label), .text(s.kind.rawValue), .text(s.model), .text(s.state), .text(s.aspect),
            .text(s.name), .integer(t.count), .integer(t.instances), .integer(milliseconds(t.firstSeen)), .integer(milliseconds(t.lastSeen)),
            // Instance ids hold no space.
            .text(t.examples.joined(separator: " ")),
        ])
    }

    static func finding<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> StoredFinding {
        let row = row.columns(FindingColumn.self)
        let signature = try row.text(.signature, named: "findings.signature")
        guard let kind = FindingKind(rawValue: try row.text(.kind, named: "findings.kind of \(signature)")) else {
            throw Row.damaged("finding \(signature) has a kind lifecycled does not write")
        }
        let subject = FindingSubject(
            kind: kind, model: try row.text(.model, named: "findings.model of \(signature)"), state: row.text(.state), aspect: row.text(.aspect), name: row.text(.name)
        )
        let examples = try row.text(.examples, named: "findings.examples of \(signature)")
        let totals = FindingTotals(
            count: row.integer(.count), instances: row.integer(.instances), firstSeen: row.date(.firstSeen), lastSeen: row.date(.lastSeen),
            examples: examples.split(separator: " ").map(String.init)
        )
        return StoredFinding(subject: subject, label: try row.text(.label, named: "findings.label of \(signature)"), totals: totals)
    }

    static func findingInstance(_ pair: FindingInstance) -> [ColumnValue] {
        FindingInstanceColumn.row([.text(pair.instance), .text(pair.signature)])
    }

    static func findingInstance<Row: StoredRow>(_ row: Row) throws(Row.Failure) -> FindingInstance {
        let row = row.columns(FindingInstanceColumn.self)
        return FindingInstance(
            instance: try row.text(.instance, named: "finding_instances.instance"), signature: try row.text(.signature, named: "finding_instances.signature")
        )
    }

    // MARK: Coverage counters

    static let selectCoverage = "SELECT \(CoverageColumn.list()) FROM coverage"

    static func counters(_ counts: CoverageCounts) -> [[ColumnValue]] {
        counts.counts.map { CoverageColumn.row([.text($0.key.model), .integer($0.key.kind.rawValue), .text($0.key.name), .integer($0.value)]) }
    }

    static func addCounter<Row: StoredRow>(_ row: Row, to counts: inout CoverageCounts) throws(Row.Failure) {
        let row = row.columns(CoverageColumn.self)
        guard let kind = CoverageCounts.Kind(rawValue: row.integer(.kind)) else { throw Row.unknown("a coverage counter has kind", row.integer(.kind)) }
        let key = CoverageCounts.Key(model: try row.text(.model, named: "coverage.model"), kind: kind, name: try row.text(.name, named: "coverage.name"))
        counts.add(row.integer(.count), to: key)
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

/// One result row, read by column position: what SQLite's rows and libpq's results both offer to the codec, which reads
/// them by name through ``columns(_:from:)`` (positions fixed by the ``StoredColumn`` cases).
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
    /// `name` is spelled only for damage: rows are read by the million at start-up.
    func text(_ column: Int, named name: @autoclosure () -> String) throws(Failure) -> String {
        guard let text = text(column) else { throw Self.damaged("\(name()) is NULL, which the schema does not allow: the database is damaged") }
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

/// Labels as stored (``Codec/labelsText(_:of:)``) decoded, remembering what recent texts decoded to.
///
/// At start-up every instance's labels are read, and instances often share theirs (an app's
/// version, a test run): decoding each text once took most of the load's time (JSONDecoder was
/// three quarters of it at 1,000,000 instances), and the instances sharing a text share one
/// dictionary's storage. At most ``capacity`` texts are kept, so unique labels cost no more than before.
struct LabelDecoder {
    static let capacity = 4096
    private var decoded: [String: [String: String]] = [:]

    mutating func labels(_ json: String) throws -> [String: String] {
        if json == "{}" { return [:] }
        if let known = decoded[json] { return known }
        let labels = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
        if decoded.count < Self.capacity { decoded[json] = labels }
        return labels
    }
}
