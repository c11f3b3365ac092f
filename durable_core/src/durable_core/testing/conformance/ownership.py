"""Exclusive ownership in one process: BusyError at once, one winner, independent runs (SPEC
R-STORE-1, R-STORE-4)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from durable_core.errors import (
    BusyError,
)
from durable_core.store import Session, Store
from durable_core.testing.conformance.base import (
    _THREADS,
    BUSY_LIMIT,
    _json,
    _timed_busy,
)
from durable_core.testing.records import sample_record

__all__ = ["OwnershipClauses"]


class OwnershipClauses:
    """One session per run at a time, refused at once, released on close."""

    def test_second_acquire_in_the_same_store_is_busy_at_once(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        with durable_store.acquire("run-a") as owner:
            elapsed = _timed_busy(lambda: durable_store.acquire("run-a"))
            assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
            owner.save(sample_record("run-a", 1), 0)  # the owner is unaffected
            assert owner.load().revision == 1

    def test_second_acquire_from_another_store_object_is_busy_at_once(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-1
        other = durable_open_store()
        with durable_store.acquire("run-a") as owner:
            elapsed = _timed_busy(lambda: other.acquire("run-a"))
            assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
            owner.save(sample_record("run-a", 1), 0)
        with other.acquire("run-a") as session:
            assert session.load().revision == 1

    def test_racing_acquires_of_one_run_have_one_winner(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-1
        stores = [durable_store, durable_open_store()]
        barrier = threading.Barrier(_THREADS, timeout=30)
        winners: list[Session] = []
        busy: list[float] = []
        failures: list[BaseException] = []
        mutex = threading.Lock()

        def attempt(index: int) -> None:
            store = stores[index % 2]
            barrier.wait()
            started = time.monotonic()
            try:
                session = store.acquire("run-a")
            except BusyError:
                with mutex:
                    busy.append(time.monotonic() - started)
            except BaseException as exc:
                with mutex:
                    failures.append(exc)
            else:
                with mutex:
                    winners.append(session)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        assert len(winners) == 1, f"{len(winners)} sessions own the same run"
        assert len(busy) == _THREADS - 1
        assert max(busy) < BUSY_LIMIT * 2, f"slowest BusyError took {max(busy):.3f} s"
        winners[0].close()

    def test_different_runs_are_independent_and_concurrent(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        barrier = threading.Barrier(_THREADS, timeout=30)
        failures: list[BaseException] = []

        def work(index: int) -> None:
            run_id = f"run-{index}"
            try:
                with durable_store.acquire(run_id) as session:
                    barrier.wait()  # every run is owned at the same time
                    for revision in range(1, 6):
                        session.save(
                            sample_record(run_id, revision, marker=str(index)), revision - 1
                        )
                    loaded = session.load()
                    assert _json(loaded) == _json(sample_record(run_id, 5, marker=str(index)))
                    barrier.wait()
            except BaseException as exc:
                failures.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        for index in range(_THREADS):
            with durable_store.acquire(f"run-{index}") as session:
                assert session.load().revision == 5

    def test_close_releases_ownership(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-4, R-STORE-1
        other = durable_open_store()
        for _ in range(3):
            session = durable_store.acquire("run-a")
            session.close()
            session = other.acquire("run-a")
            session.close()
