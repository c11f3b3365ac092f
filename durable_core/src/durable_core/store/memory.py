"""MemoryStore: records in this process's memory (B-MEM; seed 000 "内置 Store")."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from durable_core.errors import NotFoundError
from durable_core.records import RunRecord
from durable_core.records.delta import apply_delta
from durable_core.records.jsonio import record_from_json
from durable_core.store.capabilities import Capability
from durable_core.store.checks import check_options, summary_of
from durable_core.store.history import check_entries
from durable_core.store.kit import Acquiring, BaseSession, BaseStore
from durable_core.store.memory_inbox import MemoryInbox
from durable_core.store.protocol import EncodedRecord, RunSummary, sort_summaries

__all__ = ["MemorySession", "MemoryStore", "memory_store_factory"]


class MemoryStore(MemoryInbox, BaseStore):
    """A store that keeps records in this process's memory (B-MEM; seed 000 "内置 Store").

    Usable without arguments. ``load`` and ``save`` copy the record (it is kept as its canonical
    JSON bytes, so the UTF-8 rules of B-FILE-5 apply here too). A save that comes with a delta
    (``EncodedRecord.delta``) keeps only the delta; once the deltas held outweigh the complete
    bytes four times over, the save keeps its own complete bytes (``EncodedRecord.data``)
    instead, and the deltas still held are folded in before every ``load``. It offers in-process
    exclusive sessions and compare-and-swap only: no cross-process ownership, and nothing
    survives the process. Meant for examples, unit tests and checking the protocol. Runs' histories
    (:class:`~durable_core.store.capabilities.RunHistory`) are kept in memory too, and go with a
    deleted run.

    Thread-safe: any thread may acquire, load, save and close.
    """

    capabilities = frozenset(
        {
            Capability.LIST_RUNS,
            Capability.PEEK,
            Capability.RUN_HISTORY,
            Capability.INBOX,
            Capability.DELETE,
            Capability.RESTORE,
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self._records_lock = threading.Lock()
        self._records: dict[str, _MemoryRecord] = {}
        self._history: dict[str, list[tuple[str, str]]] = {}  # run id: (root scope, entry)

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every stored run, sorted by run id (:class:`RunLister`)."""
        with self._records_lock:
            items = sorted((run_id, stored.complete()) for run_id, stored in self._records.items())
        return sort_summaries(
            summary_of(f"memory:{run_id}", lambda data=data: record_from_json(data), run_id)
            for run_id, data in items
        )

    def peek(self, run_id: str) -> RunRecord:
        """The stored record of ``run_id`` without taking its session (RecordPeeker).

        Raises:
            NotFoundError: no record.
        """
        with self._records_lock:
            stored = self._records.get(run_id)
        if stored is None:
            raise NotFoundError(f"no record of run {run_id!r} in this memory store")
        return record_from_json(stored.complete())

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append to the history of ``run_id``'s run ``root_scope`` (RunHistory).

        Raises:
            ValueError: an entry is not one line, or ``root_scope`` is not a non-empty line.
        """
        check_entries(root_scope, entries)
        with self._records_lock:
            self._history.setdefault(run_id, []).extend((root_scope, e) for e in entries)

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The history of ``run_id``'s run ``root_scope``, oldest first (RunHistory)."""
        with self._records_lock:
            kept = list(self._history.get(run_id, ()))
        return [entry for scope, entry in kept if scope == root_scope]

    def _open_session(
        self, run_id: str, timeout: float | None, pending: Acquiring
    ) -> MemorySession:
        return MemorySession(self, run_id)


class MemorySession(BaseSession):
    """A session of :class:`MemoryStore`."""

    capabilities = BaseSession.capabilities | {Capability.QUICK_SAVES}
    """A save touches no medium and never blocks for long: the runtime may call it on its
    event loop instead of handing it to a thread."""

    def __init__(self, store: MemoryStore, run_id: str) -> None:
        super().__init__(store, run_id, f"memory:{run_id}")
        self._memory = store

    def delete(self) -> None:
        """Remove the run's record, then close the session (RunDeleter).

        Raises:
            NotFoundError: no record.
            SessionClosedError: the session was closed.
        """
        with self._mutex:
            self._check_open()
            with self._memory._records_lock:
                stored = self._memory._records.pop(self._run_id, None)
                if stored is not None:
                    self._memory._history.pop(self._run_id, None)  # the history goes with it
                    self._memory._forget_inbox(self._run_id)  # and its inbox
            if stored is None:
                raise self._not_found()
        self.close()

    def _read(self) -> tuple[bytes, int | None] | None:
        with self._memory._records_lock:
            stored = self._memory._records.get(self._run_id)
            return None if stored is None else (stored.complete(), stored.revision)

    def _write(self, record: RunRecord, expected_revision: int, encoded: EncodedRecord) -> bool:
        delta = self._delta_of(encoded, expected_revision)
        data = encoded.data if delta is None else b""
        records = self._memory._records
        with self._memory._records_lock:
            stored = records.get(self._run_id)
            if (stored.revision if stored is not None else 0) != expected_revision:
                return False
            if delta is not None and stored is not None:
                if stored.folds_with(delta):
                    # The deltas held would now be folded: the save's complete bytes are what
                    # they fold into, and keeping them costs no parse of the record and its
                    # deltas (a store may always keep ``encoded.data`` instead of a delta).
                    whole = _whole_bytes(encoded)
                    if whole is not None:
                        records[self._run_id] = _MemoryRecord(record.revision, whole)
                        return True
                stored.append(record.revision, delta)
            else:
                records[self._run_id] = _MemoryRecord(record.revision, data)
            return True

    def _release(self, deadline: float | None) -> None:
        """Nothing to unlock: the store's live sessions are the run's only lock."""
        return None

    def _stored_revision(self) -> int:
        with self._memory._records_lock:
            stored = self._memory._records.get(self._run_id)
        return 0 if stored is None else stored.revision


def _whole_bytes(encoded: EncodedRecord) -> bytes | None:
    """``encoded.data``, or ``None`` when the caller can no longer give it (its encoder moved
    on, or the callable failed): the deltas are then folded from what is stored."""
    try:
        return encoded.data
    except Exception:
        return None


_FOLD_AFTER = 4
"""Deltas are folded into a record once their bytes exceed this many times its own."""


class _MemoryRecord:
    """One run's bytes in a :class:`MemoryStore`: the last complete record and the deltas saved
    after it, folded in once they outweigh it ``_FOLD_AFTER`` times (so a save costs what it
    changed).

    A fold parses the complete record and writes it again, whatever the deltas changed: folding
    only when the deltas are several times its size spreads that over more saves (at most
    ``_FOLD_AFTER`` times the record's bytes held as deltas).
    """

    __slots__ = ("_complete", "_deltas", "_size", "revision")

    def __init__(self, revision: int, complete: bytes) -> None:
        self.revision = revision
        self._complete = complete
        self._deltas: list[bytes] = []
        self._size = 0

    def folds_with(self, delta: bytes) -> bool:
        """Whether :meth:`append` of ``delta`` would fold the deltas into the record."""
        return self._size + len(delta) > max(_FOLD_AFTER * len(self._complete), 1 << 16)

    def append(self, revision: int, delta: bytes) -> None:
        self._deltas.append(delta)
        self._size += len(delta)
        self.revision = revision
        if self._size > max(_FOLD_AFTER * len(self._complete), 1 << 16):
            self.complete()

    def complete(self) -> bytes:
        """The complete record (deltas folded in first).

        Raises:
            CorruptRecordError: the deltas do not fold into the record.
        """
        if self._deltas:
            self._complete = apply_delta(self._complete, *self._deltas)
            self._deltas, self._size = [], 0
        return self._complete


def memory_store_factory(**options: Any) -> MemoryStore:
    """Build a :class:`MemoryStore` from a config's ``[store]`` options (it takes none).

    Raises:
        ConfigError: any option is given.
    """
    check_options("memory", options, ())
    return MemoryStore()
