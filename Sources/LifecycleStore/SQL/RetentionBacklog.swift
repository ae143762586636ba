/// Records past `--history-limit` that wait to be deleted, kept by the writer across its transactions.
///
/// Deleting an instance's oldest record in the very transaction that passed the limit wrote, for each record of each
/// commit, an old page of `records` and the first index page of its instance: once a QA rig's instances were full, a
/// durable POST wrote a fifth more (`Benchmarks/history-limit-bench.sh`) and ran slower. Deleted together, records
/// written together share their pages, and an instance's index page is written once for many of its records. So:
/// - every instance keeps at least its newest `limit` records; at most ``capacity`` more wait, all instances together
///   (an eighth of the limit, at most 4096, so limits under 16 delete at once), and the transaction that fills the
///   backlog deletes them all;
/// - a drop deletes only records numbered below the record that decided it: one made again under a deleted instance's
///   id, here or by another process on PostgreSQL, keeps its records;
/// - it lives in memory: after a restart what waited stays, until its instance's next drop, which takes every older
///   version along. History and replay show records as the store holds them, with the floor of what was dropped.
struct RetentionBacklog: Sendable {
    /// One instance's drop: its records of versions through `version`, numbered below `before`.
    struct Drop: Sendable {
        var version: Int64
        var before: Int64
    }

    let capacity: Int
    /// The newest drop of each instance; a newer one covers every older one of the same instance.
    private(set) var drops: [String: Drop] = [:]
    /// Records past the limit since the drops were last written; a drop that follows a deletion may count some again.
    private(set) var records = 0

    /// A backlog for `historyLimit`; a transaction's own drops are gathered in one of capacity 1.
    init(historyLimit: Int = 1) {
        capacity = min(4096, max(1, historyLimit / 8))
    }

    /// Records that the record numbered `sequence` of `instance`, version `version`, pushes past `limit`.
    mutating func passed(_ limit: Int64, instance: String, version: Int64, sequence: Int64) {
        guard version > limit else { return }
        drops[instance] = Drop(version: version - limit, before: sequence)
        records += 1
    }

    /// What a transaction holding `other`'s drops writes before its COMMIT: none until the two fill the backlog, then
    /// all of them. Read only: the backlog changes once the COMMIT succeeds (``committed(_:)``).
    func due(with other: RetentionBacklog) -> [String: Drop] {
        isFilled(by: other) ? drops.merging(other.drops, uniquingKeysWith: Self.newer) : [:]
    }

    /// A transaction holding `other`'s drops committed: it wrote them all with the backlog's, or they wait with them.
    /// In place, so the backlog's dictionary is not copied every commit.
    mutating func committed(_ other: RetentionBacklog) {
        if isFilled(by: other) {
            (drops, records) = ([:], 0)
        } else {
            drops.merge(other.drops, uniquingKeysWith: Self.newer)
            records += other.records
        }
    }

    private func isFilled(by other: RetentionBacklog) -> Bool {
        records + other.records >= capacity
    }

    /// The newer drop wins whole: its instance may have been deleted and made again since the older one.
    private static func newer(_ a: Drop, _ b: Drop) -> Drop {
        a.before > b.before ? a : b
    }
}
