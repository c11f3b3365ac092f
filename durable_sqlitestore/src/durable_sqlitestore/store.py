"""The SQLite store: many runs in one dedicated local database (B-SQL-1, B-SQL-2; seed 001 §1).

Files, all in the database's directory:

- the database file (mode 0600) with its ``-wal`` and ``-shm`` companions (WAL mode);
- ``.init.lock``: serializes construction (pragmas, schema creation and checks); it stays;
- ``.runlocks/<sha256(run id)>.lock``: the per-run ownership locks
  (:mod:`durable_core.store.locks`); they stay;
- ``.durable-probe-*``: made and removed at construction, to check that the directory is
  writable (WAL needs that) before SQLite is asked.

Schema v1 (``PRAGMA user_version = 1``) is one table, :data:`SCHEMA_V1`. The database is
dedicated to Durable: any other table, index, view or trigger is refused.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
import threading
from typing import Any

from durable_core.errors import (
    ConfigError,
    CorruptRecordError,
    DurableError,
    NotFoundError,
    SchemaError,
)
from durable_core.records import RunRecord
from durable_core.store import (
    MAX_REVISION,
    Acquiring,
    BaseSession,
    BaseStore,
    EncodedRecord,
    RunSummary,
    check_options,
    check_path,
    decode_stored,
    sort_summaries,
    summary_of,
    validate_run_id,
    validate_timeout,
)
from durable_core.store.locks import RunLock, acquire_run_lock, make_private_directory

__all__ = [
    "BUSY_TIMEOUT_MS",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "SQLiteSession",
    "SQLiteStore",
    "sqlite_store_factory",
]

SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of a Durable database with schema v1."""

SCHEMA_V1 = (
    "CREATE TABLE durable_runs ("
    "run_id TEXT NOT NULL PRIMARY KEY CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "revision TEXT NOT NULL CHECK (typeof(revision) = 'text' AND length(revision) <= 20 "
    "AND revision GLOB '[1-9]*' AND revision NOT GLOB '*[^0-9]*'), "
    "record BLOB NOT NULL CHECK (typeof(record) = 'blob')"
    ") WITHOUT ROWID"
)
"""The v1 DDL: the run id, the complete record as JSON bytes (BLOB), the revision as decimal
TEXT (uint64-safe, no leading zeros). ``sqlite_master`` must hold exactly this statement."""

_TABLE = "durable_runs"

BUSY_TIMEOUT_MS = 5000
"""SQLite's busy timeout on every connection, in milliseconds (B-SQL-1)."""

_SYNCHRONOUS_FULL = 2
_INIT_LOCK = ".init.lock"
_RUN_LOCKS = ".runlocks"
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class SQLiteStore(BaseStore):
    """Runs saved in one dedicated local SQLite database (B-SQL-1, B-SQL-2; seed 001 §1).

    Construction creates the parent directories (0700), the database file (0600) and
    ``.runlocks/`` beside it, sets and reads back ``journal_mode=WAL``, ``synchronous=FULL`` and
    ``busy_timeout=5000``, and creates or strictly checks schema v1 — all under the
    ``.init.lock`` file lock, so that processes opening the same database at once take turns.

    Ownership of a run is an OS file lock on ``.runlocks/<sha256(run id)>.lock``: BusyError at
    once, within this process or from another one, released on close or process exit. A save is
    one short ``BEGIN IMMEDIATE`` transaction doing the revision compare-and-swap; no
    transaction stays open between calls, so nothing is held while a run executes. Each session
    has its own connection.

    Thread-safe. Only for local file systems with OS file locks (not network shares).

    Args:
        path: the database file (``str`` or path-like); not a directory.
        timeout: seconds to wait at most for another process's construction of the same
            database (the ``.init.lock``); ``None`` waits as long as it takes. Statements wait
            for SQLite's own locks up to the busy timeout (5 s).

    Raises:
        ConfigError: the path is empty, names a directory, or is ``:memory:``/a URI.
        AcquireTimeoutError: the initialisation lock was not free within ``timeout``.
        SchemaError: the database holds anything but Durable's schema v1.
        DurableError: the database's directory is not writable (WAL keeps ``-wal`` and ``-shm``
            files beside the database, and the store its lock files), a pragma did not take,
            or the file is not a regular file.
        OSError / sqlite3.Error: the database cannot be created or opened.
    """

    def __init__(self, path: str | os.PathLike[str], timeout: float | None = None) -> None:
        self._path = _database_path(path)
        wait = validate_timeout(timeout)
        super().__init__()
        self._directory = os.path.dirname(self._path)
        self._runlocks = os.path.join(self._directory, _RUN_LOCKS)
        self._lock = threading.Lock()  # guards the store's own connection
        make_private_directory(self._directory)
        _check_writable(self._directory, self._path)
        init_lock = RunLock.acquire(
            os.path.join(self._directory, _INIT_LOCK),
            description=f"the initialisation of the SQLite database {self._path}",
            wait=wait,
        )
        try:
            _create_database_file(self._path)
            self._connection = self._connect(configure=False)
            try:
                # Look before touching anything: a foreign database is refused unchanged (not
                # even switched to WAL).
                _check_existing_schema(self._connection, self._path)
                _configure(self._connection, self._path)
                _ensure_schema(self._connection, self._path)
            except BaseException:
                self._connection.close()
                raise
            make_private_directory(self._runlocks)
        finally:
            init_lock.release()  # the file stays

    @property
    def path(self) -> str:
        """The absolute path of the database file."""
        return self._path

    def settings(self) -> dict[str, Any]:
        """Read back the pragmas of the store's connection (journal mode, sync, busy timeout).

        Returns:
            ``{"journal_mode": "wal", "synchronous": 2, "busy_timeout": 5000}`` when healthy.
        """
        with self._lock:
            self._check_open()
            return _read_settings(self._connection)

    def acquire(self, run_id: str, timeout: float | None = None) -> SQLiteSession:
        """Take exclusive ownership of ``run_id`` (R-STORE-1, B-SQL-2).

        Locks ``.runlocks/<sha256(run_id)>.lock`` without waiting, then opens the session's
        own connection (which may wait up to the busy timeout for SQLite's locks).

        Args:
            run_id: the run's id (a non-empty string of valid Unicode).
            timeout: accepted for the protocol; ownership is never waited for.

        Returns:
            The run's :class:`SQLiteSession`.

        Raises:
            BusyError: the run is owned by another session or process (at once).
            SessionClosedError: the store was closed.
            CorruptRecordError: ``run_id`` is not a valid run id.
            DurableError: a pragma did not take on the new connection.
            OSError / sqlite3.Error: the lock file or the database cannot be opened.
        """
        session: SQLiteSession = super().acquire(run_id, timeout)
        return session

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every stored run, without taking ownership (RunLister).

        A row whose record cannot be decoded, or whose revision column disagrees with the
        record, is listed with ``error`` set (``run_id`` from the row), never skipped.

        Raises:
            SessionClosedError: the store was closed.
            sqlite3.Error: the table cannot be read.
        """
        with self._lock:
            self._check_open()
            rows = self._connection.execute(
                f"SELECT run_id, revision, record FROM {_TABLE} ORDER BY run_id"
            ).fetchall()
        summaries = []
        for run_id, revision, blob in rows:
            location = _location(self._path, run_id)
            summaries.append(
                summary_of(
                    location,
                    lambda r=run_id, v=revision, b=blob, at=location: decode_stored(
                        r, b, at, _revision(v, at)
                    ),
                    run_id,
                )
            )
        return sort_summaries(summaries)

    def peek(self, run_id: str) -> RunRecord:
        """The last committed record of ``run_id``: a plain SELECT, without the run's lock
        (RecordPeeker). Never writes; a running run's owner may have saved a newer revision by
        the time it is shown.

        Raises:
            NotFoundError: no row for the run.
            CorruptRecordError: the row is not a record of this run.
            SessionClosedError: the store was closed.
        """
        validate_run_id(run_id)
        with self._lock:
            self._check_open()
            row = self._connection.execute(
                f"SELECT revision, record FROM {_TABLE} WHERE run_id = ?", (run_id,)
            ).fetchone()
        location = _location(self._path, run_id)
        if row is None:
            raise NotFoundError(f"no record of run {run_id!r} at {location}")
        return decode_stored(run_id, row[1], location, _revision(row[0], location))

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop: a ``.runlocks/<key>.cancel`` marker file,
        which the owner's watcher removes (CancelRequests)."""
        from durable_core.maintenance import write_marker_file
        from durable_core.store.locks import run_key

        validate_run_id(run_id)
        write_marker_file(os.path.join(self._runlocks, run_key(run_id) + ".cancel"))

    def watch_cancel(self, run_id: str, on_request: Any) -> Any:
        """Watch for ``.runlocks/<key>.cancel`` while the run executes (CancelRequests)."""
        from durable_core.maintenance import watch_marker_file
        from durable_core.store.locks import run_key

        make_private_directory(self._runlocks)
        return watch_marker_file(
            os.path.join(self._runlocks, run_key(run_id) + ".cancel"), on_request
        )

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    # -- internals -----------------------------------------------------------------------------

    def _open_session(
        self, run_id: str, timeout: float | None, pending: Acquiring
    ) -> SQLiteSession:
        make_private_directory(self._runlocks)
        lock = acquire_run_lock(self._runlocks, run_id)
        try:
            return SQLiteSession(self, run_id, lock, self._connect())
        except BaseException:
            lock.release()
            raise

    def _close_medium(self, deadline: float | None) -> None:
        with self._lock:
            self._connection.close()

    def _connect(self, *, configure: bool = True) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self._path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # autocommit: transactions only where this module opens one
            check_same_thread=False,  # guarded by the store's or the session's lock
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if configure:
                _configure(connection, self._path)
        except BaseException:
            connection.close()
            raise
        return connection


class SQLiteSession(BaseSession):
    """Exclusive session of one run of an :class:`SQLiteStore` (R-STORE-2…4, B-SQL-2).

    Holds the run's OS lock and its own connection until ``close``. A save is one short
    ``BEGIN IMMEDIATE`` transaction doing the revision compare-and-swap and writing the complete
    record. Before ``COMMIT`` a failure rolls the transaction back (the stored record is
    unchanged); a failing ``COMMIT`` leaves the save uncertain (load again, R-RT-2): the
    ``DurableError``'s message says which.
    """

    def __init__(
        self, store: SQLiteStore, run_id: str, lock: RunLock, connection: sqlite3.Connection
    ) -> None:
        super().__init__(store, run_id, _location(store.path, run_id))
        self._path = store.path
        self._lock = lock
        self._connection = connection

    def delete(self) -> None:
        """Delete the run's row, then its ``.runlocks`` lock file while still holding its lock;
        then close the session (RunDeleter). The lock file goes as the file store's does: an
        acquirer that locked the old file finds it is no longer the one at the path and opens
        the path again, so two owners never exist.

        Raises:
            NotFoundError: the run has no row (nothing removed).
            SessionClosedError: the session was closed.
            DurableError: the delete failed; the transaction was rolled back.
        """
        with self._mutex:
            self._check_open()
            connection = self._connection
            try:
                connection.execute("BEGIN IMMEDIATE")
                deleted = connection.execute(
                    f"DELETE FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
                ).rowcount
                connection.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                raise DurableError(
                    f"could not delete run {self._run_id!r} from {self._path}: {exc}; the "
                    "transaction was rolled back, the run is intact"
                ) from exc
            if deleted != 1:
                raise self._not_found()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock.path)
        self.close()

    # -- the medium (called with the session's mutex held) ------------------------------------

    def _read(self) -> tuple[bytes, int | None] | None:
        row = self._connection.execute(
            f"SELECT revision, record FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
        ).fetchone()
        if row is None:
            return None
        return row[1], _revision(row[0], self._location)

    def _stored_revision(self) -> int:
        row = self._connection.execute(
            f"SELECT revision FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
        ).fetchone()
        return 0 if row is None else _revision(row[0], self._location)

    def _write(
        self, data: bytes, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None
    ) -> bool:
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise DurableError(
                f"could not start the save of run {self._run_id!r} in {self._path}: {exc}. "
                "Nothing was written: the stored record is unchanged"
            ) from exc
        try:
            if expected_revision == 0:
                cursor = connection.execute(
                    f"INSERT INTO {_TABLE} (run_id, revision, record) VALUES (?, ?, ?) "
                    "ON CONFLICT (run_id) DO NOTHING",
                    (self._run_id, str(record.revision), data),
                )
            else:
                cursor = connection.execute(
                    f"UPDATE {_TABLE} SET revision = ?, record = ? "
                    "WHERE run_id = ? AND revision = ?",
                    (str(record.revision), data, self._run_id, str(expected_revision)),
                )
            written = cursor.rowcount == 1
            if not written:
                connection.execute("ROLLBACK")
                return False
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise DurableError(
                    f"could not save revision {record.revision} of run {self._run_id!r} in "
                    f"{self._path}: {exc}. The transaction was rolled back: the stored record "
                    "is unchanged"
                ) from exc
            raise
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            raise DurableError(
                f"committing revision {record.revision} of run {self._run_id!r} in "
                f"{self._path} failed: {exc}. The save is uncertain: it may or may not have "
                "been committed. Stop, fix the cause, and load the record again before "
                "continuing; never retry with the old revision"
            ) from exc
        return True

    def _release(self, deadline: float | None) -> None:
        try:
            self._connection.close()
        finally:
            self._lock.release()


# -- helpers ------------------------------------------------------------------------------------


def _database_path(path: object) -> str:
    raw = check_path(path, "SQLiteStore path (a database file)", "./durable.sqlite")
    if raw == ":memory:" or raw.startswith("file:"):
        raise ConfigError(
            f"SQLiteStore path must name a database file on disk, found {raw!r}; in-memory "
            "databases and URIs are not supported (use MemoryStore for tests)"
        )
    if raw.endswith(("/", os.sep)) or os.path.isdir(raw):
        raise ConfigError(
            f"SQLiteStore path {raw!r} is a directory; give the path of a database file "
            f"inside it, e.g. {os.path.join(raw, 'durable.sqlite')!r} (B-SQL-1)"
        )
    return os.path.abspath(raw)


def _create_database_file(path: str) -> None:
    """Create the database file with mode 0600 when missing; refuse anything but a file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o600)
    except FileExistsError:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(
                f"{path} exists and is not a regular file; the SQLite store needs a database "
                "file there (B-SQL-1)"
            ) from None
        return
    os.close(fd)


def _read_settings(connection: sqlite3.Connection) -> dict[str, Any]:
    return {
        "journal_mode": str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower(),
        "synchronous": int(connection.execute("PRAGMA synchronous").fetchone()[0]),
        "busy_timeout": int(connection.execute("PRAGMA busy_timeout").fetchone()[0]),
    }


def _configure(connection: sqlite3.Connection, path: str) -> None:
    """Set and read back WAL, synchronous=FULL and the busy timeout (B-SQL-1).

    Raises:
        DurableError: a setting did not take, or SQLite refused to apply it.
    """
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA journal_mode = WAL").fetchall()
        connection.execute(f"PRAGMA synchronous = {_SYNCHRONOUS_FULL}")
        settings = _read_settings(connection)
    except sqlite3.Error as exc:
        raise DurableError(
            f"could not apply Durable's settings (WAL, synchronous=FULL, busy_timeout="
            f"{BUSY_TIMEOUT_MS}) to the SQLite database {path}: {exc}. The directory must be "
            "writable (WAL creates -wal/-shm files beside the database) and on a local file "
            "system (B-SQL-1)"
        ) from exc
    expected = {
        "journal_mode": "wal",
        "synchronous": _SYNCHRONOUS_FULL,
        "busy_timeout": BUSY_TIMEOUT_MS,
    }
    wrong = {k: v for k, v in settings.items() if v != expected[k]}
    if wrong:
        found = ", ".join(f"{k}={v!r} (expected {expected[k]!r})" for k, v in wrong.items())
        raise DurableError(
            f"the SQLite database {path} refused Durable's settings: {found}. WAL needs a local "
            "file system with shared memory and no other connection holding the database in "
            "another journal mode; the store does not start without them (B-SQL-1)"
        )


def _check_existing_schema(connection: sqlite3.Connection, path: str) -> None:
    """Refuse a database that is not empty and not Durable's schema v1, changing nothing."""
    try:
        objects = connection.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:
        raise SchemaError(
            f"{path} is not an SQLite database ({exc}); the SQLite store needs a database file "
            "of its own. Point it at a new file"
        ) from exc
    if objects or version != 0:
        _check_schema(objects, version, path)


def _ensure_schema(connection: sqlite3.Connection, path: str) -> None:
    """Create schema v1 in an empty database, or check that it is exactly there (B-SQL-1)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        objects = connection.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if not objects and version == 0:
            connection.execute(SCHEMA_V1)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        else:
            _check_schema(objects, version, path)
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def _check_schema(objects: list[tuple[str, str, str | None]], version: int, path: str) -> None:
    advice = (
        "The SQLite store needs a database of its own: point it at a new file, or remove what "
        "was added"
    )
    for kind, name, sql in objects:
        if kind == "table" and name == _TABLE:
            if sql != SCHEMA_V1:
                raise SchemaError(
                    f"table {name!r} in {path} does not match Durable's schema v1: found "
                    f"{sql!r}, expected {SCHEMA_V1!r}. Durable never alters a schema; restore "
                    "the table or use a new database"
                )
            continue
        raise SchemaError(f"unexpected {kind} {name!r} in {path}: {sql or ''}. {advice}")
    if not any(kind == "table" and name == _TABLE for kind, name, _ in objects):
        raise SchemaError(
            f"{path} has user_version {version} but no table {_TABLE!r}; it is not a Durable "
            f"database. {advice}"
        )
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"{path} has schema version (PRAGMA user_version) {version}; this Durable reads "
            f"version {SCHEMA_VERSION}. Use the Durable release that wrote it"
        )


def _revision(text: object, location: str) -> int:
    if isinstance(text, str) and text.isascii() and text.isdigit() and not text.startswith("0"):
        value = int(text)
        if value <= MAX_REVISION:
            return value
    raise CorruptRecordError(
        f"the revision column of {location} holds {text!r}; a stored revision is a decimal "
        f"between 1 and {MAX_REVISION} without leading zeros. It was left untouched (E-1)"
    )


def _location(path: str, run_id: str) -> str:
    return f"{path} (run_id {run_id!r})"


def _check_writable(directory: str, path: str) -> None:
    """Refuse a database whose directory cannot be written, before SQLite is asked.

    Raises:
        DurableError: a file cannot be created in ``directory``.
    """
    try:
        fd, probe = tempfile.mkstemp(prefix=".durable-probe-", dir=directory)
    except OSError as exc:
        raise DurableError(
            f"the SQLite store cannot write in {directory} ({exc.strerror or exc}); it needs a "
            f"writable directory for {os.path.basename(path)}: SQLite's WAL mode keeps the "
            "-wal and -shm files beside the database, and the store keeps its lock files "
            "there. Make the directory writable for this user, or put the database in one that "
            "is"
        ) from exc
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def sqlite_store_factory(**options: Any) -> SQLiteStore:
    """Build an :class:`SQLiteStore` from a config's ``[store]`` options (``path``, ``timeout``).

    Raises:
        ConfigError: an unknown option is given, or ``path`` is missing.
    """
    check_options("sqlite", options, ("path", "timeout"), required=("path",))
    return SQLiteStore(options["path"], timeout=options.get("timeout"))
