"""When each run was created and last saved, as SQLite columns set by the saves themselves, and
the in-place upgrade of databases made before the columns existed."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from durable_core import EncodedRecord, NotFoundError, record_to_json
from durable_core.maintenance import CreateTimes, SaveTimes, TimesRestorer
from durable_core.testing import record_delta, sample_record
from durable_sqlitestore import (
    DELTAS_V2,
    DELTAS_V3,
    HISTORY_INDEX_V4,
    HISTORY_V4,
    RUNS_V3,
    SCHEMA_V1,
    SCHEMA_VERSION,
    SQLiteStore,
    schema,
)


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, timeout=5)


def columns(path: Path, run_id: str) -> tuple[object, object]:
    connection = raw(path)
    try:
        return connection.execute(
            "SELECT created_at, saved_at FROM durable_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    finally:
        connection.close()


def test_the_first_save_sets_created_and_every_save_moves_saved(tmp_path: Path) -> None:
    path = tmp_path / "durable.sqlite"
    with SQLiteStore(path) as store:
        assert isinstance(store, SaveTimes) and isinstance(store, CreateTimes)
        assert store.saved_at("r") is None and store.created_at("r") is None
        before = time.time()
        with store.acquire("r") as session:
            session.save(sample_record("r", 1), 0)
            created, saved = columns(path, "r")
            assert isinstance(created, float) and created == saved
            assert before - 1 <= created <= time.time() + 1  # UTC seconds since the epoch
            time.sleep(0.05)
            session.save(sample_record("r", 2), 1)  # a whole-record save (no delta)
            assert columns(path, "r")[0] == created
            assert columns(path, "r")[1] > saved
            assert store.created_at("r") == created
            assert store.saved_at("r") == columns(path, "r")[1]


def test_a_delta_save_is_timed_in_its_delta_row_and_the_fold_keeps_that_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "durable.sqlite"
    first = sample_record("r", 1)
    second = sample_record("r", 2)
    with SQLiteStore(path) as store:
        session = store.acquire("r")
        session.save(first, 0)
        session.load()  # the session knows what is stored: the next save may be a delta
        row_saved = columns(path, "r")[1]
        time.sleep(0.05)
        session.save(second, 1, EncodedRecord(record_to_json(second), record_delta(first, second)))
        connection = raw(path)
        ((delta_saved,),) = connection.execute("SELECT saved_at FROM durable_deltas").fetchall()
        assert columns(path, "r")[1] == row_saved  # the row (and its record) was not rewritten
        assert delta_saved > row_saved
        assert store.saved_at("r") == delta_saved
        session.close()  # folds the delta into the record
        assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
        assert columns(path, "r")[1] == delta_saved  # the fold is not a save
        assert store.saved_at("r") == delta_saved
        connection.close()


def test_times_are_plain_numbers_in_the_sqlite3_shell_view(tmp_path: Path) -> None:
    path = tmp_path / "durable.sqlite"
    with SQLiteStore(path) as store, store.acquire("r") as session:
        session.save(sample_record("r", 1), 0)
    connection = raw(path)
    (day,) = connection.execute(
        "SELECT datetime(saved_at, 'unixepoch') FROM durable_runs"
    ).fetchone()
    connection.close()
    assert day == time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(columns(path, "r")[1]))


def test_restore_times_sets_both_and_keeps_saved_when_unknown(tmp_path: Path) -> None:
    path = tmp_path / "durable.sqlite"
    with SQLiteStore(path) as store:
        with store.acquire("r") as session:
            assert isinstance(session, TimesRestorer)
            session.restore(sample_record("r", 4))
            session.restore_times(1000.5, 2000.25)
            assert (store.created_at("r"), store.saved_at("r")) == (1000.5, 2000.25)
            session.restore_times(None, None)
            assert (store.created_at("r"), store.saved_at("r")) == (None, 2000.25)
        with store.acquire("missing") as session, pytest.raises(NotFoundError):
            session.restore_times(1.0, 2.0)


def _old_database(path: Path, version: int) -> None:
    """A database exactly as the previous release left it, with a run at rest and a run whose
    deltas a crash left behind."""
    connection = raw(path)
    connection.execute(SCHEMA_V1)
    if version == 2:
        connection.execute(DELTAS_V2)
    connection.execute(f"PRAGMA user_version = {version}")
    first, second = sample_record("crashed", 1), sample_record("crashed", 2)
    connection.execute(
        "INSERT INTO durable_runs VALUES (?, ?, ?)",
        ("at-rest", "1", record_to_json(sample_record("at-rest", 1))),
    )
    connection.execute(
        "INSERT INTO durable_runs VALUES (?, ?, ?)", ("crashed", "1", record_to_json(first))
    )
    if version == 2:
        delta = record_delta(first, second)
        connection.execute("INSERT INTO durable_deltas VALUES (?, ?, ?)", ("crashed", "1", delta))
    connection.close()


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_database_is_upgraded_in_place_with_a_safe_saved_time(
    tmp_path: Path, version: int
) -> None:
    # covers: B-SQL-1
    path = tmp_path / "durable.sqlite"
    _old_database(path, version)
    last_write = time.time() - 30 * 86400  # the database was last written a month ago
    os.utime(path, (last_write, last_write))
    with SQLiteStore(path) as store:
        assert store.created_at("at-rest") is None  # not known
        assert store.saved_at("at-rest") == pytest.approx(last_write, abs=1e-3)
        assert store.saved_at("crashed") == pytest.approx(last_write, abs=1e-3)
        with store.acquire("crashed") as session:
            record = session.load()
            assert record.revision == version  # the delta left by the crash still applies
            session.save(sample_record("crashed", version + 1), version)
        assert store.saved_at("crashed") > time.time() - 60
        assert store.created_at("crashed") is None  # still unknown: never invented
        with store.acquire("new") as session:
            session.save(sample_record("new", 1), 0)
        assert store.created_at("new") is not None
    connection = raw(path)
    # exactly what a new database gets: the upgraded tables are accepted as they are
    assert connection.execute(
        "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    ).fetchall() == [
        ("table", "durable_deltas", DELTAS_V3),
        ("table", "durable_history", HISTORY_V4),
        ("index", "durable_history_run", HISTORY_INDEX_V4),
        ("table", "durable_inbox", schema.INBOX_V5),
        ("index", "durable_inbox_idempotency", schema.INBOX_INDEX_V5),
        ("table", "durable_inbox_last", schema.INBOX_LAST_V5),
        ("table", "durable_runs", RUNS_V3),
        ("table", "durable_waiting", schema.WAITING_V5),
    ]
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    connection.close()
    SQLiteStore(path).close()


def test_an_altered_v2_database_is_refused_unchanged(tmp_path: Path) -> None:
    # covers: B-SQL-1
    from durable_core import SchemaError

    path = tmp_path / "durable.sqlite"
    _old_database(path, 2)
    connection = raw(path)
    connection.execute("ALTER TABLE durable_runs ADD COLUMN saved_at REAL")  # not Durable's
    connection.close()
    with pytest.raises(SchemaError, match="durable_runs"):
        SQLiteStore(path)
    connection = raw(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 2
    names = [r[1] for r in connection.execute("PRAGMA table_info(durable_deltas)")]
    assert names == ["run_id", "base", "delta"]
    connection.close()
