"""Across processes: ownership, release when an owner is killed, stale owners, a killed writer
(SPEC R-STORE-1…4, R-RT-2, B-FILE-2). Skipped for a store declared in-process only."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from durable_core.errors import (
    BusyError,
    ConflictError,
    NotFoundError,
)
from durable_core.store import Store
from durable_core.testing.conformance.base import (
    BUSY_LIMIT,
    RawRecords,
    StoreSpec,
    _chain,
    _confirmed,
    _encoded,
    _json,
    _timed_busy,
    acquire_after_release,
)
from durable_core.testing.process import StoreProcess
from durable_core.testing.records import record_delta, sample_record

__all__ = ["ProcessClauses"]


class ProcessClauses:
    """The contract holds between real child processes, killed with SIGKILL."""

    def test_busy_across_processes_at_once(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-1, B-FILE-2
        child = durable_spawn()
        child.acquire("run-child").expect_ok()
        child.save("run-child", sample_record("run-child", 1), 0).expect_ok()
        elapsed = _timed_busy(lambda: durable_store.acquire("run-child"))
        assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"

        with durable_store.acquire("run-parent"):
            reply = child.acquire("run-parent")
            assert reply.raised(BusyError), reply
            assert reply.elapsed < BUSY_LIMIT, f"BusyError took {reply.elapsed:.3f} s"
        child.acquire("run-parent").expect_ok()  # released by the parent's close
        child.close("run-parent").expect_ok()

        with durable_store.acquire("run-other") as session:  # other runs are not blocked
            session.save(sample_record("run-other", 1), 0)

    def test_close_releases_ownership_across_processes(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-4, R-STORE-1
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        child.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        child.close("run-a").expect_ok()
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(sample_record("run-a", 1))
            session.save(sample_record("run-a", 2), 1)
        child.acquire("run-a").expect_ok()
        assert child.load("run-a").expect_ok().record_json == _json(sample_record("run-a", 2))

    def test_killed_owner_process_releases_ownership(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
    ) -> None:
        # covers: R-STORE-1, B-FILE-2
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        child.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        elapsed = _timed_busy(lambda: durable_store.acquire("run-a"))
        assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
        child.kill()  # SIGKILL: no close, no cleanup in the child
        session = acquire_after_release(durable_store, "run-a", durable_store_spec)
        with session:
            assert _json(session.load()) == _json(sample_record("run-a", 1))
            session.save(sample_record("run-a", 2), 1)

    def test_stale_owner_in_another_process_gets_conflict(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
    ) -> None:
        # covers: R-STORE-3, R-RT-2
        stuck = durable_spawn()
        stuck.acquire("run-a").expect_ok()
        stuck.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        snapshot = stuck.load("run-a").expect_ok().record
        stuck.kill()  # the stuck owner is gone
        newer = sample_record("run-a", 2, marker="newer")
        with acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            session.save(newer, 1)
        late = durable_spawn()  # the old owner's code comes back with its old snapshot
        late.acquire("run-a").expect_ok()
        reply = late.save("run-a", sample_record("run-a", 2, marker="stale"), snapshot.revision)
        assert reply.raised(ConflictError), reply
        assert late.load("run-a").expect_ok().record_json == _json(newer)
        late.close("run-a").expect_ok()
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(newer)

    def test_record_is_byte_identical_in_a_new_process(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-2, R-REC-4, B-FILE-5
        record = sample_record("run-ü-🚀", 1)
        with durable_store.acquire("run-ü-🚀") as session:
            session.save(record, 0)
        durable_store.close()
        child = durable_spawn()
        child.acquire("run-ü-🚀").expect_ok()
        assert child.load("run-ü-🚀").expect_ok().record_json == _json(record)
        from_child = sample_record("run-ü-🚀", 2, marker="child")
        child.save("run-ü-🚀", from_child, 1).expect_ok()
        assert child.exit() == 0
        child = durable_spawn()  # a third process reads what the second wrote
        child.acquire("run-ü-🚀").expect_ok()
        assert child.load("run-ü-🚀").expect_ok().record_json == _json(from_child)

    @pytest.mark.slow
    @pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
    def test_a_killed_writer_loses_no_confirmed_save_and_shows_no_half_save(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
        durable_raw_records: RawRecords,
        tmp_path: Any,
        delay: float,
    ) -> None:
        # covers: R-STORE-2, R-STORE-3, R-RT-2
        records = _chain("run-a", 400)
        deltas = [None, *(record_delta(a, b) for a, b in itertools.pairwise(records))]
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        progress = str(tmp_path / "progress")
        child.start_chain("run-a", records, deltas, 0, progress)
        time.sleep(delay)
        child.kill()  # SIGKILL at any point: mid-save, mid-fold, between saves
        confirmed = _confirmed(progress)
        with acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            try:
                loaded = session.load()
            except NotFoundError:
                assert confirmed == 0, f"revision {confirmed} was confirmed, then lost"
                return
            # Every confirmed save is there; the one in flight is there whole or not at all.
            assert confirmed <= loaded.revision <= confirmed + 1, (confirmed, loaded.revision)
            assert _json(loaded) == _json(records[loaded.revision - 1])
            # The run goes on from there, with deltas again, and rests as a complete record.
            after = sample_record("run-a", loaded.revision + 1, marker="after the crash")
            session.save(after, loaded.revision, _encoded(loaded, after))
            assert _json(session.load()) == _json(after)
        assert durable_raw_records.read("run-a") == _json(after)
