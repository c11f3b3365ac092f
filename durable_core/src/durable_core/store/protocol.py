"""The Store and Session contract (seed 000 "Store 与 Session"; SPEC R-STORE-1…5, R-RT-1…3).

A :class:`Store` hands out one exclusive :class:`Session` per run id. The session loads and saves
the run's single :class:`~durable_core.records.RunRecord` by compare-and-swap on its revision.
A backend that can only overwrite without CAS is not a Store (R-STORE-5).

What a store may do beyond this contract (list its runs, peek, …) is an optional capability:
see :mod:`durable_core.store.capabilities` (``RunLister`` is importable from here too).
:class:`EncodedRecord` is how a caller hands a session the bytes it already encoded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import attrs

from durable_core.records import RunRecord
from durable_core.store.capabilities import RunLister

__all__ = [
    "MAX_REVISION",
    "EncodedRecord",
    "RunLister",
    "RunSummary",
    "Session",
    "Store",
    "sort_summaries",
]

MAX_REVISION = 2**64 - 1
"""Revisions are uint64 (R-STORE-3): a save that would pass this raises ``ConflictError``."""


_MAKING_LOCK = threading.Lock()
"""Held only while an :class:`EncodedRecord` makes the lock of its ``data``."""


class EncodedRecord:
    """A record's encoding, handed to :meth:`Session.save` by a caller that already made it.

    ``data`` is the complete canonical JSON of the record being saved, byte for byte what
    :func:`~durable_core.records.jsonio.record_to_json` returns for it. A store may write these
    bytes instead of encoding the record again; a store that ignores them and encodes the record
    itself is just as correct. ``delta``, when given, is the change against the record stored at the
    save's ``expected_revision`` (canonical JSON: ``{"Base", "Revision", "Set", "Unset"}`` and,
    for a list of pending stream elements changed in part, ``"Splice"``; see
    :mod:`durable_core.records.delta`); a store may keep it instead of the complete record.

    Args:
        data: the complete record's bytes, or a zero-argument callable returning them; the
            callable is called at most once, on the first access of :attr:`data`.
        delta: the change's bytes, or ``None`` when the caller has none.

    Raises:
        TypeError: ``data`` is neither bytes nor callable, or ``delta`` is neither bytes nor
            ``None``.
    """

    __slots__ = ("_data", "_delta", "_lock", "_make")

    def __init__(self, data: bytes | Callable[[], bytes], delta: bytes | None = None) -> None:
        kind = type(data)
        if kind is bytes:
            self._data: bytes | None = data
            self._make: Callable[[], bytes] | None = None
        elif isinstance(data, bytes | bytearray | memoryview):
            self._data = bytes(data)
            self._make = None
        elif callable(data):
            self._data = None
            self._make = data
        else:
            raise TypeError(
                f"EncodedRecord data must be bytes or a callable returning bytes, found "
                f"{kind.__name__}"
            )
        if delta is not None and type(delta) is not bytes and not isinstance(delta, bytes):
            raise TypeError(
                f"EncodedRecord delta must be bytes or None, found {type(delta).__name__}"
            )
        self._delta = delta
        # Made on the first access of ``data`` that must call ``_make`` (most saves never
        # ask): one lock per record would cost every save an allocation.
        self._lock: threading.Lock | None = None

    @property
    def data(self) -> bytes:
        """The complete record's canonical JSON (UTF-8 bytes); computed once, then kept."""
        data = self._data
        if data is not None:
            return data
        lock = self._lock
        if lock is None:
            with _MAKING_LOCK:  # two threads asking at once share one lock
                lock = self._lock
                if lock is None:
                    lock = self._lock = threading.Lock()
        with lock:
            if self._data is None:
                assert self._make is not None
                made = self._make()
                if not isinstance(made, bytes | bytearray | memoryview):
                    raise TypeError(
                        f"the callable given to EncodedRecord returned {type(made).__name__}, "
                        "not bytes"
                    )
                self._data = bytes(made)
                self._make = None
            return self._data

    @property
    def delta(self) -> bytes | None:
        """The change against the stored record, or ``None``."""
        return self._delta

    def __repr__(self) -> str:
        size = "not encoded yet" if self._data is None else f"{len(self._data)} bytes"
        delta = "" if self._delta is None else f", delta of {len(self._delta)} bytes"
        return f"<EncodedRecord {size}{delta}>"


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
        ``encoded``, when given, is the caller's encoding of exactly ``record``; the store may
        write its bytes instead of encoding the record itself. A stored record that cannot be
        read (corrupt, unreadable) is never overwritten.

        Raises:
            ConflictError: stored revision differs, wrong revision/run id, or uint64 overflow;
                the stored record is unchanged.
            CorruptRecordError: the record cannot be written (e.g. invalid UTF-8 metadata), or
                the stored record is corrupt; the stored record is unchanged.
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


def _sort_key(summary: RunSummary) -> tuple[bool, str, str]:
    return (summary.error is not None, summary.run_id, summary.location)


def sort_summaries(summaries: Iterable[RunSummary]) -> list[RunSummary]:
    """Sort summaries as :meth:`RunLister.list_runs` promises: readable ones by run id first."""
    return sorted(summaries, key=_sort_key)
