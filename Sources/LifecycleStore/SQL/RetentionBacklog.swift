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

    /// The backlog once a transaction holding `other`'s drops commits, and the drops that transaction writes (before
    /// its COMMIT): none until the backlog is full, then all of them, which leaves it empty.
    func adding(_ other: RetentionBacklog) -> (backlog: RetentionBacklog, due: [String: Drop]) {
        var backlog = self
        // The newer drop wins whole: its instance may have been deleted and made again since the older one.
        backlog.drops.merge(other.drops) { $0.before > $1.before ? $0 : $1 }
        backlog.records += other.records
        guard backlog.records >= capacity else { return (backlog, [:]) }
        let due = backlog.drops
        backlog.drops = [:]
        backlog.records = 0
        return (backlog, due)
    }
}
