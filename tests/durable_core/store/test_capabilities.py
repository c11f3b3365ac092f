"""store/capabilities.py: what a store declares is what Durable asks, and a class that declares
nothing is read by its methods."""

from __future__ import annotations

from typing import Any

import pytest

from durable_core.errors import ConfigError
from durable_core.maintenance import delete_run
from durable_core.store import (
    CAPABILITY_SPECS,
    BaseSession,
    Capability,
    MemorySession,
    MemoryStore,
    capabilities,
)
from durable_core.testing import sample_record


def test_every_capability_has_its_row() -> None:
    # covers: R-STORE-1
    assert set(CAPABILITY_SPECS) == set(Capability)
    for capability, spec in CAPABILITY_SPECS.items():
        assert spec.declared_on in {"store", "session"}, capability
        assert spec.protocol is not None or spec.legacy is not None or spec.held_by == "session"


def test_the_built_in_stores_declare_what_they_have() -> None:
    # covers: R-STORE-1
    store = MemoryStore()
    with store.acquire("run-a") as session:
        assert capabilities(session) == {Capability.ENCODED_SAVES, Capability.QUICK_SAVES}
    assert Capability.DELETE in capabilities(store)
    assert Capability.SAVE_TIMES not in capabilities(store)  # saved_at is nowhere there


class _Bare:
    """A store written against the bare protocols: it declares nothing."""

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _BareSession()

    def close(self) -> None:
        pass

    def list_runs(self) -> list[Any]:
        return []

    def saved_at(self, run_id: str) -> float | None:
        return None


class _BareSession:
    quick_saves = True
    run_id = "run-a"

    def load(self) -> Any:
        raise NotImplementedError

    def save(self, record: Any, expected_revision: int) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_class_that_declares_nothing_is_read_by_what_it_has() -> None:
    # covers: R-STORE-1
    assert capabilities(_Bare()) == {Capability.LIST_RUNS, Capability.SAVE_TIMES}
    # No encoded argument, so no ENCODED_SAVES; the flag's old spelling still counts.
    assert capabilities(_BareSession()) == {Capability.QUICK_SAVES}


def test_a_declaration_is_taken_at_its_word() -> None:
    # covers: R-STORE-1
    class Declares(MemoryStore):
        capabilities = frozenset({Capability.PEEK})

    assert capabilities(Declares()) == {Capability.PEEK}  # list_runs is there, not declared


def test_a_declaration_that_is_no_set_of_capabilities_is_refused() -> None:
    # covers: R-STORE-1
    class Wrong(MemoryStore):
        capabilities = frozenset({"peek"})  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"frozenset of durable_core\.store\.Capability"):
        capabilities(Wrong())


def test_an_undeclared_capability_is_refused_with_what_is_missing() -> None:
    # covers: R-STORE-1
    class NoDelete(MemoryStore):
        capabilities = frozenset({Capability.LIST_RUNS})

    store = NoDelete()
    with store.acquire("run-a") as session:
        session.save(sample_record("run-a", 1), 0)
    with pytest.raises(ConfigError, match=r"cannot delete runs.*Capability\.DELETE"):
        delete_run(store, "run-a")
    with store.acquire("run-a") as session:  # refused before anything was removed, and released
        assert session.load().revision == 1


def test_a_kit_session_that_misses_a_hook_fails_when_it_is_made() -> None:
    # covers: R-STORE-4
    class NoRelease(BaseSession):
        def _read(self) -> Any:
            return None

        def _write(self, record: Any, expected_revision: int, encoded: Any) -> bool:
            return True

    with pytest.raises(TypeError, match="_release"):
        NoRelease(MemoryStore(), "run-a", "nowhere")  # type: ignore[abstract]
    assert issubclass(MemorySession, BaseSession)
