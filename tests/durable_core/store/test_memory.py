"""MemoryStore runs the whole conformance kit, plus its own promises (B-MEM)."""

from __future__ import annotations

import pytest

from durable_core import (
    BusyError,
    DurableError,
    EncodedRecord,
    MemoryStore,
    NotFoundError,
    RunRecord,
    make_plugin_manager,
    record_to_json,
)
from durable_core.records.delta import encode_delta
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


def _padded(revision: int) -> tuple[RunRecord, bytes]:
    """Revision ``revision`` of a small record whose version is 20,000 characters, and its
    delta from the revision before (every save changes the version)."""
    version = f"v{revision}-" + "p" * 20_000
    record = sample_record("run", revision, rich=False)
    record.version = version
    delta = encode_delta(
        revision - 1, revision, [(("Revision",), revision), (("Version",), version)]
    )
    return record, delta


def test_a_save_that_would_fold_keeps_its_complete_bytes_instead() -> None:
    # covers: B-MEM, R-STORE-3
    store = MemoryStore()
    asked: list[int] = []
    with store.acquire("run") as session:
        session.save(_padded(1)[0], 0)
        for revision in range(2, 12):
            record, delta = _padded(revision)

            def data(record: RunRecord = record, revision: int = revision) -> bytes:
                asked.append(revision)
                return record_to_json(record)

            session.save(record, revision - 1, EncodedRecord(data, delta))
            stored = store._records["run"]
            if asked:  # the deltas held would have been folded: the save's bytes replace them
                break
            assert stored._deltas[-1] == delta
        assert asked == [revision]  # the deltas had passed four records' worth: five of them
        assert revision == 6
        assert stored._deltas == [] and stored._complete == record_to_json(record)
        assert session.load() == record


def test_a_fold_without_the_saves_complete_bytes_applies_the_deltas() -> None:
    # covers: B-MEM, R-STORE-3
    store = MemoryStore()

    def gone() -> bytes:
        raise DurableError("the complete bytes are no longer available")

    with store.acquire("run") as session:
        session.save(_padded(1)[0], 0)
        for revision in range(2, 9):
            record, delta = _padded(revision)
            session.save(record, revision - 1, EncodedRecord(gone, delta))
        stored = store._records["run"]
        assert len(stored._deltas) == 2  # folded at revision 6, two deltas since
        assert stored.complete() == record_to_json(record)
        assert session.load() == record
