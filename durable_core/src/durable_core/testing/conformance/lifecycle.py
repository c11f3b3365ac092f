"""Sessions and stores open and close: idempotent close, context managers, reopening (SPEC
R-STORE-2, R-STORE-4)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from durable_core.errors import (
    SessionClosedError,
)
from durable_core.store import Session, Store
from durable_core.testing.conformance.base import (
    _json,
)
from durable_core.testing.records import sample_record

__all__ = ["LifecycleClauses"]


class LifecycleClauses:
    """A session owns its run until closed; a closed one refuses; records outlive the store."""

    def test_session_owns_its_run_id(self, durable_store: Store) -> None:
        # covers: R-STORE-2
        with durable_store.acquire("run-ä") as session:
            assert isinstance(session, Session)
            assert session.run_id == "run-ä"

    def test_close_is_idempotent_and_load_save_after_close_raise(
        self, durable_store: Store
    ) -> None:
        # covers: R-STORE-4
        session = durable_store.acquire("run-a")
        session.save(sample_record("run-a", 1), 0)
        session.close()
        session.close()
        with pytest.raises(SessionClosedError):
            session.load()
        with pytest.raises(SessionClosedError):
            session.save(sample_record("run-a", 2), 1)
        with durable_store.acquire("run-a") as again:
            assert _json(again.load()) == _json(sample_record("run-a", 1))

    def test_with_block_closes_the_session(self, durable_store: Store) -> None:
        # covers: R-STORE-4
        with durable_store.acquire("run-a") as session:
            pass
        with pytest.raises(SessionClosedError):
            session.load()
        durable_store.acquire("run-a").close()

    def test_store_close_closes_its_sessions(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-4
        session = durable_store.acquire("run-a")
        session.save(sample_record("run-a", 1), 0)
        durable_store.close()
        durable_store.close()
        with pytest.raises(SessionClosedError):
            session.load()
        with pytest.raises(SessionClosedError):
            session.save(sample_record("run-a", 2), 1)
        other = durable_open_store()
        if other is not durable_store:  # a store reopened over the same storage
            with other.acquire("run-a") as again:
                assert _json(again.load()) == _json(sample_record("run-a", 1))

    def test_record_survives_reopening_the_store(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-2, R-STORE-3
        record = sample_record("run-a", 2)
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            session.save(record, 1)
        with durable_open_store().acquire("run-a") as session:
            assert _json(session.load()) == _json(record)
