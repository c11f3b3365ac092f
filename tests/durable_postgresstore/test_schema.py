"""The dedicated pulse_durable schema: created once, checked strictly (B-PG-1, B-PG-3)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from durable_core import RunRecord, SchemaError, record_to_json
from durable_postgresstore import PostgresStore, PostgresStoreError

pytestmark = pytest.mark.postgres


def objects(admin) -> list[tuple[str, str]]:
    return admin.execute(
        "SELECT relname, relkind::text FROM pg_class "
        "WHERE relnamespace = 'pulse_durable'::regnamespace ORDER BY relname"
    ).fetchall()


# covers: B-PG-1, B-PG-3
def test_the_schema_is_created_with_the_documented_tables(make_store, admin):
    make_store()
    assert objects(admin) == [
        ("deltas", "r"),
        ("deltas_pkey", "i"),
        ("history", "r"),
        ("history_pkey", "i"),
        ("inbox", "r"),
        ("inbox_idempotency", "i"),
        ("inbox_last", "r"),
        ("inbox_last_pkey", "i"),
        ("inbox_pkey", "i"),
        ("runs", "r"),
        ("runs_pkey", "i"),
        ("schema_version", "r"),
        ("schema_version_pkey", "i"),
        ("waiting", "r"),
        ("waiting_pkey", "i"),
    ]
    columns = admin.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'pulse_durable.runs'::regclass AND attnum > 0 ORDER BY attnum"
    ).fetchall()
    assert columns == [
        ("run_id", "bytea"),
        ("revision", "numeric(20,0)"),
        ("format", "integer"),
        ("record", "bytea"),
        ("run_key", "bytea"),
        ("created_at", "timestamp with time zone"),
        ("saved_at", "timestamp with time zone"),
    ]
    deltas = admin.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'pulse_durable.deltas'::regclass AND attnum > 0 ORDER BY attnum"
    ).fetchall()
    assert deltas == [("run_key", "bytea"), ("base", "numeric(20,0)"), ("delta", "bytea")]
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(6,)]
    # A second store (another process, or a restart) accepts what the first made.
    make_store()


# covers: B-PG-1
def test_an_empty_schema_prepared_by_an_administrator_is_filled(make_store, admin):
    admin.execute("CREATE SCHEMA pulse_durable")
    make_store()
    assert [name for name, _ in objects(admin)] == [
        "deltas",
        "deltas_pkey",
        "history",
        "history_pkey",
        "inbox",
        "inbox_idempotency",
        "inbox_last",
        "inbox_last_pkey",
        "inbox_pkey",
        "runs",
        "runs_pkey",
        "schema_version",
        "schema_version_pkey",
        "waiting",
        "waiting_pkey",
    ]


DRIFT = [
    pytest.param(
        "ALTER TABLE pulse_durable.runs ADD COLUMN note text",
        "unexpected column pulse_durable.runs.note",
        id="extra-column",
    ),
    pytest.param(
        "CREATE TABLE pulse_durable.extra (x int)",
        "unexpected table pulse_durable.extra",
        id="extra-table",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN revision TYPE numeric",
        "column pulse_durable.runs.revision has type numeric, expected numeric(20,0)",
        id="altered-type",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN record TYPE text USING encode(record, 'hex')",
        "column pulse_durable.runs.record has type text, expected bytea",
        id="altered-record-type",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs DROP COLUMN format",
        "missing column pulse_durable.runs.format",
        id="missing-column",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN record DROP NOT NULL",
        "pulse_durable.runs.record allows NULL",
        id="nullable",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN format SET DEFAULT 2",
        "has a default",
        id="default",
    ),
    pytest.param(
        "CREATE INDEX runs_revision ON pulse_durable.runs (revision)",
        "unexpected index pulse_durable.runs_revision",
        id="extra-index",
    ),
    pytest.param(
        "CREATE VIEW pulse_durable.recent AS SELECT run_id FROM pulse_durable.runs",
        "unexpected view pulse_durable.recent",
        id="view-in-schema",
    ),
    pytest.param(
        "CREATE VIEW public.durable_runs AS SELECT run_id FROM pulse_durable.runs",
        "unexpected rule _RETURN on view durable_runs",
        id="view-elsewhere-on-the-table",
    ),
    pytest.param(
        "CREATE FUNCTION pulse_durable.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "unexpected function pulse_durable.f()",
        id="function",
    ),
    pytest.param(
        "CREATE TRIGGER t BEFORE UPDATE ON pulse_durable.runs FOR EACH ROW "
        "EXECUTE FUNCTION suppress_redundant_updates_trigger()",
        "unexpected trigger t on table pulse_durable.runs",
        id="trigger",
    ),
    pytest.param(
        "CREATE SEQUENCE pulse_durable.s",
        "unexpected sequence pulse_durable.s",
        id="sequence",
    ),
    pytest.param(
        "CREATE TYPE pulse_durable.mood AS ENUM ('ok')",
        "unexpected type pulse_durable.mood",
        id="type",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs DROP CONSTRAINT runs_revision_check",
        "missing constraint runs_revision_check",
        id="missing-check",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ADD CONSTRAINT small CHECK (format < 10)",
        "unexpected constraint small on pulse_durable.runs",
        id="extra-check",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs SET UNLOGGED",
        "table pulse_durable.runs is unlogged",
        id="unlogged",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ENABLE ROW LEVEL SECURITY",
        "row-level security",
        id="row-level-security",
    ),
    pytest.param(
        "UPDATE pulse_durable.schema_version SET version = 7",
        "holds [7], expected [6] (made by a newer Durable",
        id="newer-version",
    ),
    pytest.param(
        "CREATE INDEX deltas_base ON pulse_durable.deltas (base)",
        "unexpected index pulse_durable.deltas_base",
        id="extra-delta-index",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.deltas ALTER COLUMN delta TYPE text USING encode(delta, 'hex')",
        "column pulse_durable.deltas.delta has type text, expected bytea",
        id="altered-delta-type",
    ),
    pytest.param(
        "DROP TABLE pulse_durable.deltas",
        "missing table pulse_durable.deltas",
        id="missing-deltas",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN saved_at SET NOT NULL",
        "pulse_durable.runs.saved_at is NOT NULL, expected to allow NULL",
        id="time-not-null",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN created_at TYPE timestamp",
        "pulse_durable.runs.created_at has type timestamp without time zone",
        id="time-without-zone",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs ALTER COLUMN saved_at SET DEFAULT now()",
        "has a default",
        id="time-default",
    ),
    pytest.param(
        "ALTER TABLE pulse_durable.runs DROP COLUMN saved_at",
        "missing column pulse_durable.runs.saved_at",
        id="missing-time",
    ),
    pytest.param(
        "DROP TABLE pulse_durable.schema_version",
        "missing table pulse_durable.schema_version",
        id="missing-table",
    ),
]


# covers: B-PG-1
@pytest.mark.parametrize(("ddl", "named"), DRIFT)
def test_schema_drift_is_refused_naming_the_object(make_store, admin, ddl, named):
    with make_store().acquire("kept") as session:
        session.save(RunRecord(run_id="kept", revision=1), 0)
    admin.execute(ddl)
    with pytest.raises(SchemaError) as caught:
        make_store()
    assert named in str(caught.value)
    # Nothing was altered or removed: the record is still there.
    assert admin.execute("SELECT count(*) FROM pulse_durable.runs").fetchone() == (1,)


# covers: B-PG-1
def test_several_processes_creating_the_schema_at_once_all_succeed(postgres_dsn, admin):
    script = textwrap.dedent(
        """
        import sys
        from durable_postgresstore import PostgresStore
        print("ready", flush=True)
        sys.stdin.readline()  # the go, once every process is ready
        with PostgresStore(sys.argv[1]) as store:
            with store.acquire(f"proc-{sys.argv[2]}"):
                pass
        print("ok")
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, postgres_dsn, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    # all processes construct at the same moment, however long each took to start
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.communicate()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    assert all(out.strip() == "ok" for out, _ in outputs)
    assert len(objects(admin)) == 15


# covers: B-PG-1
def test_without_create_privilege_the_error_says_so(postgres_dsn, admin):
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    admin.execute("DROP ROLE IF EXISTS durable_reader")
    admin.execute("CREATE ROLE durable_reader LOGIN PASSWORD 'reader-pass-123'")
    try:
        params = conninfo_to_dict(postgres_dsn)
        params.update(user="durable_reader", password="reader-pass-123")
        with pytest.raises(PostgresStoreError) as caught:
            PostgresStore(make_conninfo(**params))
        assert caught.value.sqlstate == "42501"  # insufficient_privilege
        assert "permission denied" in str(caught.value)
        assert "reader-pass-123" not in str(caught.value)
    finally:
        admin.execute("DROP ROLE durable_reader")


V1_DDL = (
    "CREATE SCHEMA pulse_durable",
    """
    CREATE TABLE pulse_durable.runs (
        run_id BYTEA NOT NULL,
        revision NUMERIC(20, 0) NOT NULL,
        format INTEGER NOT NULL,
        record BYTEA NOT NULL,
        CONSTRAINT runs_pkey PRIMARY KEY (run_id),
        CONSTRAINT runs_run_id_check CHECK (octet_length(run_id) > 0),
        CONSTRAINT runs_revision_check
            CHECK (revision >= 1 AND revision <= 18446744073709551615)
    )
    """,
    """
    CREATE TABLE pulse_durable.schema_version (
        version INTEGER NOT NULL,
        CONSTRAINT schema_version_pkey PRIMARY KEY (version)
    )
    """,
    "INSERT INTO pulse_durable.schema_version (version) VALUES (1)",
)


def make_v1(admin) -> None:
    """The schema exactly as the previous Durable (version 1) created it, with one run."""
    for statement in V1_DDL:
        admin.execute(statement)
    admin.execute(
        "INSERT INTO pulse_durable.runs VALUES (%s, 1, 2, %s)",
        [b"old-run", record_to_json(RunRecord(run_id="old-run", revision=1))],
    )


# covers: B-PG-1
def test_a_version_1_schema_is_upgraded_in_place_keeping_its_runs(make_store, admin):
    make_v1(admin)
    store = make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(6,)]
    with store.acquire("old-run") as session:
        assert session.load() == RunRecord(run_id="old-run", revision=1)
        session.save(RunRecord(run_id="old-run", revision=2), 1)
    long_id = "x" * 10_000  # version 1 could not hold this id
    with store.acquire(long_id) as session:
        session.save(RunRecord(run_id=long_id, revision=1), 0)
    make_store()  # the upgraded schema is accepted as it is


# covers: B-PG-1
def test_an_altered_version_1_schema_is_refused_unchanged(make_store, admin):
    make_v1(admin)
    admin.execute("ALTER TABLE pulse_durable.runs ADD COLUMN note text")
    with pytest.raises(SchemaError, match=r"unexpected column pulse_durable\.runs\.note"):
        make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(1,)]
    columns = admin.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'pulse_durable.runs'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    ).fetchall()
    assert [c[0] for c in columns] == ["run_id", "revision", "format", "record", "note"]


# covers: B-PG-1
def test_a_version_2_schema_gets_the_deltas_table(make_store, admin):
    make_v1(admin)
    admin.execute(
        "ALTER TABLE pulse_durable.runs ADD COLUMN run_key BYTEA; "
        "UPDATE pulse_durable.runs SET run_key = sha256(run_id); "
        "ALTER TABLE pulse_durable.runs ALTER COLUMN run_key SET NOT NULL; "
        "ALTER TABLE pulse_durable.runs DROP CONSTRAINT runs_pkey; "
        "ALTER TABLE pulse_durable.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (run_key); "
        "ALTER TABLE pulse_durable.runs ADD CONSTRAINT runs_run_key_check "
        "CHECK (run_key = sha256(run_id)); "
        "UPDATE pulse_durable.schema_version SET version = 2"
    )
    store = make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(6,)]
    with store.acquire("old-run") as session:
        assert session.load() == RunRecord(run_id="old-run", revision=1)


# covers: B-PG-1, X-HIST
def test_a_version_4_schema_gets_the_history_table(make_store, admin):
    store = make_store()
    with store.acquire("old-run") as session:
        session.save(RunRecord(run_id="old-run", revision=1), 0)
    store.close()
    # exactly what the previous Durable (version 4) left
    admin.execute("DROP TABLE pulse_durable.history")
    for table in ("inbox", "inbox_last", "waiting"):
        admin.execute(f"DROP TABLE pulse_durable.{table}")
    admin.execute("UPDATE pulse_durable.schema_version SET version = 4")
    upgraded = make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(6,)]
    assert upgraded.peek("old-run") == RunRecord(run_id="old-run", revision=1)
    upgraded.append_history("old-run", "scope", ['{"event": "run_resumed"}'])
    assert upgraded.read_history("old-run", "scope") == ['{"event": "run_resumed"}']
    make_store()  # the upgraded schema is accepted as it is


def test_a_version_5_schema_gets_the_inbox_tables(make_store, admin):
    # covers: X-INBOX-1
    store = make_store()
    with store.acquire("old-run") as session:
        session.save(RunRecord(run_id="old-run", revision=1), 0)
    store.close()
    # exactly what the previous Durable (version 5) left
    for table in ("inbox", "inbox_last", "waiting"):
        admin.execute(f"DROP TABLE pulse_durable.{table}")
    admin.execute("UPDATE pulse_durable.schema_version SET version = 5")
    upgraded = make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(6,)]
    assert upgraded.post_message("old-run", "box", b"{}") == 1
    assert [m.sequence for m in upgraded.read_messages("old-run", "box")] == [1]
    make_store()  # the upgraded schema is accepted as it is
