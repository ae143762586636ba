import Foundation

/// One named change of a schema. A database records the name of each it has had (in `schema_migrations`); they run in
/// their list's order, so its count of them is its schema version.
struct Migration: Sendable {
    let name: String
    /// Run one after the other (PostgreSQL runs one statement per call; SQLite takes scripts).
    let statements: [String]

    init(_ name: String, _ statements: String...) {
        self.name = name
        self.statements = statements
    }
}

extension SQLConnection {
    /// Brings the schema to the last of `migrations`, recording each one's name as it runs (GRDB's `DatabaseMigrator`
    /// does the same), each migration in a `transaction` of its own (SQLite's; PostgreSQL's runs the body in the
    /// caller's, under its lock). The dialect's integer version (``SQLDialect/schemaVersion``) is kept at the count, as
    /// lifecycled kept it before names: a lifecycled that old still refuses a database of a newer one, and a database
    /// it wrote has had the first migrations its integer counts, whose names are recorded before the rest run.
    /// Refuses a database that has had a migration `migrations` does not name (a newer lifecycled's), or not their first.
    func migrate(_ migrations: [Migration], transaction: (() throws(Failure) -> Void) throws(Failure) -> Void) throws(Failure) {
        var applied = 0
        try transaction { () throws(Failure) in
            try executeScript("CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at bigint NOT NULL)")
            let version = try first(Self.dialect.schemaVersion) { Int($0.integer(0)) } ?? 0
            guard version <= migrations.count else {
                throw Self.refusal("schema version \(version) is newer than this lifecycled knows (\(migrations.count))")
            }
            let recorded = Set(try migrationNames())
            let unknown = recorded.subtracting(migrations.map(\.name))
            guard unknown.isEmpty else {
                throw Self.refusal(
                    "the database has had migrations this lifecycled does not know (\(unknown.sorted().joined(separator: ", "))): a newer lifecycled wrote it"
                )
            }
            let first = migrations.prefix(recorded.count).map(\.name)
            guard recorded == Set(first) else {
                let missing = first.filter { !recorded.contains($0) }
                throw Self.refusal(
                    "the database has had \(recorded.count) migrations, but not the first \(recorded.count) this lifecycled runs: it lacks \(missing.joined(separator: ", "))"
                )
            }
            // The integer counts migrations a lifecycled from before names ran, after those recorded.
            applied = max(recorded.count, version)
            try record(migrations[recorded.count..<applied])
            if version != applied { try executeScript(Self.dialect.settingSchemaVersion(applied)) }
        }
        for migration in migrations[applied...] {
            try transaction { () throws(Failure) in
                for statement in migration.statements { try executeScript(statement) }
                try record([migration])
                try executeScript(Self.dialect.settingSchemaVersion(applied + 1))
            }
            applied += 1
        }
    }

    private func record(_ migrations: ArraySlice<Migration>) throws(Failure) {
        guard !migrations.isEmpty else { return }
        let now = Codec.milliseconds(Date())
        try run(migrations.map { SQLStatement("INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)", [.text($0.name), .integer(now)]) })
    }

    /// How many migrations the database has had: its schema version.
    func migrationCount() throws(Failure) -> Int {
        try first("SELECT count(*) FROM schema_migrations") { Int($0.integer(0)) } ?? 0
    }

    /// The names of the migrations the database has had, in no particular order.
    func migrationNames() throws(Failure) -> [String] {
        try rows("SELECT name FROM schema_migrations") { (row) throws(Failure) in try row.text(0, named: "schema_migrations.name") }
    }

    /// Refuses to go on unless each table the codec writes and reads has each of its columns (``TableColumn``): the codec
    /// reads them by their positions in its statements, which name them, so a column renamed or missing fails here, once.
    func checkColumns() throws(Failure) {
        var missing: [String] = []
        for table in [Self.dialect.instances, .records, .tombstones, .keys, .findings, .findingInstances, .coverage] {
            let found = Set(try rows(Self.dialect.tableColumns, [.text(table.name)]) { (row) throws(Failure) in try row.text(0, named: "a column name") })
            missing += table.names.filter { !found.contains($0) }.map { "\(table.name).\($0)" }
        }
        guard missing.isEmpty else {
            throw Self.refusal("the database lacks columns this lifecycled reads and writes: \(missing.joined(separator: ", "))")
        }
    }
}

/// PostgreSQL's schema (`meta.schema_version` also counts what ran); integers `bigint`, so all read back alike.
enum PostgresMigrations {
    static let all: [Migration] = [v1, v2, v3, v4, v5, v6]

    /// SQLite's version 4, and `commit_counter`; UNIQUE (instance, version) backstops two replicas deciding on one state.
    static let v1 = Migration(
        "v1-tables",
        "CREATE TABLE commit_counter (id smallint PRIMARY KEY CHECK (id = 1), last_sequence bigint NOT NULL, instance_count bigint NOT NULL)",
        "INSERT INTO commit_counter (id, last_sequence, instance_count) VALUES (1, 0, 0)",
        """
        CREATE TABLE instances (
            id text PRIMARY KEY, model text NOT NULL, state text NOT NULL, version bigint NOT NULL, launch_count bigint NOT NULL,
            buffered_action text, window_name text, breadcrumb_step text, scene_connected boolean NOT NULL, unexpected bigint NOT NULL,
            ignored bigint NOT NULL, incomplete_launches bigint NOT NULL, created_at bigint NOT NULL, updated_at bigint NOT NULL
        )
        """,
        """
        CREATE TABLE records (
            seq bigint PRIMARY KEY, instance text NOT NULL, version bigint NOT NULL, kind bigint NOT NULL, outcome bigint,
            body bytea NOT NULL, UNIQUE (instance, version)
        )
        """,
        "CREATE TABLE tombstones (seq bigint PRIMARY KEY, instance text NOT NULL, model text NOT NULL, deleted_at bigint NOT NULL, body bytea NOT NULL)",
        "CREATE INDEX tombstones_by_age ON tombstones (deleted_at)",
        """
        CREATE TABLE idempotency (
            key text PRIMARY KEY, fingerprint bytea NOT NULL, result bigint NOT NULL, instance text, model text,
            instance_created_at bigint, body bytea NOT NULL, created_at bigint NOT NULL
        )
        """,
        "CREATE INDEX idempotency_by_age ON idempotency (created_at)",
        "CREATE TABLE coverage (model text NOT NULL, kind bigint NOT NULL, name text NOT NULL, count bigint NOT NULL, PRIMARY KEY (model, kind, name))"
    )

    /// SQLite's version 5.
    static let v2 = Migration(
        "v2-divergences", "ALTER TABLE instances ADD COLUMN divergences bigint NOT NULL DEFAULT 0",
        "ALTER TABLE records ADD COLUMN divergent boolean NOT NULL DEFAULT false", "CREATE INDEX records_divergent ON records (instance, version) WHERE divergent"
    )

    /// SQLite's version 6.
    static let v3 = Migration("v3-dropped", "ALTER TABLE instances ADD COLUMN dropped bigint NOT NULL DEFAULT 0")

    /// SQLite's version 7.
    static let v4 = Migration(
        "v4-keys-kept-with-instances", "ALTER TABLE idempotency ADD COLUMN released_at bigint", "UPDATE idempotency SET released_at = created_at",
        "DROP INDEX idempotency_by_age", "CREATE INDEX idempotency_held ON idempotency (instance) WHERE released_at IS NULL",
        "CREATE INDEX idempotency_released ON idempotency (released_at) WHERE released_at IS NOT NULL"
    )

    /// SQLite's version 8.
    static let v5 = Migration("v5-labels", "ALTER TABLE instances ADD COLUMN labels text NOT NULL DEFAULT '{}'")

    /// SQLite's version 9.
    static let v6 = Migration(
        "v6-findings",
        """
        CREATE TABLE findings (
            key text PRIMARY KEY, signature text NOT NULL, label text NOT NULL, kind text NOT NULL, model text NOT NULL, state text,
            aspect text, name text, count bigint NOT NULL, instances bigint NOT NULL, first_seen bigint NOT NULL, last_seen bigint NOT NULL,
            examples text NOT NULL
        )
        """,
        "CREATE TABLE finding_instances (instance text NOT NULL, signature text NOT NULL, PRIMARY KEY (instance, signature))"
    )
}

/// SQLite's schema, one migration a version (`PRAGMA user_version` also counts what ran).
enum SQLiteMigrations {
    static let all: [Migration] = [v1, v2, v3, v4, v5, v6, v7, v8, v9]

    /// Version 1: instances, their records, idempotency keys with the responses they got, and `meta`.
    static let v1 = Migration(
        "v1-tables",
        """
        CREATE TABLE instances (
            id TEXT PRIMARY KEY, model TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, launch_count INTEGER NOT NULL,
            buffered_action TEXT, window TEXT, breadcrumb_step TEXT, scene_connected INTEGER NOT NULL, unexpected INTEGER NOT NULL,
            ignored INTEGER NOT NULL, incomplete_launches INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE records (seq INTEGER PRIMARY KEY, instance TEXT NOT NULL, version INTEGER NOT NULL, body BLOB NOT NULL);
        CREATE UNIQUE INDEX records_by_instance ON records(instance, version);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE idempotency (
            key TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, status INTEGER NOT NULL, content_type TEXT NOT NULL, body BLOB NOT NULL,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX idempotency_by_age ON idempotency(created_at);
        """
    )

    /// Records carry kind, outcome and instance (taken from old JSON, which always begins {"sequence":N,); deletion records.
    static let v2 = Migration(
        "v2-record-kinds",
        """
        ALTER TABLE records ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN outcome INTEGER;
        UPDATE records SET
          kind = CASE json_extract(CAST(body AS TEXT), '$.kind') WHEN 'action' THEN 1 WHEN 'relaunch' THEN 2 ELSE 0 END,
          outcome = CASE json_extract(CAST(body AS TEXT), '$.outcome')
            WHEN 'transitioned' THEN 0 WHEN 'stayed' THEN 1 WHEN 'ignored' THEN 2 WHEN 'unexpected' THEN 3 END,
          body = CASE
            WHEN substr(CAST(body AS TEXT), 1, length('{"sequence":' || seq || ',')) = '{"sequence":' || seq || ','
              AND json_extract(CAST(body AS TEXT), '$.instance') IS NULL
            THEN CAST('{"sequence":' || seq || ',"instance":' || json_quote(instance)
              || substr(CAST(body AS TEXT), length('{"sequence":' || seq) + 1) AS BLOB)
            ELSE body END;
        CREATE TABLE tombstones (seq INTEGER PRIMARY KEY, instance TEXT NOT NULL, model TEXT NOT NULL, deleted_at INTEGER NOT NULL, body BLOB NOT NULL);
        CREATE INDEX tombstones_by_age ON tombstones(deleted_at);
        """
    )

    /// A key keeps what its write did (see ``Codec/key(_:fingerprint:_:at:)``), not the response (201, 200 or 409; any
    /// other fails); `meta.unscoped_keys_through` keeps keys stored before scoping found until they expire.
    static let v3 = Migration(
        "v3-remembered-writes",
        """
        ALTER TABLE idempotency RENAME TO idempotency_responses;
        DROP INDEX idempotency_by_age;
        CREATE TABLE idempotency (
            key TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, result INTEGER NOT NULL, instance TEXT, model TEXT, instance_created_at INTEGER,
            body BLOB NOT NULL, created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO idempotency (key, fingerprint, result, instance, model, instance_created_at, body, created_at)
          SELECT key, fingerprint,
            CASE status WHEN 201 THEN 0 WHEN 200 THEN 1 WHEN 409 THEN 2 END,
            CASE status WHEN 201 THEN json_extract(CAST(body AS TEXT), '$.id') END,
            CASE status WHEN 201 THEN json_extract(CAST(body AS TEXT), '$.model') END,
            CASE status WHEN 201 THEN
              CAST(round((julianday(json_extract(CAST(body AS TEXT), '$.createdAt')) - 2440587.5) * 86400000) AS INTEGER) END,
            CASE status WHEN 409 THEN CAST(json_extract(CAST(body AS TEXT), '$.record') AS BLOB) ELSE body END,
            created_at
          FROM idempotency_responses;
        DROP TABLE idempotency_responses;
        CREATE INDEX idempotency_by_age ON idempotency(created_at);
        INSERT OR REPLACE INTO meta (key, value)
          SELECT 'unscoped_keys_through', max(created_at) FROM idempotency HAVING count(*) > 0;
        """
    )

    /// Coverage counters (see `CoverageCounts`), from the event records still kept; one pass, not a GROUP BY that sorts
    /// every record (3 s against 9 for 1,000,000).
    static let v4 = Migration(
        "v4-coverage",
        """
        CREATE TABLE coverage (model TEXT NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (model, kind, name))
          WITHOUT ROWID;
        INSERT INTO coverage (model, kind, name, count)
          SELECT model, kind, name, 1 FROM (
            SELECT instances.model AS model,
              CASE WHEN records.outcome = 3 THEN 1 ELSE 0 END AS kind,
              CASE WHEN records.outcome = 3 THEN json_extract(CAST(records.body AS TEXT), '$.from')
                ELSE json_extract(CAST(records.body AS TEXT), '$.row') END AS name
            FROM records JOIN instances ON instances.id = records.instance
            WHERE records.kind = 0
          )
          WHERE name IS NOT NULL
          ON CONFLICT (model, kind, name) DO UPDATE SET count = count + 1;
        """
    )

    /// Divergences counted per instance; records flagged divergent (none before), indexed for history's and streams' filter.
    static let v5 = Migration(
        "v5-divergences",
        """
        ALTER TABLE instances ADD COLUMN divergences INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN divergent INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX records_divergent ON records(instance, version) WHERE divergent;
        """
    )

    /// Inputs apps' reporters dropped before delivery, counted per instance (gap records, kind 5).
    static let v6 = Migration("v6-dropped", "ALTER TABLE instances ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;")

    /// Idempotency keys are kept while their instance lives, not for 24 hours (see ``Codec/StoredKey``): `released_at` is
    /// when its deletion released a key; those already stored count as released when made, and expire as they did.
    static let v7 = Migration(
        "v7-keys-kept-with-instances",
        """
        ALTER TABLE idempotency ADD COLUMN released_at INTEGER;
        UPDATE idempotency SET released_at = created_at;
        DROP INDEX idempotency_by_age;
        CREATE INDEX idempotency_held ON idempotency(instance) WHERE released_at IS NULL;
        CREATE INDEX idempotency_released ON idempotency(released_at) WHERE released_at IS NOT NULL;
        """
    )

    /// Labels an instance was created with (a JSON object of strings, keys sorted): who it is. Those made before have none.
    static let v8 = Migration("v8-labels", "ALTER TABLE instances ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';")

    /// Findings (docs/TRIAGE.md): per signature, over every instance (label '') and per label `key=value`, what the
    /// records add up to, kept by each commit; which instances have which, so each counts once. Records already kept
    /// are not counted: findings start with this version.
    static let v9 = Migration(
        "v9-findings",
        """
        CREATE TABLE findings (
            key TEXT PRIMARY KEY, signature TEXT NOT NULL, label TEXT NOT NULL, kind TEXT NOT NULL, model TEXT NOT NULL, state TEXT,
            aspect TEXT, name TEXT, count INTEGER NOT NULL, instances INTEGER NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL,
            examples TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE finding_instances (instance TEXT NOT NULL, signature TEXT NOT NULL, PRIMARY KEY (instance, signature)) WITHOUT ROWID;
        """
    )
}
