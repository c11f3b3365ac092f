"""Compare-and-swap saves: revisions, expected revisions, run ids (SPEC R-STORE-2, R-STORE-3)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from durable_core.errors import (
    ConflictError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.store import MAX_REVISION, Store
from durable_core.testing.conformance.base import (
    _json,
)
from durable_core.testing.records import sample_record

__all__ = ["CasClauses"]


class CasClauses:
    """Each save raises the revision by one, only from the stored revision, for this run."""

    def test_load_without_record_raises_not_found(self, durable_store: Store) -> None:
        # covers: R-STORE-2
        with durable_store.acquire("run-a") as session, pytest.raises(NotFoundError):
            session.load()

    def test_not_found_is_per_run(self, durable_store: Store) -> None:
        # covers: R-STORE-1, R-STORE-2
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        with durable_store.acquire("run-b") as session, pytest.raises(NotFoundError):
            session.load()

    def test_first_save_expects_zero_and_writes_revision_one(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        record = sample_record("run-a", 1)
        with durable_store.acquire("run-a") as session:
            session.save(record, 0)
            loaded = session.load()
        assert loaded.revision == 1
        assert loaded == record
        assert _json(loaded) == _json(record)

    def test_each_save_raises_the_revision_by_one(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            for revision in range(1, 6):
                session.save(sample_record("run-a", revision, marker=str(revision)), revision - 1)
                loaded = session.load()
                assert loaded.revision == revision
                assert loaded.version == f"v1{revision}"

    @pytest.mark.parametrize("expected", [0, 1, 3, 4])
    def test_cas_conflict_keeps_the_old_record(self, durable_store: Store, expected: int) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            session.save(sample_record("run-a", 2, marker="stored"), 1)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", expected + 1, marker="lost"), expected)
            loaded = session.load()
            assert _json(loaded) == _json(sample_record("run-a", 2, marker="stored"))
            # the session stays usable after a conflict
            session.save(sample_record("run-a", 3), 2)
            assert session.load().revision == 3

    @pytest.mark.parametrize("expected", [1, 2, 7])
    def test_first_save_must_expect_zero(self, durable_store: Store, expected: int) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", expected + 1), expected)
            with pytest.raises(NotFoundError):
                session.load()

    @pytest.mark.parametrize("revision", [0, 1, 3, 4])
    def test_record_revision_must_be_expected_plus_one(
        self, durable_store: Store, revision: int
    ) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", revision, marker="lost"), 1)
            assert _json(session.load()) == _json(sample_record("run-a", 1))

    def test_run_id_mismatch_is_refused(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-b", 1), 0)
            with pytest.raises(NotFoundError):
                session.load()
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-A", 2), 1)
            assert _json(session.load()) == _json(sample_record("run-a", 1))
        with durable_store.acquire("run-b") as other, pytest.raises(NotFoundError):
            other.load()

    def test_revision_overflow_is_refused(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 1), MAX_REVISION)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 2), MAX_REVISION + 1)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", 0), -1)
            with pytest.raises(NotFoundError):
                session.load()
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 1), MAX_REVISION)
            assert session.load().revision == 1

    def test_stale_owner_cannot_overwrite_a_newer_record(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-3, R-STORE-4, R-RT-2
        stuck = durable_store.acquire("run-a")
        stuck.save(sample_record("run-a", 1), 0)
        snapshot = stuck.load()
        stuck.close()  # the stuck owner's session is gone
        newer = sample_record("run-a", 2, marker="newer")
        with durable_open_store().acquire("run-a") as session:
            session.save(newer, 1)
        with pytest.raises(SessionClosedError):
            stuck.save(sample_record("run-a", 2, marker="stale"), snapshot.revision)
        with durable_store.acquire("run-a") as again:
            with pytest.raises(ConflictError):
                again.save(sample_record("run-a", 2, marker="stale"), snapshot.revision)
            assert _json(again.load()) == _json(newer)
