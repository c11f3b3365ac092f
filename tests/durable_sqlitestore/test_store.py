"""SQLiteStore's own rules (B-SQL-1, B-SQL-2): paths, pragmas, schema, locks, concurrency."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durable_core import (
    MAX_REVISION,
    AcquireTimeoutError,
    BusyError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DurableError,
    EncodedRecord,
    NotFoundError,
    RunRecord,
    SchemaError,
    make_plugin_manager,
    record_to_json,
)
from durable_core.store.locks import RunLock
from durable_core.testing import record_delta, sample_record
from durable_sqlitestore import (
    DELTAS_V3,
    FOLD_RATIO,
    HISTORY_INDEX_V4,
    HISTORY_V4,
    RUNS_V3,
    SCHEMA_V1,
    SCHEMA_VERSION,
    SQLiteStore,
    schema,
)
from durable_sqlitestore.store import BUSY_TIMEOUT_MS, SQLiteSession, _configure
from tests.bounded import returns_within

POSIX = os.name == "posix"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "durable.sqlite"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(db_path) as opened:
        yield opened


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection, as an operator's tool would open it."""
    return sqlite3.connect(path, isolation_level=None, timeout=5)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- path and files (B-SQL-1) ----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", ":memory:", "file:x.db?mode=memory", None, b"x.db"])
def test_non_file_paths_are_refused(bad: object) -> None:
    # covers: B-SQL-1
    with pytest.raises(ConfigError):
        SQLiteStore(bad)  # type: ignore[arg-type]


def test_a_directory_path_is_refused(tmp_path: Path) -> None:
    # covers: B-SQL-1
    with pytest.raises(ConfigError, match="is a directory"):
        SQLiteStore(tmp_path)
    with pytest.raises(ConfigError, match="is a directory"):
        SQLiteStore(str(tmp_path / "new") + os.sep)
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
def test_directories_files_and_locks_are_created_private(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-1, B-SQL-2
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        key = hashlib.sha256(b"run").hexdigest()
        lock = db_path.parent / ".runlocks" / f"{key}.lock"
        assert lock.is_file() and mode(lock) == 0o600
        with pytest.raises(BusyError):
            RunLock.acquire(lock)  # the run's ownership is exactly this OS lock
    assert mode(db_path.parent) == 0o700
    assert mode(db_path.parent / ".runlocks") == 0o700
    assert mode(db_path) == 0o600
    assert mode(db_path.parent / ".init.lock") == 0o600
    assert lock.is_file()  # lock files stay


def test_init_lock_guards_construction_with_a_timeout(db_path: Path) -> None:
    # covers: B-SQL-1
    SQLiteStore(db_path).close()
    with RunLock.acquire(db_path.parent / ".init.lock"):
        started = time.monotonic()
        # the lock is held for the whole call: without its timeout it would never return
        with pytest.raises(AcquireTimeoutError):
            returns_within(lambda: SQLiteStore(db_path, timeout=0.3))
        assert time.monotonic() - started >= 0.3  # it waited its timeout


def test_construction_waits_for_the_init_lock(db_path: Path) -> None:
    # covers: B-SQL-1
    SQLiteStore(db_path).close()
    init_lock = RunLock.acquire(db_path.parent / ".init.lock")
    released = threading.Event()

    def release() -> None:
        released.set()
        init_lock.release()

    threading.Timer(0.3, release).start()
    with SQLiteStore(db_path, timeout=60) as store:
        assert released.is_set()  # it waited for the lock instead of going ahead
        assert store.settings()["journal_mode"] == "wal"
    assert (db_path.parent / ".init.lock").is_file()


# -- pragmas (B-SQL-1) -----------------------------------------------------------------------


def test_pragmas_are_set_and_read_back(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-1
    assert store.settings() == {"journal_mode": "wal", "synchronous": 2, "busy_timeout": 5000}
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        assert Path(str(db_path) + "-wal").exists()
    connection = raw(db_path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent
    connection.close()


def test_a_pragma_that_does_not_take_refuses_to_start() -> None:
    # covers: B-SQL-1
    connection = sqlite3.connect(":memory:", isolation_level=None)  # cannot use WAL
    with pytest.raises(DurableError, match="journal_mode='memory'"):
        _configure(connection, ":memory:")


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
def test_a_database_that_cannot_use_wal_refuses_to_start(tmp_path: Path) -> None:
    # covers: B-SQL-1
    directory = tmp_path / "readonly"
    directory.mkdir()
    connection = raw(directory / "durable.sqlite")
    connection.execute(RUNS_V3)
    connection.execute(DELTAS_V3)
    connection.execute(HISTORY_V4)
    connection.execute(HISTORY_INDEX_V4)
    for statement in schema.CREATE[4:]:  # the inbox tables
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.close()
    (directory / ".init.lock").touch()
    (directory / ".init.lock").chmod(0o666)
    (directory / "durable.sqlite").chmod(0o666)
    directory.chmod(0o555)  # no -wal/-shm files can be created
    code = textwrap.dedent(
        """
        import sys
        from durable_sqlitestore import SQLiteStore
        try:
            SQLiteStore(sys.argv[1])
        except BaseException as exc:
            print(type(exc).__name__, exc)
        """
    )
    command = [sys.executable, "-c", code, str(directory / "durable.sqlite")]
    if os.geteuid() == 0:  # root writes anywhere: drop that capability in the child
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv(1) is missing")
        command = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    directory.chmod(0o755)
    assert done.stdout.startswith("DurableError"), done.stdout + done.stderr
    assert "WAL" in done.stdout


_OPEN_STORE = textwrap.dedent(
    """
    import sys
    from durable_sqlitestore import SQLiteStore
    try:
        SQLiteStore(sys.argv[1]).close()
    except BaseException as exc:
        print(type(exc).__module__, type(exc).__name__, exc)
    else:
        print("opened")
    """
)


def _as_unprivileged(command: list[str]) -> list[str]:
    if os.geteuid() == 0:  # root writes anywhere: drop that capability in the child
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv(1) is missing")
        return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", *command]
    return command


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
@pytest.mark.parametrize("existing", ["no database yet", "a database made before"])
def test_an_unwritable_directory_is_a_durable_error_about_wal(
    tmp_path: Path, existing: str
) -> None:
    # covers: B-SQL-1
    directory = tmp_path / "readonly"
    directory.mkdir()
    if existing == "a database made before":
        SQLiteStore(directory / "durable.sqlite").close()
        for path in directory.iterdir():
            if path.is_file():
                path.chmod(0o666)
    directory.chmod(0o555)
    command = _as_unprivileged([sys.executable, "-c", _OPEN_STORE, str(directory / "db")])
    command[-1] = str(directory / "durable.sqlite")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        directory.chmod(0o755)
    assert done.stdout.startswith("durable_core.errors DurableError"), done.stdout + done.stderr
    assert "writable" in done.stdout and "WAL" in done.stdout


# -- schema (B-SQL-1, B-SQL-2) ---------------------------------------------------------------


def test_schema_v5_is_created_exactly(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-1, X-HIST
    connection = raw(db_path)
    objects = connection.execute(
        "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()
    assert objects == [
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
    SQLiteStore(db_path).close()  # and is accepted when reopened


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("CREATE INDEX extra_revision ON durable_runs (revision)", "extra_revision"),
        (
            "CREATE TRIGGER extra_trigger AFTER UPDATE ON durable_runs BEGIN SELECT 1; END",
            "extra_trigger",
        ),
        ("CREATE VIEW extra_view AS SELECT run_id FROM durable_runs", "extra_view"),
        ("CREATE TABLE extra_table (x)", "extra_table"),
        ("ALTER TABLE durable_runs ADD COLUMN note TEXT", "durable_runs"),
        (
            "DROP TABLE durable_runs; CREATE TABLE durable_runs (run_id TEXT PRIMARY KEY, "
            "revision INTEGER NOT NULL, record BLOB NOT NULL) WITHOUT ROWID",
            "durable_runs",
        ),
        ("DROP TABLE durable_runs", "durable_runs"),
        ("CREATE INDEX extra_base ON durable_deltas (base)", "extra_base"),
        ("ALTER TABLE durable_deltas ADD COLUMN note TEXT", "durable_deltas"),
        ("DROP TABLE durable_deltas", "durable_deltas"),
        ("ALTER TABLE durable_runs DROP COLUMN saved_at", "durable_runs"),
        ("ALTER TABLE durable_deltas DROP COLUMN saved_at", "durable_deltas"),
        ("PRAGMA user_version = 6", "user_version"),
        ("DROP TABLE durable_inbox", "durable_inbox"),
        ("DROP INDEX durable_inbox_idempotency", "durable_inbox_idempotency"),
        ("PRAGMA user_version = 4", "durable_inbox"),  # v4 has no inbox tables
        ("DROP TABLE durable_history", "durable_history"),
        ("DROP INDEX durable_history_run", "durable_history_run"),
        ("PRAGMA user_version = 3", "durable_history"),  # v3 has no history table
        ("PRAGMA user_version = 2", "durable_history"),  # v2 has no history table
        ("PRAGMA user_version = 1", "durable_history"),  # nor has v1
    ],
)
def test_schema_drift_is_refused(db_path: Path, change: str, named: str) -> None:
    # covers: B-SQL-1
    with SQLiteStore(db_path) as store, store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    connection = raw(db_path)
    connection.executescript(change)
    connection.close()
    with pytest.raises(SchemaError, match=named):
        SQLiteStore(db_path)


def test_a_v1_database_is_upgraded_in_place_keeping_its_runs(tmp_path: Path) -> None:
    # covers: B-SQL-1
    path = tmp_path / "durable.sqlite"
    connection = raw(path)
    connection.execute(SCHEMA_V1)  # exactly what the previous release created
    connection.execute("PRAGMA user_version = 1")
    connection.execute(
        "INSERT INTO durable_runs VALUES (?, ?, ?)",
        ("old", "1", record_to_json(sample_record("old", 1))),
    )
    connection.close()
    with SQLiteStore(path) as store, store.acquire("old") as session:
        assert session.load() == sample_record("old", 1)
        session.save(sample_record("old", 2), 1)
    connection = raw(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    names = [r[0] for r in connection.execute("SELECT name FROM sqlite_master ORDER BY name")]
    assert names == [
        "durable_deltas",
        "durable_history",
        "durable_history_run",
        "durable_inbox",
        "durable_inbox_idempotency",
        "durable_inbox_last",
        "durable_runs",
        "durable_waiting",
    ]
    connection.close()


def test_an_altered_v1_database_is_refused_unchanged(tmp_path: Path) -> None:
    # covers: B-SQL-1
    path = tmp_path / "durable.sqlite"
    connection = raw(path)
    connection.execute(SCHEMA_V1)
    connection.execute("CREATE INDEX mine ON durable_runs (revision)")
    connection.execute("PRAGMA user_version = 1")
    connection.close()
    with pytest.raises(SchemaError, match="mine"):
        SQLiteStore(path)
    connection = raw(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "durable_deltas" not in {
        r[0] for r in connection.execute("SELECT name FROM sqlite_master")
    }
    connection.close()


def test_a_foreign_database_is_refused_unchanged(tmp_path: Path) -> None:
    # covers: B-SQL-1
    path = tmp_path / "app.sqlite"
    connection = raw(path)
    connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO customers (name) VALUES ('Ada')")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(SchemaError, match="customers"):
        SQLiteStore(path)
    assert path.read_bytes() == before  # not even switched to WAL
    assert not Path(str(path) + "-wal").exists()


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    # covers: B-SQL-1
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"these are my notes, not a database" * 100)
    with pytest.raises(SchemaError, match="not an SQLite database"):
        SQLiteStore(path)
    assert path.read_bytes() == b"these are my notes, not a database" * 100


# -- rows and transactions (B-SQL-2) ---------------------------------------------------------


def test_row_holds_json_blob_and_decimal_text_revision(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-2
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        session.save(sample_record("run", 2), 1)
    connection = raw(db_path)
    row = connection.execute(
        "SELECT typeof(revision), revision, typeof(record), record FROM durable_runs"
    ).fetchone()
    connection.close()
    assert row == ("text", "2", "blob", record_to_json(sample_record("run", 2)))


def test_revisions_up_to_uint64_max_are_kept_exactly(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-2, R-STORE-3
    near_max = sample_record("run", MAX_REVISION - 1)
    connection = raw(db_path)
    connection.execute(
        "INSERT INTO durable_runs (run_id, revision, record) VALUES (?, ?, ?)",
        ("run", str(MAX_REVISION - 1), record_to_json(near_max)),
    )
    connection.close()
    with store.acquire("run") as session:
        assert session.load().revision == MAX_REVISION - 1
        session.save(sample_record("run", MAX_REVISION), MAX_REVISION - 1)
        assert session.load().revision == MAX_REVISION
        with pytest.raises(ConflictError, match="overflow"):
            session.save(sample_record("run", MAX_REVISION + 1), MAX_REVISION)
        assert session.load().revision == MAX_REVISION


def test_no_transaction_is_held_between_calls(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-2
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        session.load()
        with pytest.raises(ConflictError):
            session.save(sample_record("run", 3), 2)
        # a writer elsewhere gets the write lock at once: the session holds no transaction
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        session.save(sample_record("run", 2), 1)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    other.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("record", b"{not json"),
        ("record", record_to_json(sample_record("other", 1))),
        ("record", record_to_json(sample_record("run", 1)).replace(b"v1", b"v\xff")),
        ("revision", "7"),  # disagrees with the record's revision
    ],
)
def test_corrupt_row_is_a_typed_error_and_untouched(
    store: SQLiteStore, db_path: Path, column: str, value: object
) -> None:
    # covers: R-STORE-2, B-SQL-2, E-1
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    connection = raw(db_path)
    connection.execute(f"UPDATE durable_runs SET {column} = ?", (value,))
    before = connection.execute("SELECT revision, record FROM durable_runs").fetchone()
    with store.acquire("run") as session:
        with pytest.raises(CorruptRecordError):
            session.load()
        revision = int(before[0])
        with pytest.raises(CorruptRecordError):  # a corrupt record is never overwritten
            session.save(sample_record("run", revision + 1), revision)
    assert connection.execute("SELECT revision, record FROM durable_runs").fetchone() == before
    connection.close()
    (summary,) = store.list_runs()
    assert summary.run_id == "run" and not summary.ok
    assert "CorruptRecordError" in (summary.error or "")


def test_uncertain_commit_is_reported_as_such(store: SQLiteStore) -> None:
    # covers: R-RT-2, B-SQL-2
    class FailingCommit:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self._connection = connection

        def __getattr__(self, name: str) -> object:
            return getattr(self._connection, name)

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("disk I/O error")
            return self._connection.execute(sql, *args)

    with store.acquire("run") as session:
        real = session._connection
        session._connection = FailingCommit(real)  # type: ignore[assignment]
        with pytest.raises(DurableError, match="uncertain"):
            session.save(sample_record("run", 1), 0)
        session._connection = real
        with pytest.raises(NotFoundError):  # here the commit really did not happen
            session.load()


def test_list_runs_reads_rows(store: SQLiteStore) -> None:
    # covers: B-SQL-2
    for run_id in ("b", "a"):
        with store.acquire(run_id) as session:
            session.save(sample_record(run_id, 1), 0)
            session.save(sample_record(run_id, 2), 1)
    assert [(s.run_id, s.revision, s.ok) for s in store.list_runs()] == [
        ("a", 2, True),
        ("b", 2, True),
    ]


# -- the sqlite3 shell reads records (B-SQL-2) -----------------------------------------------


def test_record_is_readable_as_json_with_the_sqlite3_shell(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2
    shell = shutil.which("sqlite3")
    if shell is None:
        if os.environ.get("CI"):
            pytest.fail("the sqlite3 command-line shell is required under CI")
        pytest.skip("the sqlite3 command-line shell is not installed")
    record = sample_record("run-ü", 3)
    with store.acquire("run-ü") as session:
        session.save(sample_record("run-ü", 1), 0)
        session.save(sample_record("run-ü", 2), 1)
        session.save(record, 2)
    done = subprocess.run(
        [
            shell,
            "-readonly",
            str(db_path),
            "SELECT revision, CAST(record AS TEXT) FROM durable_runs WHERE run_id = 'run-ü';",
        ],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    revision, _, text = done.stdout.decode("utf-8").rstrip("\n").partition("|")
    assert revision == "3"
    assert json.loads(text) == json.loads(record_to_json(record))
    assert json.loads(text)["RunID"] == "run-ü"


# -- many processes on one database (B-SQL-1, B-SQL-2) ---------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from durable_core import ConflictError, record_to_json
    from durable_core.store import EncodedRecord
    from durable_core.testing import record_delta, sample_record
    from durable_sqlitestore import SQLiteStore

    path, run_id, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deltas = sys.argv[4] == "deltas"  # each save after the first keeps its delta


    def encoded(revision):
        record = sample_record(run_id, revision)
        if not deltas or revision == 1:
            return record, None
        before = sample_record(run_id, revision - 1)
        return record, EncodedRecord(record_to_json(record), record_delta(before, record))

    result = {"saves": 0, "conflicts": 0, "errors": []}
    try:
        store = SQLiteStore(path)  # every worker also initialises the same database at once
        session = store.acquire(run_id)
        print("ready", flush=True)
        sys.stdin.readline()  # all workers start saving together
        deadline = time.monotonic() + seconds
        revision = 0
        while time.monotonic() < deadline:
            try:
                record, data = encoded(revision + 1)
                session.save(record, revision, data)
                revision += 1
                result["saves"] += 1
            except BaseException as exc:
                result["errors"].append(f"{type(exc).__name__}: {exc}")
                break
            if revision % 7 == 0:  # a stale save must be a real CAS conflict
                try:
                    record, data = encoded(revision)
                    session.save(record, revision - 1, data)
                    result["errors"].append("a stale save succeeded")
                except ConflictError:
                    result["conflicts"] += 1
                except BaseException as exc:
                    result["errors"].append(f"{type(exc).__name__}: {exc}")
        session.close()
        store.close()
    except BaseException as exc:
        result["errors"].append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(result))
    """
)


@pytest.mark.parametrize("saves", ["whole", "deltas"])
def test_eight_processes_save_concurrently_without_lock_errors(db_path: Path, saves: str) -> None:
    # covers: B-SQL-1, B-SQL-2, R-STORE-1
    # "deltas": the saves that keep a delta are one statement each, their own transaction.
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(db_path), f"run-{i}", "2", saves],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "ready\n", line + (worker.stderr.read() if worker.stderr else "")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        results.append(json.loads(out))
    errors = [e for r in results for e in r["errors"]]
    assert errors == [], errors
    assert all(r["saves"] > 0 for r in results), results
    assert sum(r["conflicts"] for r in results) > 0
    with SQLiteStore(db_path) as store:
        for i, result in enumerate(results):
            with store.acquire(f"run-{i}") as session:
                assert session.load() == sample_record(f"run-{i}", result["saves"])


# -- ownership -------------------------------------------------------------------------------


def test_busy_is_immediate_between_stores_of_one_database(db_path: Path) -> None:
    # covers: B-SQL-2, R-STORE-1
    with SQLiteStore(db_path) as first, SQLiteStore(db_path) as second:
        # held for the whole call: an acquire that waited for the owner would never return
        with first.acquire("run"), pytest.raises(BusyError):
            returns_within(lambda: second.acquire("run"))
        second.acquire("run").close()


# -- registration ----------------------------------------------------------------------------


def test_registered_as_sqlite_backend(db_path: Path) -> None:
    # covers: B-SQL-1
    factory = make_plugin_manager().store_factory("sqlite")
    store = factory(path=str(db_path), timeout=5)
    assert isinstance(store, SQLiteStore)
    assert store.path == str(db_path)
    store.close()
    with pytest.raises(ConfigError, match="path"):
        factory()
    with pytest.raises(ConfigError, match="directory"):
        factory(path=str(db_path), directory="x")


# -- saves in proportion to the change (deltas) ----------------------------------------------


def _delta_chain(count: int) -> list[tuple[RunRecord, EncodedRecord]]:
    records = [sample_record("run", n, marker=f"-{n}-" + "d" * 120) for n in range(1, count + 1)]
    saves = [(records[0], EncodedRecord(record_to_json(records[0])))]
    for previous, record in itertools.pairwise(records):
        saves.append(
            (record, EncodedRecord(record_to_json(record), record_delta(previous, record)))
        )
    return saves


def _save_in_order(session: SQLiteSession, saves: list[tuple[RunRecord, EncodedRecord]]) -> None:
    """Save each of ``saves`` (from :func:`_delta_chain`) from the revision before it."""
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)


def test_a_save_with_a_delta_writes_only_the_delta_and_folds_when_they_outgrow_the_record(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2, R-STORE-3
    connection = raw(db_path)
    saves = _delta_chain(120)
    sizes = []
    with store.acquire("run") as session:
        for record, encoded in saves:
            session.save(record, record.revision - 1, encoded)
            stored_revision, size = connection.execute(
                "SELECT revision, length(record) FROM durable_runs"
            ).fetchone()
            deltas = connection.execute(
                "SELECT count(*), coalesce(sum(length(delta)), 0) FROM durable_deltas"
            ).fetchone()
            # the row's record plus its deltas are the whole story, and stay in proportion
            assert int(stored_revision) + deltas[0] == record.revision
            assert deltas[1] <= FOLD_RATIO * size
            sizes.append(deltas[0])
        assert session.load() == saves[-1][0]
    assert max(sizes) > 5  # deltas were kept …
    assert sizes.count(0) > 2  # … and folded from time to time
    # at rest: one complete record, readable as it is
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
    (blob,) = connection.execute("SELECT record FROM durable_runs").fetchone()
    assert blob == record_to_json(saves[-1][0])
    connection.close()


def test_a_delta_save_does_not_read_the_runs_row(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-2, R-STORE-3
    # Finding a row of the WITHOUT ROWID table reads its whole record: a delta save that
    # looked at it would cost as much as the run is large. Only the first delta after a
    # complete record, and the saves that fold, may touch durable_runs.
    saves = _delta_chain(40)
    statements: list[str] = []
    with store.acquire("run") as session:
        session._connection.set_trace_callback(statements.append)
        touched = []
        for record, encoded in saves:
            statements.clear()
            chain = session._chain
            session.save(record, record.revision - 1, encoded)
            after_whole = chain is None or chain[2] == 0
            folded = session._chain is not None and session._chain[2] == 0
            if not (after_whole or folded):
                touched.append(any("durable_runs" in sql for sql in statements))
        session._connection.set_trace_callback(None)
        assert session.load() == saves[-1][0]
        # CAS still holds: a second save from a revision that has one is refused
        with pytest.raises(ConflictError):
            session.save(saves[-1][0], saves[-1][0].revision - 1, saves[-1][1])
    assert len(touched) > 20
    assert not any(touched)


def test_a_delta_save_is_one_statement_and_its_own_transaction(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2, R-STORE-3
    # A save that keeps its delta is one INSERT (the compare-and-swap), which SQLite commits as
    # its own transaction: no BEGIN and COMMIT around it, each a wait for the GIL.
    saves = _delta_chain(12)
    with store.acquire("run") as session:
        session.save(saves[0][0], 0, saves[0][1])
        traced: list[list[str]] = []
        for record, encoded in saves[1:]:
            statements: list[str] = []
            session._connection.set_trace_callback(statements.append)
            session.save(record, record.revision - 1, encoded)
            session._connection.set_trace_callback(None)
            if session._chain is not None and session._chain[2] > 1:
                traced.append(statements)
        assert len(traced) > 5
        for statements in traced:
            assert len(statements) == 1 and statements[0].startswith("INSERT OR IGNORE")
        assert session.load() == saves[-1][0]
        with pytest.raises(ConflictError):  # the one statement is the compare-and-swap
            session.save(saves[-1][0], saves[-1][0].revision - 1, saves[-1][1])
        with pytest.raises(ConflictError):
            session.save(saves[5][0], saves[5][0].revision - 1, saves[5][1])
        assert session.load() == saves[-1][0]


def test_a_delta_save_that_finds_the_database_locked_writes_nothing(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-1, R-RT-1
    saves = _delta_chain(4)
    with store.acquire("run") as session:
        _save_in_order(session, saves[:3])
        session._connection.execute("PRAGMA busy_timeout = 50")
        other = raw(db_path)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            with pytest.raises(DurableError, match="Nothing was written") as raised:
                session.save(saves[3][0], 3, saves[3][1])
            assert "uncertain" not in str(raised.value)
        finally:
            other.execute("ROLLBACK")
            other.close()
        session._connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        assert session.load() == saves[2][0]
        session.save(saves[3][0], 3, saves[3][1])  # it saves once the lock is free
        assert session.load() == saves[3][0]


@pytest.mark.parametrize(
    ("code", "reported"),
    [
        (sqlite3.SQLITE_IOERR, "uncertain"),
        (sqlite3.SQLITE_FULL, "uncertain"),
        (None, "uncertain"),  # an error without a result code
        (sqlite3.SQLITE_BUSY, "Nothing was written"),
        (sqlite3.SQLITE_READONLY, "Nothing was written"),
    ],
)
def test_a_failed_delta_save_says_whether_it_may_have_been_written(
    store: SQLiteStore, code: int | None, reported: str
) -> None:
    # covers: R-RT-2, B-SQL-2
    class FailingInsert:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self._connection = connection

        def __getattr__(self, name: str) -> object:
            return getattr(self._connection, name)

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.startswith("INSERT OR IGNORE"):
                error = sqlite3.OperationalError("the statement failed")
                if code is not None:
                    error.sqlite_errorcode = code  # as sqlite3 sets it on its own errors
                raise error
            return self._connection.execute(sql, *args)

    saves = _delta_chain(4)
    with store.acquire("run") as session:
        _save_in_order(session, saves[:3])
        real = session._connection
        session._connection = FailingInsert(real)  # type: ignore[assignment]
        with pytest.raises(DurableError, match=reported) as raised:
            session.save(saves[3][0], 3, saves[3][1])
        other = "Nothing was written" if reported == "uncertain" else "uncertain"
        assert other not in str(raised.value)
        session._connection = real
        assert session.load() == saves[2][0]  # here it really was not written


def test_a_delta_saved_behind_the_sessions_back_makes_the_one_statement_refuse(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: R-STORE-3, B-SQL-2
    # The session believes revision 3 is stored (it saved it), so the store kit's check before
    # the write passes: the refusal is the statement's own compare-and-swap.
    saves = _delta_chain(4)
    with store.acquire("run") as session:
        _save_in_order(session, saves[:3])
        foreign = b'{"written": "by another writer"}'
        other = raw(db_path)
        other.execute(
            "INSERT INTO durable_deltas (run_id, base, delta) VALUES ('run', '3', ?)", (foreign,)
        )
        statements: list[str] = []
        session._connection.set_trace_callback(statements.append)
        with pytest.raises(ConflictError):
            session.save(saves[3][0], 3, saves[3][1])
        session._connection.set_trace_callback(None)
        assert any(sql.startswith("INSERT OR IGNORE") for sql in statements)
        assert other.execute(
            "SELECT base, delta FROM durable_deltas WHERE run_id = 'run' ORDER BY base"
        ).fetchall()[-1] == ("3", foreign)
        other.close()


def test_a_delta_save_on_a_connection_left_in_a_transaction_writes_nothing(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: R-RT-1, B-SQL-2
    saves = _delta_chain(4)
    with store.acquire("run") as session:
        _save_in_order(session, saves[:3])
        session._connection.execute("BEGIN")  # as an interrupted transaction would leave it
        with pytest.raises(DurableError, match="Nothing was written"):
            session.save(saves[3][0], 3, saves[3][1])
        session._connection.execute("ROLLBACK")
        other = raw(db_path)
        assert other.execute("SELECT count(*) FROM durable_deltas WHERE base = '3'").fetchone() == (
            0,
        )
        other.close()


def test_deltas_left_by_a_crash_are_read_and_folded_by_the_next_session_that_saves(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2, R-STORE-2, R-STORE-4
    saves = _delta_chain(6)
    session = store.acquire("run")
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)
    connection = raw(db_path)
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (5,)
    session._connection.close()  # the owner dies without folding (its lock goes with it)
    session._lock.release()
    rows = (
        "SELECT run_id, revision, record, created_at, saved_at FROM durable_runs UNION ALL "
        "SELECT run_id, base, delta, NULL, saved_at FROM durable_deltas ORDER BY 1, 2"
    )
    stored = connection.execute(rows).fetchall()
    other = SQLiteStore(db_path)
    with other.acquire("run") as again:  # a look: it reads the deltas and writes nothing
        assert again.load() == saves[-1][0]
    assert connection.execute(rows).fetchall() == stored
    with other.acquire("run") as again:
        after = sample_record("run", 7, marker="after the crash")
        again.save(
            after, 6, EncodedRecord(record_to_json(after), record_delta(saves[-1][0], after))
        )
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
    assert connection.execute("SELECT record FROM durable_runs").fetchone() == (
        record_to_json(after),
    )
    other.close()
    connection.close()


def _lazy_delta_chain(count: int, calls: list[int]) -> list[tuple[RunRecord, EncodedRecord]]:
    """Like :func:`_delta_chain`, the complete bytes made on demand (as the runtime does),
    each call noted in ``calls`` by revision."""

    def lazy(record: RunRecord) -> Callable[[], bytes]:
        def data() -> bytes:
            calls.append(record.revision)
            return record_to_json(record)

        return data

    return [
        (record, EncodedRecord(lazy(record), encoded.delta))
        for record, encoded in _delta_chain(count)
    ]


def test_closing_writes_the_last_saved_bytes_without_reading_the_stored_record(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2, R-STORE-3
    # The session wrote every delta: its last save's complete bytes are the fold's result, so
    # closing writes them (one copy of the record) instead of reading, parsing and decoding
    # what is stored: a lower peak of memory for a long run.
    calls: list[int] = []
    saves = _lazy_delta_chain(8, calls)
    statements: list[str] = []
    session = store.acquire("run")
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)
    assert calls == [1]  # the first save is whole; the others wrote only their delta
    connection = raw(db_path)
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (7,)
    session._connection.set_trace_callback(statements.append)
    session.close()
    assert calls == [1, 8]  # the last save's bytes, asked for once, on close
    assert not any("SELECT revision, record" in sql for sql in statements)
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
    assert connection.execute("SELECT revision, record FROM durable_runs").fetchone() == (
        "8",
        record_to_json(saves[-1][0]),
    )
    connection.close()


def test_closing_folds_what_is_stored_when_the_last_saved_bytes_are_gone(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: B-SQL-2, R-STORE-3
    # The runtime's encoder gives the complete bytes only until its next change: when they
    # are gone (or the session loaded since its last save), closing folds the stored chain.
    saves = _delta_chain(6)
    last, encoded = saves[-1]

    def gone() -> bytes:
        raise DurableError("the complete bytes of this revision are no longer available")

    saves[-1] = (last, EncodedRecord(gone, encoded.delta))
    with store.acquire("run") as session:
        for record, each in saves:
            session.save(record, record.revision - 1, each)
    connection = raw(db_path)
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
    (blob,) = connection.execute("SELECT record FROM durable_runs").fetchone()
    assert blob == record_to_json(last)
    connection.close()


def test_closing_after_a_load_folds_what_is_stored(store: SQLiteStore, db_path: Path) -> None:
    # covers: B-SQL-2, R-STORE-2
    # A load since the last save: what is stored is what gets folded, and checked.
    calls: list[int] = []
    saves = _lazy_delta_chain(6, calls)
    with store.acquire("run") as session:
        for record, encoded in saves:
            session.save(record, record.revision - 1, encoded)
        assert session.load() == saves[-1][0]
        assert session._chain is not None and session._chain[2] == 5
    assert calls == [1]
    connection = raw(db_path)
    assert connection.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
    (blob,) = connection.execute("SELECT record FROM durable_runs").fetchone()
    assert blob == record_to_json(saves[-1][0])
    connection.close()


def test_deltas_without_their_row_are_corrupt_and_never_replaced(
    store: SQLiteStore, db_path: Path
) -> None:
    # covers: R-STORE-2, R-RT-3, E-1
    saves = _delta_chain(5)
    session = store.acquire("run")
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)
    session._wrote = False  # closing folds nothing, as a killed owner folds nothing
    session.close()
    connection = raw(db_path)
    connection.execute("DELETE FROM durable_runs")  # the row removed by hand; deltas remain
    before = connection.execute("SELECT * FROM durable_deltas ORDER BY base").fetchall()
    assert len(before) == 4
    with store.acquire("run") as again:
        with pytest.raises(CorruptRecordError, match="4 saved delta"):
            again.load()
        with pytest.raises(CorruptRecordError, match="saved delta"):
            again.save(sample_record("run", 1), 0)  # a new run never takes their place
    with pytest.raises(CorruptRecordError, match="saved delta"):
        store.peek("run")
    (listed,) = store.list_runs()
    assert listed.run_id == "run" and listed.error is not None and "saved delta" in listed.error
    assert connection.execute("SELECT * FROM durable_deltas ORDER BY base").fetchall() == before
    connection.close()


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM durable_deltas WHERE base = '3'",  # a hole in the chain
        "UPDATE durable_deltas SET delta = X'7B7D' WHERE base = '2'",  # not a delta
        "UPDATE durable_runs SET revision = '2'",  # the record's column no longer leads in
    ],
)
def test_a_broken_chain_of_deltas_is_corrupt_and_kept(
    store: SQLiteStore, db_path: Path, damage: str
) -> None:
    # covers: R-STORE-2, E-1
    saves = _delta_chain(5)
    session = store.acquire("run")
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)
    session._chain = None  # do not fold on close: keep the deltas as a crash would
    session.close()
    connection = raw(db_path)
    connection.execute(damage)
    before = connection.execute("SELECT * FROM durable_deltas ORDER BY base").fetchall()
    with store.acquire("run") as again:
        with pytest.raises(CorruptRecordError):
            again.load()
        with pytest.raises(CorruptRecordError):
            again.save(sample_record("run", 6), 5)
    assert connection.execute("SELECT * FROM durable_deltas ORDER BY base").fetchall() == before
    connection.close()


def test_a_v3_database_is_upgraded_to_v4_with_the_history_table(tmp_path: Path) -> None:
    # covers: B-SQL-1, X-HIST
    path = tmp_path / "durable.sqlite"
    connection = raw(path)
    connection.execute(RUNS_V3)  # exactly what the previous release created
    connection.execute(DELTAS_V3)
    connection.execute("PRAGMA user_version = 3")
    connection.execute(
        "INSERT INTO durable_runs (run_id, revision, record) VALUES (?, ?, ?)",
        ("old", "1", record_to_json(sample_record("old", 1))),
    )
    connection.close()
    with SQLiteStore(path) as store:
        assert store.peek("old") == sample_record("old", 1)
        store.append_history("old", "scope", ['{"event": "run_resumed"}'])
        assert store.read_history("old", "scope") == ['{"event": "run_resumed"}']
    connection = raw(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    connection.close()
