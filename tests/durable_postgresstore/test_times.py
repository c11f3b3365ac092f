"""When each run was created and last saved, as columns of pulse_durable.runs set by the saving
statements (server clock), and the in-place upgrade of a version 3 schema."""

from __future__ import annotations

import time

import pytest

from durable_core import EncodedRecord, NotFoundError, RunRecord, record_to_json
from durable_core.maintenance import CreateTimes, SaveTimes, TimesRestorer
from durable_core.testing import record_delta, sample_record
from durable_postgresstore.schema import SCHEMA_VERSION

pytestmark = pytest.mark.postgres


def columns(admin, run_id: str):
    return admin.execute(
        "SELECT extract(epoch FROM created_at)::float8, extract(epoch FROM saved_at)::float8 "
        "FROM pulse_durable.runs WHERE run_key = sha256(%s)",
        [run_id.encode()],
    ).fetchone()


def test_the_first_save_sets_created_and_every_save_moves_saved(make_store, admin):
    store = make_store()
    assert isinstance(store, SaveTimes) and isinstance(store, CreateTimes)
    assert store.saved_at("r") is None and store.created_at("r") is None
    server_now = admin.execute("SELECT extract(epoch FROM now())::float8").fetchone()[0]
    first, second, third = (sample_record("r", n) for n in (1, 2, 3))
    with store.acquire("r") as session:
        session.save(first, 0)
        created, saved = columns(admin, "r")
        assert created == saved and abs(created - server_now) < 60  # the server's clock
        assert (store.created_at("r"), store.saved_at("r")) == pytest.approx(
            (created, saved), abs=1e-3
        )
        time.sleep(0.05)
        session.save(second, 1)  # a whole-record save
        after_update = columns(admin, "r")[1]
        assert after_update > saved
        time.sleep(0.05)
        session.load()  # known: the next save may be a delta
        session.save(third, 2, EncodedRecord(record_to_json(third), record_delta(second, third)))
        assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (1,)
        after_delta = columns(admin, "r")[1]
        assert after_delta > after_update  # the delta save's UPDATE of the revision sets it
    assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (0,)
    assert columns(admin, "r") == pytest.approx(
        (created, after_delta), abs=1e-3
    )  # a fold is no save
    assert store.created_at("r") == pytest.approx(created, abs=1e-3)


def test_restore_times_sets_both_and_keeps_saved_when_unknown(make_store):
    store = make_store()
    with store.acquire("r") as session:
        assert isinstance(session, TimesRestorer)
        session.restore(sample_record("r", 4))
        session.restore_times(1000.5, 2000.25)
        assert (store.created_at("r"), store.saved_at("r")) == (1000.5, 2000.25)
        session.restore_times(None, None)
        assert (store.created_at("r"), store.saved_at("r")) == (None, 2000.25)
    with store.acquire("missing") as session, pytest.raises(NotFoundError):
        session.restore_times(1.0, 2.0)


V3_DDL = (
    "CREATE SCHEMA pulse_durable",
    """
    CREATE TABLE pulse_durable.runs (
        run_id BYTEA NOT NULL,
        revision NUMERIC(20, 0) NOT NULL,
        format INTEGER NOT NULL,
        record BYTEA NOT NULL,
        run_key BYTEA NOT NULL,
        CONSTRAINT runs_pkey PRIMARY KEY (run_key),
        CONSTRAINT runs_run_id_check CHECK (octet_length(run_id) > 0),
        CONSTRAINT runs_revision_check
            CHECK (revision >= 1 AND revision <= 18446744073709551615),
        CONSTRAINT runs_run_key_check CHECK (run_key = sha256(run_id))
    )
    """,
    """
    CREATE TABLE pulse_durable.deltas (
        run_key BYTEA NOT NULL,
        base NUMERIC(20, 0) NOT NULL,
        delta BYTEA NOT NULL,
        CONSTRAINT deltas_pkey PRIMARY KEY (run_key, base),
        CONSTRAINT deltas_base_check CHECK (base >= 1 AND base <= 18446744073709551615)
    )
    """,
    """
    CREATE TABLE pulse_durable.schema_version (
        version INTEGER NOT NULL,
        CONSTRAINT schema_version_pkey PRIMARY KEY (version)
    )
    """,
    "INSERT INTO pulse_durable.schema_version (version) VALUES (3)",
)


def make_v3(admin) -> None:
    """The schema exactly as the previous Durable (version 3) created it, with a run at rest
    and a run whose delta a crash left behind."""
    for statement in V3_DDL:
        admin.execute(statement)
    first, second = sample_record("crashed", 1), sample_record("crashed", 2)
    for run_id, revision, record in (
        ("at-rest", 1, sample_record("at-rest", 1)),
        ("crashed", 2, first),
    ):
        admin.execute(
            "INSERT INTO pulse_durable.runs VALUES (%s, %s, 2, %s, sha256(%s))",
            [run_id.encode(), revision, record_to_json(record), run_id.encode()],
        )
    admin.execute(
        "INSERT INTO pulse_durable.deltas VALUES (sha256(%s), 1, %s)",
        [b"crashed", record_delta(first, second)],
    )


# covers: B-PG-1
def test_a_version_3_schema_gets_the_time_columns(make_store, admin):
    make_v3(admin)
    before = time.time()
    store = make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [
        (SCHEMA_VERSION,)
    ]  # upgraded all the way
    assert store.created_at("at-rest") is None  # not known: never invented
    # saved no later than the upgrade: an upper bound, so that an age is never overstated
    assert store.saved_at("at-rest") == pytest.approx(time.time(), abs=60)
    assert store.saved_at("at-rest") >= before - 60
    with store.acquire("crashed") as session:
        assert session.load() == sample_record("crashed", 2)  # the delta still applies
        session.save(sample_record("crashed", 3), 2)
    assert store.created_at("crashed") is None
    with store.acquire("new") as session:
        session.save(RunRecord(run_id="new", revision=1), 0)
    assert store.created_at("new") is not None
    make_store()  # the upgraded schema is accepted as it is
    fresh = admin.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute "
        "WHERE attrelid = 'pulse_durable.runs'::regclass AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum"
    ).fetchall()
    assert fresh[-2:] == [
        ("created_at", "timestamp with time zone", False),
        ("saved_at", "timestamp with time zone", False),
    ]


# covers: B-PG-1
def test_an_altered_version_3_schema_is_refused_unchanged(make_store, admin):
    from durable_core import SchemaError

    make_v3(admin)
    admin.execute("ALTER TABLE pulse_durable.runs ADD COLUMN saved_at timestamp")  # not ours
    with pytest.raises(
        SchemaError, match=r"pulse_durable\.runs\.saved_at has type timestamp without"
    ):
        make_store()
    assert admin.execute("SELECT version FROM pulse_durable.schema_version").fetchall() == [(3,)]
    names = admin.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'pulse_durable.runs'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    ).fetchall()
    assert [n for (n,) in names] == [
        "run_id",
        "revision",
        "format",
        "record",
        "run_key",
        "saved_at",
    ]
