"""MemoryStore runs the whole conformance kit, plus its own promises (B-MEM)."""

from __future__ import annotations

import pytest

from durable_core import BusyError, MemoryStore, NotFoundError, make_plugin_manager
from durable_core.store.memory import _MemoryRecord
from durable_core.testing import StoreConformance, StoreSpec, sample_record


class MemoryRawRecords:
    """The bytes a MemoryStore keeps, read and written past its sessions."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def read(self, run_id: str) -> bytes | None:
        stored = self._store._records.get(run_id)
        return None if stored is None else stored.complete()

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        self._store._records[run_id] = _MemoryRecord(revision, data)


class TestMemoryStoreConformance(StoreConformance):
    @pytest.fixture
    def memory_store(self) -> MemoryStore:
        return MemoryStore()

    @pytest.fixture
    def durable_store_factory(self, memory_store: MemoryStore) -> StoreSpec:
        # "Reopening" a memory store is using the same object: its records live in it.
        return StoreSpec(
            factory=lambda: memory_store,
            cross_process=False,
            reason="MemoryStore keeps records and ownership in one process (B-MEM)",
        )

    @pytest.fixture
    def durable_raw_records(self, memory_store: MemoryStore) -> MemoryRawRecords:
        return MemoryRawRecords(memory_store)

    @pytest.fixture
    def durable_other_store_factory(self) -> type[MemoryStore]:
        return MemoryStore


def test_usable_without_arguments() -> None:
    # covers: B-MEM
    store = MemoryStore()
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        assert session.load() == sample_record("run", 1)


def test_two_memory_stores_share_nothing() -> None:
    # covers: B-MEM
    first, second = MemoryStore(), MemoryStore()
    with first.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        with second.acquire("run") as other, pytest.raises(NotFoundError):
            other.load()


def test_exclusive_within_one_store() -> None:
    # covers: B-MEM, R-STORE-1
    store = MemoryStore()
    with store.acquire("run"), pytest.raises(BusyError):
        store.acquire("run")


def test_registered_as_memory_backend() -> None:
    # covers: B-MEM
    pm = make_plugin_manager(autoload=False)
    store = pm.store_factory("memory")()
    assert isinstance(store, MemoryStore)


def test_deltas_fold_once_they_outweigh_the_record_four_times() -> None:
    # covers: B-MEM
    from durable_core.records.delta import apply_delta, canonical_json, encode_delta

    complete = canonical_json({"Items": {}, "Revision": 0, "Pad": "p" * 40_000})
    stored = _MemoryRecord(0, complete)
    deltas, folds = [], 0
    for revision in range(1, 400):
        delta = encode_delta(revision - 1, revision, set=[(("Items", f"k{revision}"), "v" * 900)])
        deltas.append(delta)
        stored.append(revision, delta)
        held = sum(map(len, stored._deltas))
        if stored._deltas:  # not folded yet: at most four records' worth is held
            assert held <= max(4 * len(stored._complete), 1 << 16)
        else:  # folded: the deltas held had just passed four records' worth
            assert sum(map(len, deltas)) > 4 * len(complete)
            complete, deltas, folds = stored._complete, [], folds + 1
    assert folds == 1
    assert stored.revision == 399
    assert stored.complete() == apply_delta(complete, *deltas)
