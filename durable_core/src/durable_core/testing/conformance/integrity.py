"""What is stored is never damaged: a corrupt record is refused and kept, a look changes no byte
(SPEC R-STORE-2…4, E-1, E-2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from durable_core.errors import (
    ConflictError,
    CorruptRecordError,
)
from durable_core.store import Capability, Store, capabilities
from durable_core.testing.conformance.base import (
    RawRecords,
    StoreSpec,
    _chain,
    _corrupt,
    _encoded,
    _json,
    acquire_after_release,
)
from durable_core.testing.process import StoreProcess
from durable_core.testing.records import record_delta, sample_record

__all__ = ["IntegrityClauses"]


class IntegrityClauses:
    """A corrupt stored record stays as evidence; a session that did not save writes nothing."""

    @pytest.mark.parametrize(
        "kind", ["not json", "truncated", "invalid utf-8", "another run", "empty"]
    )
    def test_a_corrupt_record_is_refused_and_never_overwritten(
        self, durable_store: Store, durable_raw_records: RawRecords, kind: str
    ) -> None:
        # covers: R-STORE-2, R-STORE-3, E-1
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        assert durable_raw_records.read("run-a") is not None
        corrupt = _corrupt(kind)
        durable_raw_records.write("run-a", corrupt, 1)
        with durable_store.acquire("run-a") as session:  # a save without a load first
            with pytest.raises(CorruptRecordError):
                session.save(sample_record("run-a", 2, marker="over"), 1)
            assert durable_raw_records.read("run-a") == corrupt
        with durable_store.acquire("run-a") as session:  # a load, then a save
            with pytest.raises(CorruptRecordError):
                session.load()
            with pytest.raises(CorruptRecordError):
                session.save(sample_record("run-a", 2, marker="over"), 1)
            with pytest.raises((CorruptRecordError, ConflictError)):
                session.save(sample_record("run-a", 1, marker="over"), 0)
        assert durable_raw_records.read("run-a") == corrupt

    def test_a_session_that_did_not_save_changes_no_stored_byte(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
        durable_raw_records: RawRecords,
    ) -> None:
        # covers: R-STORE-2, R-STORE-4, E-2
        records = _chain("run-a", 6)
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        previous = None
        for record in records:
            delta = None if previous is None else record_delta(previous, record)
            child.save("run-a", record, record.revision - 1, delta).expect_ok()
            previous = record
        child.kill()  # the owner dies: whatever it keeps beside the record stays as it is
        stored = durable_raw_records.read("run-a")
        timed = Capability.SAVE_TIMES in capabilities(durable_store)
        saved_at: Any = durable_store.saved_at if timed else None  # type: ignore[attr-defined]
        when = saved_at("run-a") if saved_at is not None else None
        # A look (load, close), a session that saves nothing, and one whose save is refused
        # leave every stored byte, and the time of the last save, as they were.
        with acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            assert _json(session.load()) == _json(records[-1])
        assert durable_raw_records.read("run-a") == stored
        with durable_store.acquire("run-a"):
            pass
        with durable_store.acquire("run-a") as session:
            session.load()
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", 3, marker="stale"), 2)
        assert durable_raw_records.read("run-a") == stored
        if saved_at is not None:
            assert saved_at("run-a") == when
        # The next session that saves goes on from the complete record, and rests complete.
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(records[-1])
            after = sample_record("run-a", 7, marker="after the looks")
            session.save(after, 6, _encoded(records[-1], after))
        assert durable_raw_records.read("run-a") == _json(after)
