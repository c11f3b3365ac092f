"""The Store and Session contract (seed 000 "Store 与 Session"; SPEC R-STORE-1…5, R-RT-1…3).

A :class:`Store` hands out one exclusive :class:`Session` per run id. The session loads and saves
the run's single :class:`~durable_core.records.RunRecord` by compare-and-swap on its revision.
A backend that can only overwrite without CAS is not a Store (R-STORE-5).

Stores that can enumerate their runs also implement :class:`RunLister` (``list_runs``).

This module also holds :class:`MemoryStore` (B-MEM) and the checks every backend shares
(:func:`validate_run_id`, :func:`validate_save`, :func:`validate_loaded`), so that all stores
refuse the same inputs with the same errors. The conformance kit in :mod:`durable_core.testing`
proves a backend keeps this contract.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import attrs

from durable_core.errors import (
    BusyError,
    ConflictError,
    CorruptRecordError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.recorddelta import apply_delta
from durable_core.recordjson import record_from_json, record_to_json
from durable_core.records import RunRecord

__all__ = [
    "MAX_REVISION",
    "EncodedRecord",
    "MemoryStore",
    "RunLister",
    "RunSummary",
    "Session",
    "Store",
    "sort_summaries",
    "validate_loaded",
    "validate_run_id",
    "validate_save",
    "validate_timeout",
]

MAX_REVISION = 2**64 - 1
"""Revisions are uint64 (R-STORE-3): a save that would pass this raises ``ConflictError``."""


class EncodedRecord:
    """The caller's encoding of exactly the record passed to ``Session.save`` with it.

    Args:
        data: the complete canonical JSON bytes (equal to ``record_to_json(record)``), or a
            callable returning them; a callable is called on the first access of :attr:`data`
            only, so a store that writes only :attr:`delta` never pays for the whole record.
        delta: optional: the change against the record stored at the save's expected
            revision, as :mod:`durable_core.recorddelta` bytes; ``None`` when not known (the
            first save, or a caller that does not track changes).
    """

    __slots__ = ("_data", "_lock", "delta")

    def __init__(self, data: bytes | Callable[[], bytes], delta: bytes | None = None) -> None:
        self._data = data
        self._lock = threading.Lock()
        self.delta = delta

    @property
    def data(self) -> bytes:
        """The complete record's canonical JSON bytes (computed once, on first access)."""
        data = self._data
        if callable(data):
            with self._lock:
                data = self._data
                if callable(data):
                    data = self._data = data()
        return data  # type: ignore[return-value]

    def __repr__(self) -> str:
        data = "<not encoded yet>" if callable(self._data) else f"{len(self._data)} bytes"
        delta = "None" if self.delta is None else f"{len(self.delta)} bytes"
        return f"EncodedRecord(data={data}, delta={delta})"


@runtime_checkable
class Session(Protocol):
    """Exclusive ownership of one run, from ``Store.acquire`` to ``close`` (R-STORE-2…4).

    Usable as a context manager: leaving the ``with`` block closes it.
    """

    @property
    def run_id(self) -> str:
        """The run id this session owns."""
        ...

    def load(self) -> RunRecord:
        """Return an isolated copy of the stored record.

        Raises:
            NotFoundError: there is no record for the run (and only then).
            CorruptRecordError: the stored bytes are not a valid record.
            SessionClosedError: the session was closed.
            DurableError / OSError: any other read failure; never reported as not found.
        """
        ...

    def save(
        self, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None = None
    ) -> None:
        """Atomically replace the record if the stored revision equals ``expected_revision``.

        ``record.revision`` must be ``expected_revision + 1`` and ``record.run_id`` must equal
        the session's run id. The first save expects 0 and writes revision 1 (R-STORE-3).

        ``encoded``, when given, is the caller's encoding of exactly ``record``
        (:class:`EncodedRecord`: the complete bytes, and maybe the delta against the stored
        revision); a store may write those bytes instead of encoding ``record`` itself, or
        ignore them. A store must never reuse bytes from an earlier call, and must read
        ``encoded.data`` during ``save``. The caller changes ``record`` after ``save`` returns
        (the runtime keeps one record and writes each change into it): keep bytes or a copy,
        never the object.

        Raises:
            ConflictError: stored revision differs, wrong revision/run id, or uint64 overflow;
                the stored record is unchanged.
            CorruptRecordError: the record cannot be written (e.g. invalid UTF-8 metadata);
                the stored record is unchanged.
            SessionClosedError: the session was closed.
            DurableError / OSError: the write failed; it may still have been written (R-RT-2).
        """
        ...

    def close(self) -> None:
        """Release ownership. Idempotent (R-STORE-4)."""
        ...

    def __enter__(self) -> Session: ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class Store(Protocol):
    """A place runs are saved; thread-safe; different run ids work independently (R-STORE-1)."""

    def acquire(self, run_id: str, timeout: float | None = None) -> Session:
        """Take exclusive ownership of ``run_id`` and return its session.

        Args:
            run_id: the run's business identity (any non-empty string).
            timeout: seconds to wait at most for capacity, network checks or initialisation;
                ``None`` uses the backend's documented default. Never used to wait for another
                owner.

        Raises:
            BusyError: the run is already owned (at once, never waiting for release).
            AcquireTimeoutError: ownership could not be decided in time.
            SessionClosedError: the store was closed.
        """
        ...

    def close(self) -> None:
        """Release the store's resources; sessions still open are closed. Idempotent."""
        ...


@attrs.frozen
class RunSummary:
    """One run found by :meth:`RunLister.list_runs`: identity and metadata only, no values.

    A stored record that cannot be read is listed too, never skipped: its ``error`` says why
    (corrupt JSON, invalid UTF-8, permission denied …), ``location`` says where it is,
    ``format``/``revision`` are ``0``, and ``run_id`` is ``""`` unless the backend knows it
    without the record (e.g. a database column).

    Attributes:
        run_id: the run id stored inside the record.
        format: the record format (R-REC-1).
        revision: the stored revision (R-STORE-3).
        location: where the backend keeps the record (a file path, a database row); for
            messages only, not a stable identity.
        error: ``None`` for a readable record, else what is wrong with it.
    """

    run_id: str
    format: int
    revision: int
    location: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the record was read without error."""
        return self.error is None


@runtime_checkable
class RunLister(Protocol):
    """Optional capability of stores that can enumerate their runs."""

    def list_runs(self) -> Iterable[RunSummary]:
        """Return a summary of every stored run, sorted by run id, without taking ownership.

        Records that cannot be read are included with ``error`` set (sorted by ``location``
        after the readable ones); only a failure to enumerate at all raises.
        """
        ...


def _sort_key(summary: RunSummary) -> tuple[bool, str, str]:
    return (summary.error is not None, summary.run_id, summary.location)


def sort_summaries(summaries: Iterable[RunSummary]) -> list[RunSummary]:
    """Sort summaries as :meth:`RunLister.list_runs` promises: readable ones by run id first."""
    return sorted(summaries, key=_sort_key)


# ---------------------------------------------------------------------------------------------
# Checks shared by every backend
# ---------------------------------------------------------------------------------------------


def validate_run_id(run_id: object) -> str:
    """Check a run id given to ``Store.acquire`` and return it.

    A run id is the record's ``RunID`` (R-REC-2): a non-empty string that is valid Unicode, so
    that it can be stored as UTF-8 (R-REC-4, B-FILE-5).

    Raises:
        CorruptRecordError: ``run_id`` is not a string, is empty, or holds a lone surrogate.
    """
    if not isinstance(run_id, str):
        raise CorruptRecordError(
            f"a run id must be a str, found {type(run_id).__name__} ({run_id!r}); pass the "
            "run's business identity as text"
        )
    if not run_id:
        raise CorruptRecordError(
            "a run id must be a non-empty string, found ''; pass the run's business identity"
        )
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CorruptRecordError(
            f"run id {run_id!r} is not valid Unicode (a lone surrogate at character "
            f"{exc.start}); run ids are stored as UTF-8 (R-REC-4)"
        ) from None
    return run_id


def validate_timeout(timeout: object) -> float | None:
    """Check an ``acquire`` timeout (seconds) and return it as a float, or ``None``.

    Raises:
        ValueError: ``timeout`` is negative, NaN or not a number.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"timeout must be seconds (a number) or None, found {timeout!r}")
    value = float(timeout)
    if math.isnan(value) or value < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, found {timeout!r}")
    return value


def validate_save(run_id: str, record: object, expected_revision: object) -> None:
    """The checks of ``Session.save`` that need no storage (R-STORE-3).

    Call it first in every ``save``; then compare ``expected_revision`` with the stored
    revision under the backend's own atomicity.

    Args:
        run_id: the session's run id.
        record: the proposed record.
        expected_revision: the revision the caller believes is stored (0: no record yet).

    Raises:
        CorruptRecordError: ``record`` is not a :class:`RunRecord`.
        ConflictError: ``expected_revision`` is not an int in ``0 … MAX_REVISION - 1`` (a save
            after ``MAX_REVISION`` would overflow uint64), ``record.revision`` is not
            ``expected_revision + 1``, or ``record.run_id`` is not the session's run id.
    """
    if not isinstance(record, RunRecord):
        raise CorruptRecordError(
            f"save expects a RunRecord, found {type(record).__name__}; nothing was written"
        )
    if isinstance(expected_revision, bool) or not isinstance(expected_revision, int):
        raise ConflictError(
            f"expected_revision must be an int (0 for the first save), found "
            f"{expected_revision!r}; the stored record is unchanged"
        )
    if expected_revision < 0 or expected_revision > MAX_REVISION:
        raise ConflictError(
            f"expected_revision must be between 0 and {MAX_REVISION} (uint64), found "
            f"{expected_revision}; the stored record is unchanged"
        )
    if expected_revision == MAX_REVISION:
        raise ConflictError(
            f"run {run_id!r} is at revision {MAX_REVISION}, the largest uint64: one more save "
            "would overflow the revision (R-STORE-3); the stored record is unchanged. Start a "
            "new run id"
        )
    revision = record.revision
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise ConflictError(
            f"record.revision must be an int, found {revision!r}; the stored record is unchanged"
        )
    if revision != expected_revision + 1:
        raise ConflictError(
            f"record.revision must be expected_revision + 1 = {expected_revision + 1}, found "
            f"{revision}; set the record's revision to the stored one plus one (R-STORE-3). "
            "The stored record is unchanged"
        )
    if record.run_id != run_id:
        raise ConflictError(
            f"record.run_id is {record.run_id!r} but this session owns run {run_id!r}; a "
            "session saves only its own run (R-STORE-3). The stored record is unchanged"
        )


def validate_loaded(run_id: str, record: RunRecord, location: str) -> RunRecord:
    """Check a record read back from storage belongs to ``run_id`` and has a stored revision.

    Args:
        run_id: the session's run id.
        record: the decoded record.
        location: where it was read from (for the message).

    Returns:
        ``record``.

    Raises:
        CorruptRecordError: the record names another run, or its revision is not in
            ``1 … MAX_REVISION``. Nothing is changed in storage.
    """
    if record.run_id != run_id:
        raise CorruptRecordError(
            f"the record at {location} names run {record.run_id!r}, but it is stored for run "
            f"{run_id!r}; it was copied or edited by hand. Keep the file as evidence and restore "
            "the right record (E-1)"
        )
    if not 1 <= record.revision <= MAX_REVISION:
        raise CorruptRecordError(
            f"the record of run {run_id!r} at {location} has revision {record.revision}; a "
            f"stored revision is between 1 and {MAX_REVISION} (R-REC-2)"
        )
    return record


# ---------------------------------------------------------------------------------------------
# MemoryStore (B-MEM)
# ---------------------------------------------------------------------------------------------


class MemoryStore:
    """A store that keeps records in this process's memory (B-MEM; seed 000 "内置 Store").

    Usable without arguments. ``load`` and ``save`` copy the record (it is kept as its canonical
    JSON bytes, so the UTF-8 rules of B-FILE-5 apply here too). A save that comes with a delta
    (``EncodedRecord.delta``) keeps only the delta; deltas are folded into the complete bytes
    once they outweigh them, and before every ``load``. It offers in-process exclusive
    sessions and compare-and-swap only: no cross-process ownership, and nothing survives the
    process. Meant for examples, unit tests and checking the protocol.

    Thread-safe: any thread may acquire, load, save and close.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, _MemoryRecord] = {}
        self._owners: dict[str, _MemorySession] = {}
        self._closed = False

    def acquire(self, run_id: str, timeout: float | None = None) -> Session:
        """Take exclusive ownership of ``run_id`` in this store (R-STORE-1).

        Args:
            run_id: the run's id (a non-empty string of valid Unicode).
            timeout: accepted for the protocol; a memory store never waits.

        Returns:
            The run's session.

        Raises:
            BusyError: a session of this store already owns ``run_id`` (at once).
            SessionClosedError: the store was closed.
            CorruptRecordError: ``run_id`` is not a valid run id.
        """
        validate_run_id(run_id)
        validate_timeout(timeout)
        with self._lock:
            if self._closed:
                raise SessionClosedError("this MemoryStore was closed; create a new store")
            if run_id in self._owners:
                raise BusyError(
                    f"run {run_id!r} is already owned by another session of this MemoryStore; "
                    "close that session first (R-STORE-1)"
                )
            session = _MemorySession(self, run_id)
            self._owners[run_id] = session
            return session

    def close(self) -> None:
        """Close every open session; later ``acquire`` calls raise. Records are kept. Idempotent."""
        with self._lock:
            self._closed = True
            sessions = list(self._owners.values())
        for session in sessions:
            session.close()

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every stored run, sorted by run id (:class:`RunLister`)."""
        with self._lock:
            items = [(run_id, stored.complete()) for run_id, stored in self._records.items()]
        summaries = []
        for run_id, data in items:
            record = record_from_json(data)
            summaries.append(
                RunSummary(
                    run_id=run_id,
                    format=record.format,
                    revision=record.revision,
                    location=f"memory:{run_id}",
                )
            )
        return sort_summaries(summaries)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Called by sessions. Ownership is checked under the store's lock, so a session closed by
    # another thread (or by Store.close) can never load or save after its run was released.
    def _check_owner(self, session: _MemorySession) -> None:
        if self._owners.get(session.run_id) is not session:
            raise SessionClosedError(
                f"the session of run {session.run_id!r} is closed; acquire the run again"
            )

    def _load(self, session: _MemorySession) -> RunRecord:
        run_id = session.run_id
        with self._lock:
            self._check_owner(session)
            stored = self._records.get(run_id)
            data = None if stored is None else stored.complete()
        if data is None:
            raise NotFoundError(f"no record is stored for run {run_id!r} in this MemoryStore")
        return validate_loaded(run_id, record_from_json(data), f"memory:{run_id}")

    def _save(
        self,
        session: _MemorySession,
        record: RunRecord,
        expected_revision: int,
        encoded: EncodedRecord | None,
    ) -> None:
        run_id = session.run_id
        validate_save(run_id, record, expected_revision)
        delta = None if encoded is None else encoded.delta
        data = b""
        if delta is None:
            data = record_to_json(record) if encoded is None else encoded.data
        with self._lock:
            self._check_owner(session)
            stored = self._records.get(run_id)
            current = stored.revision if stored is not None else 0
            if current != expected_revision:
                raise ConflictError(
                    f"run {run_id!r} is stored at revision {current}, not at the expected "
                    f"revision {expected_revision}; load the record again (R-STORE-3). The "
                    "stored record is unchanged"
                )
            if delta is not None and stored is not None:
                stored.append(record.revision, delta)
            else:
                self._records[run_id] = _MemoryRecord(record.revision, data)

    def _release(self, session: _MemorySession) -> None:
        with self._lock:
            if self._owners.get(session.run_id) is session:
                del self._owners[session.run_id]


class _MemoryRecord:
    """One run's bytes in a :class:`MemoryStore`: the last complete record and the deltas saved
    after it, folded in once they outweigh it (so a save costs what it changed)."""

    __slots__ = ("_complete", "_deltas", "_size", "revision")

    def __init__(self, revision: int, complete: bytes) -> None:
        self.revision = revision
        self._complete = complete
        self._deltas: list[bytes] = []
        self._size = 0

    def append(self, revision: int, delta: bytes) -> None:
        self._deltas.append(delta)
        self._size += len(delta)
        self.revision = revision
        if self._size > max(len(self._complete), 1 << 16):
            self.complete()

    def complete(self) -> bytes:
        """The complete record (deltas folded in first)."""
        if self._deltas:
            self._complete = apply_delta(self._complete, *self._deltas)
            self._deltas, self._size = [], 0
        return self._complete


class _MemorySession:
    """A session of :class:`MemoryStore`."""

    def __init__(self, store: MemoryStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._closed = False

    @property
    def run_id(self) -> str:
        return self._run_id

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                f"the session of run {self._run_id!r} is closed; acquire the run again"
            )

    def load(self) -> RunRecord:
        self._check_open()
        return self._store._load(self)

    def save(
        self, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None = None
    ) -> None:
        self._check_open()
        self._store._save(self, record, expected_revision, encoded)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store._release(self)

    def __enter__(self) -> _MemorySession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemoryStore session of run {self._run_id!r} ({state})>"
