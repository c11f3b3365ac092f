"""The Store and Session contract (seed 000 "Store 与 Session"; SPEC R-STORE-1…5, R-RT-1…3).

A :class:`Store` hands out one exclusive :class:`Session` per run id. The session loads and saves
the run's single :class:`~durable_core.records.RunRecord` by compare-and-swap on its revision.
A backend that can only overwrite without CAS is not a Store (R-STORE-5).

Stores that can enumerate their runs also implement :class:`RunLister` (``list_runs``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import attrs

from durable_core.records import RunRecord

__all__ = ["MAX_REVISION", "RunLister", "RunSummary", "Session", "Store"]

MAX_REVISION = 2**64 - 1
"""Revisions are uint64 (R-STORE-3): a save that would pass this raises ``ConflictError``."""


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

    def save(self, record: RunRecord, expected_revision: int) -> None:
        """Atomically replace the record if the stored revision equals ``expected_revision``.

        ``record.revision`` must be ``expected_revision + 1`` and ``record.run_id`` must equal
        the session's run id. The first save expects 0 and writes revision 1 (R-STORE-3).

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
        """
        ...

    def close(self) -> None:
        """Release the store's resources; sessions still open are closed. Idempotent."""
        ...


@attrs.frozen
class RunSummary:
    """One run found by :meth:`RunLister.list_runs`: identity and metadata only, no values."""

    run_id: str
    format: int
    revision: int


@runtime_checkable
class RunLister(Protocol):
    """Optional capability of stores that can enumerate their runs."""

    def list_runs(self) -> Iterable[RunSummary]:
        """Return a summary of every stored run, sorted by run id, without taking ownership."""
        ...
