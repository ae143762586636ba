/// PostgreSQL's schema (`meta.schema_version` counts what ran); integers `bigint`, so all read back alike.
enum PostgresMigrations {
    static let all: [Migration] = [v1]

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
}
