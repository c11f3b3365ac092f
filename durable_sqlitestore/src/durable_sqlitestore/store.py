"""The SQLite store: many runs in one dedicated local database (B-SQL-1, B-SQL-2; seed 001 §1).

Files, all in the database's directory:

- the database file (mode 0600) with its ``-wal`` and ``-shm`` companions (WAL mode);
- ``.init.lock``: serializes construction (pragmas, schema creation and checks); it stays;
- ``.runlocks/<sha256(run id)>.lock``: the per-run ownership locks
  (:mod:`durable_core.store.locks`); they stay;
- ``.durable-probe-*``: made and removed at construction, to check that the directory is
  writable (WAL needs that) before SQLite is asked.

Schema v5 (``PRAGMA user_version = 5``) is these tables, and the inbox tables of
:mod:`durable_sqlitestore.inbox` (posted messages and waiting notes): ``durable_runs``
(:data:`RUNS_V3`: one row per run with a complete record, when the run was created and when it was
last saved), ``durable_deltas`` (:data:`DELTAS_V3`: the deltas saved since that complete record,
each with its save time) and ``durable_history`` (:data:`HISTORY_V4` and its index
:data:`HISTORY_INDEX_V4`: each run's history, one row per entry, keyed by run id and root scope;
written off the save path by the history writer, removed with the run). Times are REAL seconds since
the Unix epoch (UTC), taken from SQLite's own clock (:data:`NOW`) by the statement that writes the
row: ``created_at`` by the run's first save, ``saved_at`` by every save. A run's last save time is
the newest of its row's ``saved_at`` and its deltas'. In the sqlite3 shell: ``datetime(saved_at,
'unixepoch')``.

Older databases are upgraded in place, in one transaction, when a store opens them (the DDL and the
ordered upgrade steps are :mod:`durable_sqlitestore.schema`): v1 (one table) gets the deltas table,
v2 (:data:`SCHEMA_V1` + :data:`DELTAS_V2`) gets the time columns (``ALTER TABLE … ADD COLUMN``,
which is why they come last in the DDL), v3 gets the history table, v4 the inbox tables. Rows saved
before the upgrade have ``created_at`` NULL (unknown) and ``saved_at`` set to the last time the
database file was written before the upgrade: a time no earlier than their real last save, so that
``durable prune --older-than`` never takes them for older than they are. The database is dedicated
to Durable: any other table, column, index, view or trigger is refused.

A save writes only its delta (one short row) when it has one, and it is one statement, which
SQLite runs as its own write transaction and which is the revision compare-and-swap: an ``INSERT``
that adds the delta only when the delta leading to the expected revision is there, or, for the
first delta after the complete record, when that record is at the expected revision (the primary
key refuses a second save from the same revision). Such a save looks up the run's row in
``durable_runs`` only when no delta leads to the expected revision: in a ``WITHOUT ROWID`` table,
finding a row compares keys on the whole row, so it reads the complete record (megabytes for a
long run). When the deltas saved since the complete record
add up to more than that record's size (:data:`FOLD_RATIO`), the save writes the complete record
instead and deletes the deltas, in the same transaction: the cost per save stays proportional to
its change, amortized. Closing a session that saved folds the remaining deltas, so that at rest
every run is one complete JSON record in ``durable_runs`` that the sqlite3 shell reads. A session
that only read (``durable inspect``, a refused ``resume``) writes nothing when it closes: deltas
left by a crash stay until the next session that saves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from durable_core.errors import (
    ConfigError,
    CorruptRecordError,
    DurableError,
    NotFoundError,
)
from durable_core.records import RunRecord
from durable_core.records.delta import Folded
from durable_core.store import (
    MAX_REVISION,
    Acquiring,
    BaseStore,
    Capability,
    EncodedRecord,
    FoldingSession,
    RunSummary,
    check_options,
    check_path,
    decode_stored,
    sort_summaries,
    summary_of,
    validate_run_id,
    validate_timeout,
)
from durable_core.store.deltas import FOLD_RATIO  # the kit's one fold policy; named here too
from durable_core.store.history import check_entries
from durable_core.store.local import watch_marker_file, write_marker_file
from durable_core.store.locks import RunLock, acquire_run_lock, make_private_directory, run_key
from durable_sqlitestore import schema
from durable_sqlitestore.inbox import SQLiteInbox, forget_inbox
from durable_sqlitestore.schema import DELTAS_TABLE, HISTORY_TABLE, RUNS_TABLE

__all__ = [
    "BUSY_TIMEOUT_MS",
    "FOLD_RATIO",
    "NOW",
    "SQLiteSession",
    "SQLiteStore",
    "sqlite_store_factory",
]

logger = logging.getLogger("durable_sqlitestore")

NOW = "((julianday('now') - 2440587.5) * 86400.0)"
"""SQLite's clock as seconds since the Unix epoch (UTC, millisecond resolution), evaluated by the
statement that saves. (``unixepoch('subsec')`` needs SQLite 3.42; this works on any SQLite.)"""


_TABLE = RUNS_TABLE
_DELTAS = DELTAS_TABLE
_HISTORY = HISTORY_TABLE

BUSY_TIMEOUT_MS = 5000
"""SQLite's busy timeout on every connection, in milliseconds (B-SQL-1)."""

_SYNCHRONOUS_FULL = 2
_INIT_LOCK = ".init.lock"
_RUN_LOCKS = ".runlocks"
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class SQLiteStore(SQLiteInbox, BaseStore):
    """Runs saved in one dedicated local SQLite database (B-SQL-1, B-SQL-2; seed 001 §1).

    Construction creates the parent directories (0700), the database file (0600) and
    ``.runlocks/`` beside it, sets and reads back ``journal_mode=WAL``, ``synchronous=FULL`` and
    ``busy_timeout=5000``, and creates, upgrades (from v1, v2 or v3) or strictly checks schema
    v4 (see :mod:`durable_sqlitestore.schema`) — all under the ``.init.lock`` file lock, so that
    processes opening the same database at once take turns.

    Ownership of a run is an OS file lock on ``.runlocks/<sha256(run id)>.lock``: BusyError at
    once, within this process or from another one, released on close or process exit. A save is
    one short write transaction doing the revision compare-and-swap (a save that keeps its delta
    is a single statement); no transaction stays open between calls, so nothing is held while
    a run executes. Each session has its own connection.

    Thread-safe. Only for local file systems with OS file locks (not network shares).

    Args:
        path: the database file (``str`` or path-like); not a directory.
        timeout: seconds to wait at most for another process's construction of the same
            database (the ``.init.lock``); ``None`` waits as long as it takes. Statements wait
            for SQLite's own locks up to the busy timeout (5 s).

    Raises:
        ConfigError: the path is empty, names a directory, or is ``:memory:``/a URI.
        AcquireTimeoutError: the initialisation lock was not free within ``timeout``.
        SchemaError: the database holds anything but Durable's schema v4 (or an exact v1, v2 or
            v3).
        DurableError: the database's directory is not writable (WAL keeps ``-wal`` and ``-shm``
            files beside the database, and the store its lock files), a pragma did not take,
            or the file is not a regular file.
        OSError / sqlite3.Error: the database cannot be created or opened.
    """

    capabilities = frozenset(
        {
            Capability.LIST_RUNS,
            Capability.PEEK,
            Capability.SAVE_TIMES,
            Capability.CREATE_TIMES,
            Capability.CANCEL_REQUESTS,
            Capability.RUN_HISTORY,
            Capability.INBOX,
            Capability.DELETE,
            Capability.RESTORE,
            Capability.RESTORE_TIMES,
        }
    )
    """What the store and its sessions can do beyond the contract (store.capabilities)."""

    def __init__(self, path: str | os.PathLike[str], timeout: float | None = None) -> None:
        self._path = _database_path(path)
        wait = validate_timeout(timeout)
        super().__init__()
        self._directory = os.path.dirname(self._path)
        self._runlocks = os.path.join(self._directory, _RUN_LOCKS)
        self._lock = threading.Lock()  # guards the store's own connection
        self._history_lock = threading.Lock()  # guards the history writer's connection
        self._history_connection: sqlite3.Connection | None = None
        make_private_directory(self._directory)
        _check_writable(self._directory, self._path)
        init_lock = RunLock.acquire(
            os.path.join(self._directory, _INIT_LOCK),
            description=f"the initialisation of the SQLite database {self._path}",
            wait=wait,
        )
        try:
            _create_database_file(self._path)
            last_write = _last_write(self._path)  # before a connection touches the files
            self._connection = self._connect(configure=False)
            try:
                # Look before touching anything: a foreign database is refused unchanged (not
                # even switched to WAL).
                schema.check_existing(self._connection, self._path)
                _configure(self._connection, self._path)
                schema.upgrade(self._connection, self._path, last_write)
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
        record, is listed with ``error`` set (``run_id`` from the row), never skipped; so are
        saved deltas without their row.

        Raises:
            SessionClosedError: the store was closed.
            sqlite3.Error: the table cannot be read.
        """
        with self._lock:
            self._check_open()
            connection = self._connection
            connection.execute("BEGIN")
            try:
                rows = connection.execute(
                    f"SELECT run_id, revision, record FROM {_TABLE} ORDER BY run_id"
                ).fetchall()
                deltas: dict[str, list[tuple[object, object]]] = {}
                for run_id, base, delta in connection.execute(
                    f"SELECT run_id, base, delta FROM {_DELTAS}"
                ):
                    deltas.setdefault(run_id, []).append((base, delta))
            finally:
                connection.execute("COMMIT")
        summaries = []
        for run_id, revision, blob in rows:
            location = _location(self._path, run_id)

            def read(
                r: str = run_id, v: object = revision, b: object = blob, at: str = location
            ) -> RunRecord:
                data, head, _ = _fold(v, b, deltas.get(r, []), at)
                return decode_stored(r, data, at, head)

            summaries.append(summary_of(location, read, run_id))
        listed = {row[0] for row in rows}
        for run_id, orphans in deltas.items():
            if run_id not in listed:  # deltas alone are no run, and never skipped

                def refuse(r: str = run_id, count: int = len(orphans)) -> RunRecord:
                    raise _deltas_without_record(_location(self._path, r), count)

                summaries.append(summary_of(_location(self._path, run_id), refuse, run_id))
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
            connection = self._connection
            connection.execute("BEGIN")  # one snapshot of the row and its deltas
            try:
                row = connection.execute(
                    f"SELECT revision, record FROM {_TABLE} WHERE run_id = ?", (run_id,)
                ).fetchone()
                deltas = connection.execute(
                    f"SELECT base, delta FROM {_DELTAS} WHERE run_id = ?", (run_id,)
                ).fetchall()
            finally:
                connection.execute("COMMIT")
        location = _location(self._path, run_id)
        if row is None:
            if deltas:
                raise _deltas_without_record(location, len(deltas))
            raise NotFoundError(f"no record of run {run_id!r} at {location}")
        data, head, _ = _fold(row[0], row[1], deltas, location)
        return decode_stored(run_id, data, location, head)

    def saved_at(self, run_id: str) -> float | None:
        """When ``run_id`` was last saved, by SQLite's clock (seconds since the epoch): the
        newest ``saved_at`` of its row and its deltas; ``None`` when it has no row or the time
        is unknown (SaveTimes). A plain SELECT, without the run's lock.

        Raises:
            SessionClosedError: the store was closed.
        """
        return self._times(run_id)[1]

    def created_at(self, run_id: str) -> float | None:
        """When ``run_id``'s first record was saved, by SQLite's clock (seconds since the
        epoch); ``None`` when it has no row or was saved before the store kept the time
        (CreateTimes). A plain SELECT, without the run's lock.

        Raises:
            SessionClosedError: the store was closed.
        """
        return self._times(run_id)[0]

    def _times(self, run_id: str) -> tuple[float | None, float | None]:
        validate_run_id(run_id)
        with self._lock:
            self._check_open()
            row = self._connection.execute(
                f"SELECT created_at, saved_at, (SELECT max(saved_at) FROM {_DELTAS} "
                f"WHERE run_id = ?1) FROM {_TABLE} WHERE run_id = ?1",
                (run_id,),
            ).fetchone()
        if row is None:
            return None, None
        created, saved, delta_saved = row
        known = [t for t in (saved, delta_saved) if isinstance(t, float)]
        return (created if isinstance(created, float) else None), (max(known) if known else None)

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop: a ``.runlocks/<key>.cancel`` marker file,
        which the owner's watcher removes (CancelRequests)."""
        validate_run_id(run_id)
        write_marker_file(os.path.join(self._runlocks, run_key(run_id) + ".cancel"))

    def watch_cancel(self, run_id: str, on_request: Any) -> Any:
        """Watch for ``.runlocks/<key>.cancel`` while the run executes (CancelRequests)."""
        make_private_directory(self._runlocks)
        return watch_marker_file(
            os.path.join(self._runlocks, run_key(run_id) + ".cancel"), on_request
        )

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append ``entries`` to the history of ``run_id``'s run ``root_scope``: rows of
        ``durable_history``, in one short transaction on a connection of their own (RunHistory).

        That connection commits with ``synchronous = NORMAL`` (no sync per commit: in WAL mode
        a power loss may lose the last entries, never a record), so it holds the database's
        write lock for the least time; it never touches ``durable_runs`` or the deltas.

        Raises:
            ValueError: an entry is not one line, or ``root_scope`` is not a non-empty line.
            SessionClosedError: the store was closed.
            sqlite3.Error: the rows could not be written (none were).
        """
        validate_run_id(run_id)
        check_entries(root_scope, entries)
        if not entries:
            return
        with self._history_lock:
            self._check_open()
            connection = self._history_connection
            if connection is None:
                connection = self._connect(configure=False)
                connection.execute("PRAGMA synchronous = NORMAL")
                self._history_connection = connection
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(
                    f"INSERT INTO {_HISTORY} (run_id, root_scope, entry) VALUES (?, ?, ?)",
                    [(run_id, root_scope, entry) for entry in entries],
                )
                connection.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The history of ``run_id``'s run ``root_scope``, oldest first (RunHistory): a plain
        SELECT, without the run's lock.

        Raises:
            SessionClosedError: the store was closed.
        """
        validate_run_id(run_id)
        with self._lock:
            self._check_open()
            rows = self._connection.execute(
                f"SELECT entry FROM {_HISTORY} WHERE run_id = ? AND root_scope = ? ORDER BY id",
                (run_id, root_scope),
            ).fetchall()
        return [row[0] for row in rows]

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
        self._close_inbox()
        with self._lock:
            self._connection.close()
        with self._history_lock:
            if self._history_connection is not None:
                self._history_connection.close()
                self._history_connection = None

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


class SQLiteSession(FoldingSession):
    """Exclusive session of one run of an :class:`SQLiteStore` (R-STORE-2…4, B-SQL-2).

    Holds the run's OS lock and its own connection until ``close``. A save that keeps its delta
    is one conditional ``INSERT`` (:data:`_APPEND`), which SQLite runs as its own transaction:
    it is the revision compare-and-swap and writes the delta. The first save, and a save when no
    delta is known or the deltas have outgrown the record (``FOLD_RATIO``), write the complete
    record in one short ``BEGIN IMMEDIATE`` transaction. ``close`` folds the deltas when this
    session saved, so that the run rests as one complete record (a session that only loaded
    writes nothing). A failure before anything was written (the write lock not obtained, or a
    failure before ``COMMIT``, which rolls the transaction back) leaves the stored record
    unchanged; a failing ``COMMIT``, or a failing delta statement for any other reason, leaves
    the save uncertain (load again, R-RT-2): the ``DurableError``'s message says which.
    """

    capabilities = FoldingSession.capabilities | {Capability.IDLE_SAVES}
    """A save never uses an event loop: the runtime may call it on its event loop's thread
    while no body runs (it then waits for the save anyway)."""

    fold_errors = (sqlite3.Error, DurableError, OSError)

    def __init__(
        self, store: SQLiteStore, run_id: str, lock: RunLock, connection: sqlite3.Connection
    ) -> None:
        super().__init__(store, run_id, _location(store.path, run_id))
        self._path = store.path
        # (revision of the complete record, its size, number of deltas after it, their bytes):
        # what this session knows is stored, or None when it does not know.
        self._chain: tuple[int, int, int, int] | None = None
        self._read_chain: tuple[int, int, int, int] | None = None
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
                connection.execute(f"DELETE FROM {_DELTAS} WHERE run_id = ?", (self._run_id,))
                if deleted == 1:  # the run's history and inbox go with it
                    connection.execute(f"DELETE FROM {_HISTORY} WHERE run_id = ?", (self._run_id,))
                    forget_inbox(connection, self._run_id)
                connection.execute("COMMIT")
                self._chain = None
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

    def restore_times(self, created_at: float | None, saved_at: float | None) -> None:
        """Set when the run was created and last saved (seconds since the epoch), for a copied
        run (TimesRestorer): ``created_at`` as given (``None``: unknown), ``saved_at`` unless
        ``None``.

        Raises:
            NotFoundError: the run has no row.
            SessionClosedError: the session was closed.
            DurableError: the update failed (nothing changed).
        """
        with self._mutex:
            self._check_open()
            try:
                changed = self._connection.execute(
                    f"UPDATE {_TABLE} SET created_at = ?, saved_at = coalesce(?, saved_at) "
                    "WHERE run_id = ?",
                    (_seconds(created_at), _seconds(saved_at), self._run_id),
                ).rowcount
            except sqlite3.Error as exc:
                raise DurableError(
                    f"could not set the times of run {self._run_id!r} in {self._path}: {exc}"
                ) from exc
            if changed != 1:
                raise self._not_found()

    # -- the medium (called with the session's mutex held) ------------------------------------

    def _read(self) -> tuple[bytes | Folded, int | None] | None:
        row, deltas = self._rows()
        if row is None:
            if deltas:
                raise _deltas_without_record(self._location, len(deltas))
            self._chain = None
            return None
        data, head, delta_bytes = _fold(row[0], row[1], deltas, self._location)
        # What this session now knows of the stored chain (kept only if the record decodes).
        self._read_chain = (
            _revision(row[0], self._location),
            len(row[1]),
            len(deltas),
            delta_bytes,
        )
        return data, head

    def _rows(self) -> tuple[Any, list[Any]]:
        """The run's row (or None) and its delta rows."""
        # The row first, then its deltas: a fold in between (only this session's own, as it
        # owns the run) leaves a consistent, older view, never a broken chain.
        row = self._connection.execute(
            f"SELECT revision, record FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
        ).fetchone()
        deltas = self._connection.execute(
            f"SELECT base, delta FROM {_DELTAS} WHERE run_id = ?", (self._run_id,)
        ).fetchall()
        return row, deltas

    def _decoded(self, revision: int) -> None:
        self._chain = self._read_chain

    def _stored_revision(self) -> int:
        row = self._connection.execute(
            f"SELECT revision FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
        ).fetchone()
        if row is None:
            return 0
        bases = [
            _revision(base, self._location)
            for (base,) in self._connection.execute(
                f"SELECT base FROM {_DELTAS} WHERE run_id = ?", (self._run_id,)
            )
        ]
        return max([_revision(row[0], self._location), *(b + 1 for b in bases)])

    def _write(self, record: RunRecord, expected_revision: int, encoded: EncodedRecord) -> bool:
        chain = self._chain
        # Unknown what is stored, or the deltas outgrew the record: write it whole.
        delta = self._delta_to_keep(
            encoded,
            expected_revision,
            None if chain is None else chain[1],
            0 if chain is None else chain[3],
        )
        if delta is not None:
            assert chain is not None
            # After a delta of this session, the delta leading to expected_revision is there;
            # only when it is not (the first delta after the complete record, or the run
            # changed under us) is the complete record's revision looked at.
            if not (
                chain[2] > 0 and self._append(_APPEND, delta, expected_revision)
            ) and not self._append(_APPEND_FIRST, delta, expected_revision):
                return False
            self._chain = (chain[0], chain[1], chain[2] + 1, chain[3] + len(delta))
            return True
        data = encoded.data
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise DurableError(
                f"could not start the save of run {self._run_id!r} in {self._path}: {exc}. "
                "Nothing was written: the stored record is unchanged"
            ) from exc
        try:
            if not self._head_is(expected_revision):
                connection.execute("ROLLBACK")
                return False
            if expected_revision == 0:
                connection.execute(
                    f"INSERT INTO {_TABLE} (run_id, revision, record, created_at, saved_at) "
                    f"VALUES (?, ?, ?, {NOW}, {NOW})",
                    (self._run_id, str(record.revision), data),
                )
            else:
                connection.execute(
                    f"UPDATE {_TABLE} SET revision = ?, record = ?, saved_at = {NOW} "
                    "WHERE run_id = ?",
                    (str(record.revision), data, self._run_id),
                )
                connection.execute(f"DELETE FROM {_DELTAS} WHERE run_id = ?", (self._run_id,))
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
            self._chain = None
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            raise self._uncertain(record.revision, exc) from exc
        self._chain = (record.revision, len(data), 0, 0)
        return True

    def _append(self, statement: str, delta: bytes, expected_revision: int) -> bool:
        """Insert ``delta`` as the save from ``expected_revision`` by ``statement``
        (:data:`_APPEND` or :data:`_APPEND_FIRST`); ``False`` when it inserted nothing.

        One statement, which SQLite runs as its own transaction: it takes
        the write lock before it reads anything, as ``BEGIN IMMEDIATE`` does, and commits when
        it ends. Three statements (``BEGIN``, ``INSERT``, ``COMMIT``) would each let go of the
        GIL while SQLite works and wait to take it back while other threads run Python (the
        event loop's, a handler's), which made a save cost about twice one bare write.

        Raises:
            DurableError: the statement failed; the message says whether nothing was written
                (:data:`_WROTE_NOTHING`: the write lock was not obtained, say) or the save is
                uncertain.
        """
        connection = self._connection
        if connection.in_transaction:  # the statement would not commit on its own
            raise DurableError(
                f"could not save revision {expected_revision + 1} of run {self._run_id!r} in "
                f"{self._path}: the session's connection is inside a transaction left open "
                "by an earlier failure. Nothing was written: the stored record is unchanged. "
                "Close the session and load the record again"
            )
        try:
            inserted = connection.execute(
                statement,
                (self._run_id, str(expected_revision), delta, str(expected_revision - 1)),
            ).rowcount
        except sqlite3.Error as exc:
            self._chain = None
            code = getattr(exc, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _WROTE_NOTHING:
                raise DurableError(
                    f"could not save revision {expected_revision + 1} of run {self._run_id!r} "
                    f"in {self._path}: {exc}. Nothing was written: the stored record is "
                    "unchanged"
                ) from exc
            raise self._uncertain(expected_revision + 1, exc) from exc
        return inserted == 1

    def _uncertain(self, revision: int, exc: sqlite3.Error) -> DurableError:
        return DurableError(
            f"committing revision {revision} of run {self._run_id!r} in {self._path} failed: "
            f"{exc}. The save is uncertain: it may or may not have been committed. Stop, fix "
            "the cause, and load the record again before continuing; never retry with the old "
            "revision"
        )

    def _head_is(self, revision: int) -> bool:
        """Whether ``revision`` is the stored head (inside the save's transaction)."""
        connection = self._connection
        if revision > 0:
            found = {
                base
                for (base,) in connection.execute(
                    f"SELECT base FROM {_DELTAS} WHERE run_id = ? AND base IN (?, ?)",
                    (self._run_id, str(revision - 1), str(revision)),
                )
            }
            if str(revision) in found:
                return False  # a save from this revision exists already
            if str(revision - 1) in found:
                return True  # the delta to this revision is the last one
        row = connection.execute(
            f"SELECT revision FROM {_TABLE} WHERE run_id = ?", (self._run_id,)
        ).fetchone()
        if revision == 0 or row is None:
            return revision == 0 and row is None
        return bool(row[0] == str(revision))

    def _has_deltas(self) -> bool:
        chain = self._chain
        return chain is not None and chain[2] > 0

    @contextlib.contextmanager
    def _folding(self) -> Iterator[None]:
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            raise

    def _write_folded(self, data: bytes, head: int) -> bool:
        if not self._head_is(head):
            return False
        self._connection.execute(_FOLD_ROW, (str(head), data, self._run_id))
        self._connection.execute(f"DELETE FROM {_DELTAS} WHERE run_id = ?", (self._run_id,))
        return True

    def _let_go(self, deadline: float | None) -> None:
        try:
            self._connection.close()
        finally:
            self._lock.release()


_WROTE_NOTHING = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_READONLY})
"""The primary result codes with which a statement that writes fails before it has written
anything: the write lock was not obtained, or the database cannot be written. Any other failure
of a save's statement may come from its commit: the save is uncertain."""

_APPEND = (
    f"INSERT OR IGNORE INTO {_DELTAS} (run_id, base, delta, saved_at) "
    f"SELECT ?1, ?2, ?3, {NOW} "
    f"WHERE EXISTS (SELECT 1 FROM {_DELTAS} WHERE run_id = ?1 AND base = ?4)"
)
"""The compare-and-swap of a save that keeps its delta, after a delta: insert the delta ``?3``
saved from revision ``?2`` when the delta from ``?4`` (the revision before) is stored; the primary
key ``(run_id, base)`` refuses a second save from the same revision. It never reads
``durable_runs``: finding a row of a ``WITHOUT ROWID`` table reads its whole record, which would
make every save cost as much as the run is large."""

_APPEND_FIRST = _APPEND + f" OR (SELECT revision FROM {_TABLE} WHERE run_id = ?1) = ?2"
""":data:`_APPEND` for the first delta after the complete record: it also inserts when that
record is at revision ``?2`` (deltas are only ever stored from the complete record's revision
on)."""


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
            f"inside it, e.g. {os.path.join(raw, 'durable.sqlite')!r}"
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
                "file there"
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
            "system"
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
            "another journal mode; the store does not start without them"
        )


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)


def _last_write(path: str) -> float:
    """When the database (or its write-ahead log) was last written: seconds since the epoch."""
    times = [os.stat(path).st_mtime]
    with contextlib.suppress(OSError):
        wal = os.stat(path + "-wal")
        if wal.st_size:
            times.append(wal.st_mtime)
    return max(times)


_FOLD_ROW = (
    f"UPDATE {_TABLE} SET revision = ?1, record = ?2, saved_at = coalesce("
    f"(SELECT max(saved_at) FROM {_DELTAS} WHERE run_id = ?3), saved_at) WHERE run_id = ?3"
)
"""Fold a run's deltas into its row: the complete record and its revision. A fold is no save:
the row keeps the time of the last delta it folds in."""


def _fold(
    revision: object, record: object, deltas: list[Any], location: str
) -> tuple[bytes | Folded, int, int]:
    """The complete record of a row and its deltas: (bytes, or the complete record with its
    deltas to fold, head revision, delta bytes).

    Raises:
        CorruptRecordError: the revision column, a delta row or the chain of deltas is not
            what Durable writes.
    """
    column = _revision(revision, location)
    if not isinstance(record, bytes):
        raise CorruptRecordError(
            f"the record of {location} is stored as {type(record).__name__}, not as JSON "
            "bytes (BLOB); it was left untouched"
        )
    if not deltas:
        return record, column, 0
    chain = sorted((_revision(base, location), delta) for base, delta in deltas)
    expected = column
    for base, delta in chain:
        if base != expected or not isinstance(delta, bytes):
            raise CorruptRecordError(
                f"the saved deltas of {location} do not follow each other from revision "
                f"{column} (found a delta from revision {base} where {expected} was due); "
                "the database was edited outside Durable. It was left untouched; keep it as "
                "evidence"
            )
        expected += 1
    # Folded when decoded (decode_stored reads the folded tree; a chain that does not fold
    # raises there, naming this place).
    folded = Folded(
        record, [delta for _, delta in chain], f"the record of {location} and its saved deltas"
    )
    return folded, expected, sum(len(delta) for _, delta in chain)


def _deltas_without_record(location: str, count: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{location} has {count} saved delta(s) but no complete record to apply them to; the "
        "database was edited outside Durable. It was left untouched; keep it as evidence"
    )


def _revision(text: object, location: str) -> int:
    if isinstance(text, str) and text.isascii() and text.isdigit() and not text.startswith("0"):
        value = int(text)
        if value <= MAX_REVISION:
            return value
    raise CorruptRecordError(
        f"the revision column of {location} holds {text!r}; a stored revision is a decimal "
        f"between 1 and {MAX_REVISION} without leading zeros. It was left untouched"
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
