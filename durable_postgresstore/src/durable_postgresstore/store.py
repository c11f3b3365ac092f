"""PostgresStore: runs in a shared PostgreSQL database, one advisory lock per owned run.

Seed 001 (the ``postgresstore`` paragraph); SPEC B-PG-1…3, R-STORE-1…5.

* **Schema** (B-PG-1): the constructor creates the dedicated schema ``pulse_durable`` if absent
  and checks it strictly (see :mod:`durable_postgresstore.schema`).
* **Ownership** (B-PG-1): ``acquire`` takes a session-level ``pg_try_advisory_lock`` keyed by
  :func:`~durable_postgresstore.keys.advisory_key` on a connection the session keeps until
  ``close``. A run id already held or being acquired in the same store raises ``BusyError`` at
  once, without touching the network; held elsewhere, ``BusyError`` right after the check.
* **Waiting** (B-PG-2): waiting for a free connection plus the network check take at most
  ``acquire_timeout`` (30 s by default), or the caller's shorter ``timeout``. When that runs out,
  ``AcquireTimeoutError``: ownership was not decided, never a false ``BusyError``.
* **Saving** (B-PG-3): each save is one short statement (its own transaction) doing the
  revision compare-and-swap on the lock-holding connection; a save with a delta adds it to
  ``pulse_durable.deltas`` in that statement, and the deltas are folded into the complete record
  (JSON in BYTEA) when they outgrow it and when a session that saved closes (a session that
  only read writes nothing, not even a fold of deltas a crash left). The same statement sets
  ``saved_at`` (and the first save ``created_at``) to the server's ``now()``. The save
  statements are prepared once per connection and then sent as their parameters alone, in one
  round trip; each returns only once the server reports the commit. Records the server
  compresses (past about 2 kB) are compressed with lz4 when the server has it and
  ``default_toast_compression`` is still the server's built-in default.
* **Failing closed**: a session whose connection is lost never reconnects; its ``load``/``save``
  raise :class:`~durable_postgresstore.errors.PostgresStoreError` (``connection_lost``). Before
  each operation the session looks at its socket (no round trip): one that the server or a TCP
  keepalive ended fails at once, with nothing sent.
* **Hosts that vanish** (X-HOST): every connection sets TCP keepalives on both ends (see
  :mod:`durable_postgresstore._keepalives`), so the server ends a vanished owner's session and
  frees its runs within about 25 s by default.
* **Foreign writes** (X-HOST): a session remembers its row's version (``xmin``) from its last
  load or save, and its saves match it: a row rewritten since by anyone else is never
  overwritten (:class:`~durable_postgresstore.errors.ForeignWriteError`).
* **Secrets** (B-PG-3): the DSN is never logged; error messages are scrubbed of its password.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from durable_core.errors import (
    AcquireTimeoutError,
    BusyError,
    CorruptRecordError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.records import RunRecord
from durable_core.records.delta import Folded
from durable_core.store import (
    Acquiring,
    BaseStore,
    Capability,
    EncodedRecord,
    FoldingSession,
    RunOwner,
    RunSummary,
    current_owner,
    decode_stored,
    owner_from_tag,
    owner_tag,
    sort_summaries,
    summary_of,
    validate_run_id,
)
from durable_core.store.deltas import FOLD_RATIO  # noqa: F401 (the kit's one fold policy)
from durable_core.store.history import check_entries
from durable_postgresstore import sql
from durable_postgresstore._connections import (
    Closed,
    Connections,
    Link,
    TimedOut,
    Watchdog,
    connect_timeout_for,
)
from durable_postgresstore._dsn import Dsn
from durable_postgresstore._keepalives import Keepalives, keepalives_from
from durable_postgresstore.errors import ForeignWriteError, PostgresStoreError
from durable_postgresstore.inbox import PostgresInbox
from durable_postgresstore.keys import advisory_key, history_key
from durable_postgresstore.schema import SCHEMA, ensure_schema

__all__ = [
    "CLOSE_TIMEOUT",
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_OPERATION_TIMEOUT",
    "PostgresSession",
    "PostgresStore",
]

logger = logging.getLogger("durable_postgresstore")

T = TypeVar("T")

DEFAULT_ACQUIRE_TIMEOUT = 30.0
"""Seconds ``acquire`` may wait for a connection plus the network check (B-PG-2)."""

DEFAULT_MAX_CONNECTIONS = 10
"""Connections a store may have open at once; each open session keeps one."""

DEFAULT_OPERATION_TIMEOUT = 60.0
"""Seconds one load, save or listing may take on the network before its connection is cut."""

CLOSE_TIMEOUT = 5.0
"""Seconds ``PostgresStore.close`` waits at most for unlocking and closing (B-PG-2)."""


def _positive_seconds(name: str, value: object, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, found {value!r}")
    seconds = float(value)
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, found {value!r}")
    return seconds


def _epoch(value: datetime.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _timestamp(seconds: float | None) -> datetime.datetime | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def _deltas_without_record(location: str, count: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"the {location} is missing, but {count} saved delta(s) of the run are in "
        f"{SCHEMA}.deltas with no record to apply them to; the database was edited outside "
        "Durable. It was left untouched, and a new run under this id is refused so that "
        "nothing saved is replaced; keep it as evidence"
    )


def _fold(record: bytes, deltas: list[tuple[int, bytes]], location: str) -> bytes | Folded:
    """A row's complete record: its record, or it with its deltas (ordered by base) to fold.

    Raises:
        CorruptRecordError: the deltas do not follow each other or do not apply.
    """
    if not deltas:
        return record
    for (base, _), (after, _) in itertools.pairwise(deltas):
        if after != base + 1:
            raise CorruptRecordError(
                f"the saved deltas of the {location} do not follow each other (revision {base} "
                f"then {after}); they were edited outside Durable. Keep them as evidence"
            )
    # Folded when decoded (decode_stored reads the folded tree; a chain that does not fold
    # raises there, naming this place).
    return Folded(
        record, [delta for _, delta in deltas], f"the record of the {location} and its saved deltas"
    )


class PostgresStore(PostgresInbox, BaseStore):
    """A :class:`~durable_core.store.Store` in a shared PostgreSQL database (B-PG-1…3).

    Several processes and hosts may use the same database: each run is owned by at most one
    session at a time, through a session-level advisory lock. There is no fencing token and no
    dispatch: the store decides who owns a run, not which host should run it.

    Thread-safe: any thread may acquire, list and close; a session may be used from any thread
    (its calls are serialized).

    Args:
        dsn: a libpq connection string or ``postgresql://`` URI. The password in it is never
            logged or shown in messages. Must reach PostgreSQL directly or through a pooler in
            *session* mode (advisory locks belong to a server session).
        acquire_timeout: seconds (> 0) ``acquire`` may wait for a free connection plus the
            network check; also bounds the constructor's connection and schema check and
            ``list_runs``' wait for a connection. A caller's shorter ``timeout`` wins (B-PG-2).
        max_connections: the most connections (>= 1) this store opens at once. Each open session
            keeps one for its whole life; ``list_runs`` and ``acquire`` use one briefly.
        operation_timeout: seconds (> 0) a single load, save or listing may take on the network;
            past it the connection is cut (so a session loses its run, see
            :class:`PostgresSession`). ``None``: no limit.
        application_name: shown in ``pg_stat_activity`` unless the DSN sets its own.
        keepalives: ``False`` sets no TCP keepalives (the operating system's defaults, about
            two hours, then decide when a vanished host's runs are free). ``None``: on, unless
            the DSN says ``keepalives=0``.
        keepalives_idle: seconds (>= 1, whole) a connection may be silent before the first
            keepalive probe, on the server and the client; default 10.
        keepalives_interval: seconds (>= 1, whole) between unanswered probes; default 5.
        keepalives_count: unanswered probes (>= 1) after which the peer is gone; default 3.
        tcp_user_timeout: seconds (>= 0) sent data may stay unacknowledged before the
            connection is dropped; ``0`` leaves the system default; default 25.
            For each of these four, ``None`` takes the DSN's libpq parameter of the same name
            when it has one (its ``tcp_user_timeout`` is in milliseconds), else the default.

    Raises:
        ConfigError: ``dsn`` is not a valid connection string, or a keepalive option (given or
            in the DSN) has the wrong type or range.
        TypeError, ValueError: a numeric argument has the wrong type or range.
        AcquireTimeoutError: the database could not be reached within ``acquire_timeout``.
        PostgresStoreError: connecting or creating the schema failed (wrong password, no
            privilege …); the message names host, port, database and user, never the password.
        SchemaError: ``pulse_durable`` exists but is not exactly Durable's schema.
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

    def __init__(
        self,
        dsn: str,
        *,
        acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        operation_timeout: float | None = DEFAULT_OPERATION_TIMEOUT,
        application_name: str = "durable",
        keepalives: bool | None = None,
        keepalives_idle: float | None = None,
        keepalives_interval: float | None = None,
        keepalives_count: int | None = None,
        tcp_user_timeout: float | None = None,
    ) -> None:
        self._dsn = Dsn(dsn)
        given = {
            name: value
            for name, value in (
                ("keepalives", keepalives),
                ("idle", keepalives_idle),
                ("interval", keepalives_interval),
                ("count", keepalives_count),
                ("user_timeout", tcp_user_timeout),
            )
            if value is not None
        }
        self._keepalives = keepalives_from(self._dsn.get, **given)
        self._acquire_timeout = _positive_seconds("acquire_timeout", acquire_timeout)
        self._operation_timeout = _positive_seconds(
            "operation_timeout", operation_timeout, allow_none=True
        )
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise TypeError(f"max_connections must be an int, found {max_connections!r}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, found {max_connections}")
        if not isinstance(application_name, str):
            raise TypeError(f"application_name must be a str, found {application_name!r}")
        self._max_connections = max_connections
        self._application_name = application_name
        super().__init__()
        self._close_by = 0.0
        self._watchdog = Watchdog("durable-postgres-watchdog")
        self._connections = Connections(self._connect, max_connections, "durable-postgres")
        assert self._acquire_timeout is not None
        try:
            self._on_link(
                f"creating and checking Durable's schema `{SCHEMA}`",
                ensure_schema,
                capacity_timeout=self._acquire_timeout,
                operation_timeout=self._acquire_timeout,
            )
        except BaseException:
            self._connections.close()
            self._watchdog.stop()
            raise

    # -- public API ----------------------------------------------------------------------------

    @property
    def acquire_timeout(self) -> float:
        """The longest wait of ``acquire`` in seconds (B-PG-2)."""
        assert self._acquire_timeout is not None
        return self._acquire_timeout

    @property
    def max_connections(self) -> int:
        """The most connections this store opens at once."""
        return self._max_connections

    @property
    def keepalives(self) -> Keepalives | None:
        """The TCP keepalives every connection sets on both ends; ``None`` when off (X-HOST)."""
        return self._keepalives

    def acquire(self, run_id: str, timeout: float | None = None) -> PostgresSession:
        """Take exclusive ownership of ``run_id`` and return its session (R-STORE-1, B-PG-1).

        Args:
            run_id: the run's id (a non-empty string of valid Unicode).
            timeout: seconds to wait at most for a free connection plus the network check;
                ``None`` or a longer value uses ``acquire_timeout`` (30 s by default). Never used
                to wait for another owner.

        Returns:
            The run's :class:`PostgresSession`, holding the run's advisory lock.

        Raises:
            BusyError: this store already holds or is acquiring ``run_id`` (at once, without
                touching the network); or another store, process or host holds its lock (right
                after the check, never waiting for release).
            AcquireTimeoutError: no connection came free, or the server did not answer, in time:
                ownership was not decided (the run may or may not be owned elsewhere).
            PostgresStoreError: connecting or the lock query failed.
            SessionClosedError: the store was closed (before or during the call).
            CorruptRecordError: ``run_id`` is not a valid run id.
            ValueError: ``timeout`` is negative or not a number.
        """
        session: PostgresSession = super().acquire(run_id, timeout)
        return session

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every stored run, without taking ownership (RunLister).

        Each record is decoded (rows are streamed, not held all at once). A row whose record
        cannot be decoded, names another run, or disagrees with its revision column, is listed
        with ``error`` set, never skipped; readable runs come first, sorted by run id.

        Raises:
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            PostgresStoreError: the table cannot be read.
            SessionClosedError: the store was closed.
        """

        def scan(conn: psycopg.Connection[Any]) -> list[RunSummary]:
            deltas: dict[bytes, list[tuple[int, bytes]]] = {}
            with conn.transaction():  # one snapshot of the records and their deltas
                for key, base, delta in conn.execute(sql.ALL_DELTAS):
                    deltas.setdefault(bytes(key), []).append((int(base), bytes(delta)))
                summaries = []
                for raw_id, revision, data, key in conn.cursor().stream(sql.LIST):
                    summaries.append(
                        self._summary(
                            bytes(raw_id), int(revision), bytes(data), deltas.get(bytes(key), [])
                        )
                    )
            return summaries

        summaries = self._on_link(
            "listing runs",
            scan,
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )
        return sort_summaries(summaries)

    def peek(self, run_id: str) -> RunRecord:
        """The last committed record of ``run_id``: a plain SELECT, without the run's advisory
        lock (RecordPeeker). Never writes; a running run's owner may have saved a newer
        revision by the time it is shown.

        Raises:
            NotFoundError: no row for the run.
            CorruptRecordError: the row is not a record of this run.
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            SessionClosedError: the store was closed.
        """
        validate_run_id(run_id)
        key = hashlib.sha256(run_id.encode("utf-8")).digest()

        def read(conn: psycopg.Connection[Any]) -> Any:
            with conn.transaction():  # one snapshot of the row and its deltas
                row = conn.execute(sql.SELECT, [key]).fetchone()
                deltas = conn.execute(sql.DELTAS, [key]).fetchall()
            return row, deltas

        row, deltas = self._on_link(
            "reading a record",
            read,
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )
        location = self._location(run_id)
        if row is None:
            if deltas:
                raise _deltas_without_record(location, len(deltas))
            raise NotFoundError(f"no record of run {run_id!r} in {location}")
        chain = [(int(base), bytes(delta)) for base, delta in deltas]
        return decode_stored(run_id, _fold(bytes(row[1]), chain, location), location, int(row[0]))

    def saved_at(self, run_id: str) -> float | None:
        """When ``run_id`` was last saved, by the server's clock (seconds since the epoch);
        ``None`` when it has no row or the time is unknown (SaveTimes). A plain SELECT, without
        the run's advisory lock.

        Raises:
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            PostgresStoreError: the row cannot be read.
            SessionClosedError: the store was closed.
        """
        return self._times(run_id)[1]

    def created_at(self, run_id: str) -> float | None:
        """When ``run_id``'s first record was saved, by the server's clock (seconds since the
        epoch); ``None`` when it has no row or was saved before the store kept the time
        (CreateTimes). A plain SELECT, without the run's advisory lock.

        Raises:
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            PostgresStoreError: the row cannot be read.
            SessionClosedError: the store was closed.
        """
        return self._times(run_id)[0]

    def _times(self, run_id: str) -> tuple[float | None, float | None]:
        validate_run_id(run_id)
        key = hashlib.sha256(run_id.encode("utf-8")).digest()
        row = self._on_link(
            "reading when a run was saved",
            lambda conn: conn.execute(sql.TIMES, [key]).fetchone(),
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )
        if row is None:
            return None, None
        return _epoch(row[0]), _epoch(row[1])

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append ``entries`` to the history of ``run_id``'s run ``root_scope``: rows of
        ``pulse_durable.history`` numbered after the run's last one, in one transaction under
        a transaction-level advisory lock of the run's history (never the run's own lock), so
        appenders on any host number them one after the other (RunHistory). Uses a connection
        of the store's set briefly; never touches the run's row.

        Raises:
            ValueError: an entry is not one line, or ``root_scope`` is not a non-empty line.
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            PostgresStoreError: the rows could not be written (none were).
            SessionClosedError: the store was closed.
        """
        validate_run_id(run_id)
        check_entries(root_scope, entries)
        if not entries:
            return
        key = hashlib.sha256(run_id.encode("utf-8")).digest()
        lock = history_key(run_id)

        def append(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(sql.HISTORY_LOCK, [lock])
                conn.execute(sql.HISTORY_APPEND, [key, key, root_scope, list(entries)])

        self._on_link(
            "appending to a run's history",
            append,
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The history of ``run_id``'s run ``root_scope``, oldest first: a plain SELECT,
        without the run's advisory lock (RunHistory).

        Raises:
            AcquireTimeoutError: no connection came free within ``acquire_timeout``.
            PostgresStoreError: the rows cannot be read.
            SessionClosedError: the store was closed.
        """
        validate_run_id(run_id)
        key = hashlib.sha256(run_id.encode("utf-8")).digest()
        rows = self._on_link(
            "reading a run's history",
            lambda conn: conn.execute(sql.HISTORY_READ, [key, root_scope]).fetchall(),
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )
        return [row[0] for row in rows]

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop, from any host: a notification on the channel
        ``durable_cancel`` carrying the run's key, which the owner listens for
        (CancelRequests). Nothing is stored: an owner that is not listening never sees it.
        """
        validate_run_id(run_id)
        payload = hashlib.sha256(run_id.encode("utf-8")).hexdigest()
        self._on_link(
            "asking a run to stop",
            lambda conn: conn.execute(sql.NOTIFY, [sql.CANCEL_CHANNEL, payload]),
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )

    def watch_cancel(self, run_id: str, on_request: Any) -> Any:
        """Listen for stop requests of ``run_id`` on a connection of its own, in a daemon
        thread, until the returned function is called (CancelRequests)."""
        import threading

        payload = hashlib.sha256(run_id.encode("utf-8")).hexdigest()
        conn = self._connect()
        conn.execute(sql.LISTEN)
        stop = threading.Event()

        def listen() -> None:
            try:
                while not stop.is_set():
                    for note in conn.notifies(timeout=0.2):
                        if note.payload == payload:
                            on_request()
            except psycopg.Error:
                logger.warning("PostgresStore: the stop-request listener of %r ended", run_id)

        thread = threading.Thread(target=listen, name="durable-cancel-listen", daemon=True)
        thread.start()

        def stop_listening() -> None:
            stop.set()
            thread.join()
            conn.close()

        return stop_listening

    def close(self) -> None:
        """Close the store: cancel pending acquires, close open sessions, close connections.

        Pending ``acquire`` calls raise ``SessionClosedError``. Each open session's lock is
        released with ``pg_advisory_unlock``; when that fails or its result is uncertain, the
        connection is destroyed (the server then releases the lock itself). Cleanup waits at
        most 5 s (:data:`CLOSE_TIMEOUT`). Later calls do nothing.
        """
        super().close()

    def _closing(self) -> None:
        self._close_by = time.monotonic() + CLOSE_TIMEOUT
        self._connections.close()

    def _close_deadline(self) -> float | None:
        return self._close_by

    def _close_medium(self, deadline: float | None) -> None:
        if not self._connections.wait_empty(self._close_by):
            logger.warning(
                "PostgresStore.close: %d connection(s) still closing after %.0f s",
                self._connections.size,
                CLOSE_TIMEOUT,
            )
        self._watchdog.stop()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<PostgresStore {self._dsn.describe()} schema={SCHEMA} {state}>"

    # -- internals ------------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        options: dict[str, Any] = {"autocommit": True}
        if self._dsn.get("connect_timeout") is None:
            options["connect_timeout"] = connect_timeout_for(self.acquire_timeout)
        if self._dsn.get("application_name") is None and self._application_name:
            options["application_name"] = self._application_name
        keepalives = self._keepalives
        if keepalives is not None:
            options.update(keepalives.libpq())
        conn = psycopg.Connection.connect(self._dsn.conninfo, **options)
        try:
            if keepalives is not None:
                conn.execute(sql.KEEPALIVES, keepalives.server())
            conn.execute(sql.TOAST_COMPRESSION)
        except BaseException:
            conn.close()
            raise
        return conn

    def _location(self, run_id: str) -> str:
        return f"{SCHEMA}.runs row of run {run_id!r} ({self._dsn.describe()})"

    def _summary(
        self, raw_id: bytes, revision: int, data: bytes, deltas: list[tuple[int, bytes]]
    ) -> RunSummary:
        try:
            run_id = raw_id.decode("utf-8")
        except UnicodeDecodeError:
            return RunSummary(
                run_id="",
                format=0,
                revision=0,
                location=f"{SCHEMA}.runs row with run_id bytes {raw_id.hex()}",
                error="CorruptRecordError: the run_id column is not valid UTF-8; the row was "
                "written outside Durable",
            )
        location = self._location(run_id)
        return summary_of(
            location,
            lambda: decode_stored(run_id, _fold(data, deltas, location), location, revision),
            run_id,
        )

    def _wrap(
        self,
        error: BaseException,
        doing: str,
        *,
        lost: bool = False,
        note: str = "",
        uncertain: bool = False,
    ) -> PostgresStoreError:
        """A scrubbed :class:`PostgresStoreError` for a psycopg error; raise it outside ``except``
        so that the psycopg exception (whose text may quote the DSN) is not chained."""
        text = self._dsn.scrub(" ".join(str(error).split()))
        message = (
            f"{doing} failed on PostgreSQL ({self._dsn.describe()}): {type(error).__name__}: {text}"
        )
        if note:
            message += f". {note}"
        return PostgresStoreError(
            message,
            sqlstate=getattr(error, "sqlstate", None),
            connection_lost=lost,
            uncertain=uncertain,
        )

    def _take(self, deadline: float, doing: str, budget: float) -> tuple[Link, bool]:
        failure: BaseException | None = None
        try:
            return self._connections.take(deadline)
        except TimedOut:
            failure = AcquireTimeoutError(
                f"{doing}: no PostgreSQL connection could be had within {budget:g} s "
                f"({self._connections.size} of max_connections={self._max_connections} open, "
                f"server {self._dsn.describe()}). Ownership was not decided: this does not mean "
                "the run is busy. Close unused sessions, raise max_connections, or "
                "check that the server answers"
            )
        except Closed:
            failure = SessionClosedError("this PostgresStore was closed; create a new store")
        except psycopg.Error as exc:
            failure = self._wrap(exc, f"connecting ({doing})")
        raise failure

    def _guard(self, link: Link, seconds: float | None, deadline: float | None = None) -> Any:
        if deadline is None:
            if seconds is None:
                return None
            deadline = time.monotonic() + seconds
        return self._watchdog.schedule(deadline, link.cut)

    def _guarded(
        self, link: Link, seconds: float | None, fn: Callable[[psycopg.Connection[Any]], T]
    ) -> tuple[Any, psycopg.Error | None, bool]:
        """Run ``fn`` on ``link``, cutting it past ``seconds``: (result, error, cut in time)."""
        alarm = self._guard(link, seconds)
        result: Any = None
        error: psycopg.Error | None = None
        try:
            result = fn(link.conn)
        except psycopg.Error as exc:
            error = exc
        finally:
            fired = alarm.cancel() if alarm is not None else False
        return result, error, fired

    def _on_link(
        self,
        doing: str,
        fn: Callable[[psycopg.Connection[Any]], T],
        *,
        capacity_timeout: float,
        operation_timeout: float | None,
    ) -> T:
        """Run ``fn`` on a connection of the set (not a session's), then give it back.

        A reused idle connection that turns out dead (server restart) is replaced once.
        """
        deadline = time.monotonic() + capacity_timeout
        while True:
            link, reused = self._take(deadline, doing, capacity_timeout)
            try:
                result, error, fired = self._guarded(link, operation_timeout, fn)
            finally:
                self._connections.give_back(link)
            if error is None:
                return result
            if fired:
                raise AcquireTimeoutError(
                    f"{doing}: PostgreSQL ({self._dsn.describe()}) did not answer within "
                    f"{operation_timeout:g} s; the connection was closed"
                )
            if not (reused and isinstance(error, psycopg.OperationalError) and link.closed):
                raise self._wrap(error, doing)

    def _open_session(
        self, run_id: str, timeout: float | None, pending: Acquiring
    ) -> PostgresSession:
        budget = self.acquire_timeout if timeout is None else min(timeout, self.acquire_timeout)
        deadline = time.monotonic() + budget
        key = advisory_key(run_id)
        doing = f"acquiring run {run_id!r}"
        while True:
            link, reused = self._take(deadline, doing, budget)
            with self._state_lock:
                pending.cancel = link.cut
                closed = self._closed
            error: psycopg.Error | None = None
            fired = False
            got = False
            if not closed:
                alarm = self._guard(link, None, deadline)
                try:
                    tag = owner_tag(self._owner_base(), current_owner())
                    row = link.conn.execute(sql.LOCK, [tag, key]).fetchone()
                    got = bool(row and row[0])
                except psycopg.Error as exc:
                    error = exc
                finally:
                    fired = alarm.cancel()
            with self._state_lock:
                pending.cancel = None
                closed = self._closed
            if not (closed or fired or error is not None) and got:
                return PostgresSession(self, run_id, key, link)
            if closed or fired or error is not None:
                # The lock's state is unknown (or the store is closing): destroy the connection,
                # whose server session then releases whatever it held.
                self._connections.discard(link)
                if closed:
                    raise SessionClosedError(
                        f"{doing}: this PostgresStore was closed meanwhile; create a new store"
                    )
                if fired:
                    raise AcquireTimeoutError(
                        f"{doing}: PostgreSQL ({self._dsn.describe()}) did not answer the "
                        f"ownership check within {budget:g} s. Ownership was not decided: this "
                        "does not mean the run is busy"
                    )
                assert error is not None
                stale = reused and isinstance(error, psycopg.OperationalError)
                if stale and time.monotonic() < deadline:
                    # An idle connection went stale (server restart, idle timeout): a fresh
                    # one decides.
                    continue
                raise self._wrap(error, doing)
            owner = self._owner_of(link, key, deadline)
            if owner is None:
                who = "another store, process or host, which the server could not name,"
            else:
                who = owner.describe() + ","
            raise BusyError(
                f"run {run_id!r} is owned by another session: {who} holds its PostgreSQL "
                f"advisory lock (key {key}) on {self._dsn.describe()}. Durable does not wait "
                "for the owner; let it finish or stop it (pg_locks and pg_stat_activity show "
                "it, see durable_postgresstore.keys)",
                owner=owner,
            )

    def _owner_base(self) -> str:
        """The application_name the store's connections start with, to keep in the tag."""
        return self._dsn.get("application_name") or self._application_name or "durable"

    def _owner_of(self, link: Link, key: int, deadline: float) -> RunOwner | None:
        """Who holds advisory lock ``key`` (pg_locks joined with pg_stat_activity), then give
        ``link`` back; ``None`` when the server cannot tell in time.

        The pid, host and time come from the owner's ``application_name`` (set when it took the
        lock, see :func:`~durable_core.store.owner.owner_tag`); the backend pid and client
        address go into ``detail``. Never raises: not naming the owner is no reason to fail.
        """
        alarm = self._guard(link, None, deadline)
        row = None
        failed = False
        try:
            row = link.conn.execute(sql.OWNER, [key]).fetchone()
        except psycopg.Error:
            failed = True
        finally:
            fired = alarm.cancel()
        if failed or fired:
            self._connections.discard(link)
        else:
            self._connections.give_back(link)
        if row is None:
            return None
        backend_pid, application_name, client_addr, client_hostname = row
        client = client_hostname or client_addr
        detail = f"PostgreSQL backend pid {backend_pid}"
        if client:
            detail += f", client {client}"
        elif backend_pid is not None:
            detail += ", a local connection"
        named = owner_from_tag(application_name)
        if named is None:
            if application_name:
                detail += f", application_name {application_name!r}"
            return RunOwner(detail=detail)
        return RunOwner(pid=named.pid, host=named.host, since=named.since, detail=detail)

    def _unlock(self, session: PostgresSession, link: Link, deadline: float) -> None:
        """Unlock the session's run and hand its connection back (or destroy it)."""
        alarm = self._guard(link, None, deadline)
        unlocked = False
        try:
            row = link.conn.execute(sql.UNLOCK, [session._key]).fetchone()
            unlocked = bool(row and row[0])
        except psycopg.Error as exc:
            logger.warning(
                "unlocking run %r failed (%s); closing its connection so the server releases "
                "the lock",
                session.run_id,
                type(exc).__name__,
            )
        finally:
            fired = alarm.cancel()
        if unlocked and not fired:
            self._connections.give_back(link)
        else:
            self._connections.discard(link)


class PostgresSession(FoldingSession):
    """Exclusive ownership of one run, holding its advisory lock (R-STORE-2…4, B-PG-1).

    Created by :meth:`PostgresStore.acquire`. The session keeps one connection, on which the
    lock lives, until ``close``; every load and save runs on that connection, so a save can
    only succeed while the lock is held. Usable as a context manager.

    A save is one statement, its own short transaction: ``INSERT … ON CONFLICT DO NOTHING``
    for the first save (``expected_revision == 0``), else the revision's ``UPDATE … WHERE
    revision = expected`` together with the save's delta (or the complete record when no delta
    is known or the deltas have outgrown the record); ``close`` folds the deltas when this
    session saved, so that the run rests as one complete record (a session that only loaded
    writes nothing). A failed statement may still have been committed (R-RT-2):
    load again. Every save also matches the row version (``xmin``) the session's last load or
    save of that revision left, so a row rewritten since by anything else is never overwritten:
    :class:`~durable_postgresstore.errors.ForeignWriteError` (X-HOST).

    When the connection is lost (server restart, ``pg_terminate_backend``, network failure, an
    operation past ``operation_timeout``), the server has released the lock: the failing call
    and every later ``load``/``save`` raise
    :class:`~durable_postgresstore.errors.PostgresStoreError` with ``connection_lost`` set. The
    session never reconnects; acquire the run again (another owner may have taken it).
    """

    capabilities = FoldingSession.capabilities | {Capability.IDLE_SAVES}
    """A save never uses an event loop: the runtime may call it on its event loop's thread
    while no body runs (it then waits for the save anyway)."""

    def __init__(self, store: PostgresStore, run_id: str, key: int, link: Link) -> None:
        super().__init__(store, run_id, store._location(run_id))
        self._pg = store
        self._key = key
        self._link = link
        self._row_id = run_id.encode("utf-8")
        self._row_key = hashlib.sha256(self._row_id).digest()
        self._lost = False
        # (size of the complete record, number of deltas after it, their bytes) as known to
        # this session, or None when it does not know what is stored.
        self._chain: tuple[int, int, int] | None = None
        self._read_chain: tuple[int, int, int] | None = None
        # (revision, row version: xmin as text) after this session's last load or save, or
        # None when it knows none: a save from that revision writes only while the row still
        # has that version (X-HOST).
        self._version: tuple[int, str] | None = None
        self._read_version: tuple[int, str] | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "lost" if self._lost else "open"
        return f"<PostgresSession run_id={self._run_id!r} {state}>"

    def delete(self) -> None:
        """Delete the run's row while holding its advisory lock, then close the session
        (RunDeleter). The advisory lock is not a row: nothing else is left behind.

        Raises:
            NotFoundError: the run has no row (nothing removed).
            SessionClosedError: the session was closed.
            PostgresStoreError: the delete failed; ``uncertain`` when the connection was lost
                while it ran.
        """
        with self._mutex:
            self._check_open()
            deleted = self._execute(
                "deleting",
                lambda conn: conn.execute(sql.DELETE, [self._row_key]).fetchone()[0],
                writes=True,
            )
            self._chain = None
            if deleted != 1:
                raise self._not_found()
        self.close()

    def restore_times(self, created_at: float | None, saved_at: float | None) -> None:
        """Set when the run was created and last saved (seconds since the epoch), for a copied
        run (TimesRestorer): ``created_at`` as given (``None``: unknown), ``saved_at`` unless
        ``None``.

        Raises:
            NotFoundError: the run has no row.
            SessionClosedError: the session was closed.
            PostgresStoreError: the update failed; ``uncertain`` when the connection was lost
                while it ran.
        """
        with self._mutex:
            self._check_open()
            row = self._execute(
                "setting the times of",
                lambda conn: conn.execute(
                    sql.SET_TIMES, [_timestamp(created_at), _timestamp(saved_at), self._row_key]
                ).fetchone(),
                writes=True,
            )
            if row is None:
                raise self._not_found()
            if self._version is not None:  # this session's own write
                self._version = (self._version[0], row[0])

    # -- the medium (called with the session's mutex held) ------------------------------------

    def _check_open(self) -> None:
        super()._check_open()
        if self._lost:
            raise PostgresStoreError(
                f"the session of run {self._run_id!r} lost its PostgreSQL connection and "
                "with it the run's lock; it never reconnects. Close it and acquire the run "
                "again (another owner may have taken it meanwhile)",
                connection_lost=True,
            )

    def _read(self) -> tuple[bytes | Folded, int | None] | None:
        def read(conn: psycopg.Connection[Any]) -> Any:
            # Binary results: the record comes as its bytes, not as hex text twice its size.
            key = [self._row_key]
            row = conn.execute(sql.SELECT, key, binary=True).fetchone()
            if row is None:  # deltas alone are no run (never "no record"): is there any?
                return None, conn.execute(sql.HAS_DELTAS, key).fetchone()[0]
            return row, conn.execute(sql.DELTAS, key, binary=True).fetchall()

        row, deltas = self._execute("loading", read)
        self._read_chain = None
        self._read_version = None
        if row is None:
            if deltas:
                raise _deltas_without_record(self._location, deltas)
            return None
        record = bytes(row[1])
        chain = [(int(base), bytes(delta)) for base, delta in deltas]
        self._read_chain = (len(record), len(chain), sum(len(d) for _, d in chain))
        self._read_version = (int(row[0]), row[2])
        return _fold(record, chain, self._location), int(row[0])

    def _decoded(self, revision: int) -> None:
        self._chain = self._read_chain
        self._version = self._read_version

    def _stored_revision(self) -> int:
        row = self._execute(
            "saving", lambda conn: conn.execute(sql.REVISION, [self._row_key]).fetchone()
        )
        return 0 if row is None else int(row[0])

    def _write(self, record: RunRecord, expected_revision: int, encoded: EncodedRecord) -> bool:
        revision = record.revision
        fmt = record.format
        chain = self._chain
        # Unknown what is stored, or the deltas outgrew the record: write it whole.
        delta = self._delta_to_keep(
            encoded,
            expected_revision,
            None if chain is None else chain[0],
            0 if chain is None else chain[2],
        )
        data = encoded.data if delta is None else b""

        # The row version this save expects: the one this session's last load or save of
        # that revision left (none known: the stored revision decides alone).
        known = self._version
        version = known[1] if known is not None and known[0] == expected_revision else None

        def cas(conn: psycopg.Connection[Any]) -> str | None:
            # A prepared statement with its parameters as they go on the wire (numbers and the
            # version as text, bytes as binary). Returns the row's new version, or None when
            # nothing was written.
            new = b"%d" % revision
            if expected_revision == 0:
                result = self._link.run(
                    sql.SAVE_INSERT, [self._row_id, new, b"%d" % fmt, data, self._row_key]
                )
            else:
                expected = b"%d" % expected_revision
                known = None if version is None else version.encode("ascii")
                if delta is not None:
                    params = [new, self._row_key, expected, known, expected, delta]
                    result = self._link.run(sql.SAVE_APPEND, params)
                else:
                    params = [new, b"%d" % fmt, data, self._row_key, expected, known]
                    result = self._link.run(sql.SAVE_UPDATE, params)
            if not result.ntuples:
                return None
            value = result.get_value(0, 0)
            return None if value is None else value.decode("ascii")

        self._chain = None  # unknown until the statement is known to have committed
        written = self._execute("saving", cas, writes=True)
        if written is not None:
            self._version = (revision, written)
            if delta is None:
                self._chain = (len(data), 0, 0)
            elif chain is not None:
                self._chain = (chain[0], chain[1] + 1, chain[2] + len(delta))
            return True
        self._chain = chain
        if version is not None:
            self._refuse_foreign_write(expected_revision, version)
        return False

    def _refuse_foreign_write(self, expected_revision: int, version: str) -> None:
        """After a save that wrote nothing: raise :class:`ForeignWriteError` when the row still
        has the expected revision but not the version this session left (X-HOST); return when
        the revision moved or the row is gone (an ordinary conflict)."""
        row = self._execute(
            "saving", lambda conn: conn.execute(sql.ROW_VERSION, [self._row_key]).fetchone()
        )
        if row is None or int(row[0]) != expected_revision or row[1] == version:
            return
        raise ForeignWriteError(
            f"run {self._run_id!r}: its row in {self._location} was rewritten by something "
            f"other than this session since it loaded or saved revision {expected_revision} "
            "(the revision is unchanged, the row version is not: an UPDATE made outside "
            "Durable, a restore of the table, or a writer that bypassed the run's lock). "
            "Nothing was written, and the row is as that writer left it. Close this session, "
            "find out who changed the row, and load the run again before deciding anything",
            revision=expected_revision,
        )

    def _has_deltas(self) -> bool:
        return self._chain is not None and self._chain[1] > 0

    def _write_folded(self, data: bytes, head: int) -> bool:
        # The statement writes ``data`` only while the stored head is ``head`` and, when this
        # session's last save was that head, the row still has the version it left (X-HOST).
        version = self._version[1] if self._version and self._version[0] == head else None
        row = self._execute(
            "folding",
            lambda conn: conn.execute(sql.FOLD, [data, self._row_key, head, version]).fetchone(),
            writes=True,
        )
        return bool(row and row[0] == 1)

    def _not_found(self) -> BaseException:
        return NotFoundError(
            f"run {self._run_id!r} has no record in {SCHEMA}.runs "
            f"({self._pg._dsn.describe()}); check the database and the run id. A missing "
            "record never means the run finished"
        )

    def _may_fold(self) -> bool:
        return not self._lost

    def _let_go(self, deadline: float | None) -> None:
        if self._lost:
            return  # the link was discarded; the server released the lock with it
        if deadline is None:
            deadline = time.monotonic() + CLOSE_TIMEOUT
        self._pg._unlock(self, self._link, deadline)

    def _abort(self) -> None:
        # An operation is stuck on the network: cut it; its thread then drops the link.
        self._link.cut()

    def _execute(
        self, doing: str, fn: Callable[[psycopg.Connection[Any]], T], *, writes: bool = False
    ) -> T:
        """Run ``fn`` on the session's connection; ``writes``: ``fn`` may change the row, so
        a connection lost while it ran leaves its effect unknown (``uncertain``)."""
        link = self._link
        store = self._pg
        gone = link.gone()
        if gone is not None:
            # Found before sending anything: the server (or the network) ended the session, and
            # its advisory lock with it. Nothing of this call was written.
            self._lost = True
            store._connections.discard(link)
            store._forget(self)
            raise PostgresStoreError(
                f"{doing} run {self._run_id!r} was not attempted: the session's PostgreSQL "
                f"connection ({store._dsn.describe()}) is gone ({gone}). The server released "
                "the run's lock with it, so another owner may have taken the run; nothing of "
                "this call was sent. This session never reconnects: close it and acquire the "
                "run again",
                connection_lost=True,
            )
        result, error, fired = store._guarded(link, store._operation_timeout, fn)
        lost = fired or not link.healthy()
        if lost:
            self._lost = True
            store._connections.discard(link)
            store._forget(self)
        if error is None:
            return result
        doing = f"{doing} run {self._run_id!r}"
        note = ""
        if lost:
            if fired:
                note = (
                    f"It ran past operation_timeout={store._operation_timeout:g} s and its "
                    "connection was cut"
                )
            else:
                note = "The connection is lost"
            note += (
                "; the run's lock goes with the server session, and this session never "
                "reconnects: acquire the run again"
            )
            if writes and doing.startswith("saving"):
                note += ". The save may or may not have been written: load it again"
            elif writes:
                note += ". It may or may not have taken effect: load the run again"
        raise store._wrap(error, doing, lost=lost, note=note, uncertain=lost and writes)
