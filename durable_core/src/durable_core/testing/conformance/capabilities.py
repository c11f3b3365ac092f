"""The clauses of the optional capabilities: each one runs when the store declares it.

A store declares its capabilities in the ClassVar ``capabilities``
(:mod:`durable_core.store.capabilities`). The clause
``test_declared_capabilities_are_implemented`` fails a store that declares one it does not
implement; the clauses named in :data:`CAPABILITY_CLAUSES` check that each declared one behaves
(and are skipped for one that is not declared). Every
:class:`~durable_core.store.capabilities.Capability` has its clauses here: the clause
``test_every_capability_has_clauses`` fails the kit for a member without.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from durable_core.errors import ConflictError, NotFoundError, SessionClosedError
from durable_core.store import Store
from durable_core.store.capabilities import (
    CAPABILITY_SPECS,
    Capability,
    _accepts_encoded,
    capabilities,
)
from durable_core.testing.conformance.base import (
    RawRecords,
    StoreSpec,
    _chain,
    _encoded,
    _json,
    needs,
)
from durable_core.testing.conformance.inbox import INBOX_CLAUSES
from durable_core.testing.records import sample_record

__all__ = ["CAPABILITY_CLAUSES", "CapabilityClauses"]

CAPABILITY_CLAUSES: Mapping[Capability, tuple[str, ...]] = {
    Capability.LIST_RUNS: ("test_list_runs",),
    Capability.PEEK: ("test_peek_reads_the_last_committed_record_without_owning_the_run",),
    Capability.SAVE_TIMES: ("test_saved_at_is_when_the_record_was_last_written",),
    Capability.CREATE_TIMES: ("test_created_at_is_when_the_first_record_was_written",),
    Capability.CANCEL_REQUESTS: ("test_a_cancel_request_reaches_the_runs_watcher",),
    Capability.RUN_HISTORY: (
        "test_history_is_read_back_in_the_order_appended",
        "test_history_refuses_an_entry_that_is_not_one_line",
        "test_history_is_kept_per_run_and_per_root_scope",
        "test_history_is_kept_per_store",
        "test_history_is_seen_by_another_store_object_on_the_same_storage",
        "test_a_deleted_runs_history_goes_with_it",
        "test_history_never_changes_the_record",
        "test_concurrent_appenders_in_two_processes_never_tear_an_entry",
    ),
    Capability.DELETE: (
        "test_delete_removes_the_run_and_closes_the_session",
        "test_delete_without_a_record_raises_not_found",
    ),
    Capability.RESTORE: (
        "test_restore_writes_a_copied_record_at_its_own_revision",
        "test_restore_never_overwrites_a_record",
    ),
    Capability.RESTORE_TIMES: ("test_restore_times_gives_a_copied_run_its_times",),
    Capability.ENCODED_SAVES: ("test_save_takes_the_callers_encoding",),
    Capability.QUICK_SAVES: ("test_saves_may_run_on_an_event_loops_thread",),
    Capability.IDLE_SAVES: ("test_saves_may_run_on_an_event_loops_thread",),
    Capability.INBOX: INBOX_CLAUSES,
}
"""The clauses of each capability (names of :class:`CapabilityClauses`' tests)."""

_CLOCK_SLACK = 2.0
"""Seconds a store's clock (a database server's, a file system's) may differ from this one's."""

_APPENDS = 20
_PER_APPEND = 5
_PADDING = 5000


def _append_history_child(factory: Callable[[], Store], name: str, start: Any) -> None:
    """A child process appending to one run's history, in many calls of several long
    entries each (``name:number:padding``)."""
    store: Any = factory()
    try:
        start.wait(60)
        for call in range(_APPENDS):
            store.append_history(
                "shared",
                "scope-1",
                [f"{name}:{call * _PER_APPEND + i}:{'x' * _PADDING}" for i in range(_PER_APPEND)],
            )
    finally:
        store.close()


class CapabilityClauses:
    """The clauses of the optional capabilities, run for what the store declares."""

    # -- the declarations themselves ---------------------------------------------------------

    def test_every_capability_has_clauses(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        missing = [c.name for c in Capability if not CAPABILITY_CLAUSES.get(c)]
        assert not missing, f"capabilities without clauses in the kit: {missing}"
        absent = [
            name
            for names in CAPABILITY_CLAUSES.values()
            for name in names
            if not callable(getattr(self, name, None))
        ]
        assert not absent, f"clauses named in CAPABILITY_CLAUSES but not defined: {absent}"

    def test_declared_capabilities_are_implemented(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        declared_by_store = capabilities(durable_store)
        with durable_store.acquire("run-capabilities") as session:
            declared_by_session = capabilities(session)
            problems = []
            for found, place in ((declared_by_store, "store"), (declared_by_session, "session")):
                for capability in sorted(found, key=lambda c: c.value):
                    spec = CAPABILITY_SPECS[capability]
                    if spec.declared_on != place:
                        problems.append(
                            f"Capability.{capability.name} is declared on the {place} class; it "
                            f"belongs on the {spec.declared_on} class"
                        )
                        continue
                    holder = durable_store if spec.held_by == "store" else session
                    if capability is Capability.ENCODED_SAVES:
                        if not _accepts_encoded(holder):
                            problems.append(
                                "Capability.ENCODED_SAVES is declared but save() takes no "
                                "'encoded' argument"
                            )
                    elif spec.protocol is not None and not isinstance(holder, spec.protocol):
                        problems.append(
                            f"Capability.{capability.name} is declared but the {spec.held_by} "
                            f"({type(holder).__name__}) does not implement "
                            f"{spec.protocol.__name__}"
                        )
        assert not problems, "; ".join(problems)

    # -- listing, peeking, times ---------------------------------------------------------------

    def test_list_runs(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.LIST_RUNS)
        assert list(durable_store.list_runs()) == []
        ids = ["run-b", "run-a", "运行-ü"]
        for revisions, run_id in enumerate(ids, start=1):
            with durable_store.acquire(run_id) as session:
                for revision in range(1, revisions + 1):
                    session.save(sample_record(run_id, revision), revision - 1)
        with durable_store.acquire("run-a"):  # an owned run is listed too
            summaries = list(durable_store.list_runs())
        assert [s.run_id for s in summaries] == sorted(ids)
        assert {s.run_id: s.revision for s in summaries} == {"run-b": 1, "run-a": 2, "运行-ü": 3}
        assert all(s.ok and s.format == 2 for s in summaries)

    def test_peek_reads_the_last_committed_record_without_owning_the_run(
        self, durable_store: Store
    ) -> None:
        # covers: R-STORE-1, R-STORE-2
        needs(durable_store, Capability.PEEK)
        store: Any = durable_store
        with pytest.raises(NotFoundError):
            store.peek("run-a")
        first, second = _chain("run-a", 2)
        with durable_store.acquire("run-a") as session:
            session.save(first, 0)
            assert _json(store.peek("run-a")) == _json(first)  # while the run is owned
            session.save(second, 1, _encoded(first, second))
            assert _json(store.peek("run-a")) == _json(second)
        assert _json(store.peek("run-a")) == _json(second)
        with durable_store.acquire("run-a") as session:  # peeking took no ownership
            assert _json(session.load()) == _json(second)
        with pytest.raises(NotFoundError):
            store.peek("run-b")

    def test_saved_at_is_when_the_record_was_last_written(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.SAVE_TIMES)
        store: Any = durable_store
        assert store.saved_at("run-a") is None
        before = time.time()
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        after = time.time()
        saved = store.saved_at("run-a")
        assert saved is not None, "saved_at is None for a saved run"
        assert before - _CLOCK_SLACK <= saved <= after + _CLOCK_SLACK, (before, saved, after)
        assert store.saved_at("run-b") is None

    def test_created_at_is_when_the_first_record_was_written(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.CREATE_TIMES)
        store: Any = durable_store
        assert store.created_at("run-a") is None
        before = time.time()
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        after = time.time()
        created = store.created_at("run-a")
        assert created is not None, "created_at is None for a saved run"
        assert before - _CLOCK_SLACK <= created <= after + _CLOCK_SLACK, (before, created, after)
        time.sleep(0.05)
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 2), 1)
        assert store.created_at("run-a") == created, "a later save changed created_at"

    # -- cancel requests ---------------------------------------------------------------------

    def test_a_cancel_request_reaches_the_runs_watcher(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.CANCEL_REQUESTS)
        store: Any = durable_store
        asker: Any = durable_open_store()  # another store object over the same storage
        asked = threading.Event()
        others = threading.Event()
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            stop = store.watch_cancel("run-a", asked.set)
            stop_other = store.watch_cancel("run-b", others.set)
            try:
                deadline = time.monotonic() + 10
                while not asked.is_set() and time.monotonic() < deadline:
                    asker.request_cancel("run-a")  # asked again: a watcher may start late
                    asked.wait(0.5)
                assert asked.is_set(), "the watcher of run-a never heard the cancel request"
                assert not others.is_set(), "a cancel request of run-a reached run-b's watcher"
            finally:
                stop()
                stop_other()

    # -- deleting and restoring ----------------------------------------------------------------

    def test_delete_removes_the_run_and_closes_the_session(self, durable_store: Store) -> None:
        # covers: R-STORE-1, R-STORE-4
        needs(durable_store, Capability.DELETE)
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        with durable_store.acquire("run-b") as session:
            session.save(sample_record("run-b", 1), 0)
        session: Any = durable_store.acquire("run-a")
        session.delete()
        with pytest.raises(SessionClosedError):
            session.load()
        with durable_store.acquire("run-a") as again:  # the run is free and gone
            with pytest.raises(NotFoundError):
                again.load()
            again.save(sample_record("run-a", 1, marker="new"), 0)  # the id starts again
        with durable_store.acquire("run-b") as other:  # other runs are untouched
            assert _json(other.load()) == _json(sample_record("run-b", 1))

    def test_delete_without_a_record_raises_not_found(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.DELETE)
        session: Any = durable_store.acquire("run-a")
        try:
            with pytest.raises(NotFoundError):
                session.delete()
        finally:
            session.close()

    def test_restore_writes_a_copied_record_at_its_own_revision(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        needs(durable_store, Capability.RESTORE)
        copied = sample_record("run-a", 7)
        session: Any
        with durable_store.acquire("run-a") as session:
            session.restore(copied)
            assert _json(session.load()) == _json(copied)
            session.save(sample_record("run-a", 8), 7)  # the run goes on from its revision
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(sample_record("run-a", 8))

    def test_restore_never_overwrites_a_record(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        needs(durable_store, Capability.RESTORE)
        session: Any
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.restore(sample_record("run-a", 5, marker="copied"))
            assert _json(session.load()) == _json(sample_record("run-a", 1))

    def test_restore_times_gives_a_copied_run_its_times(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        needs(durable_store, Capability.RESTORE_TIMES)
        store: Any = durable_store
        created, saved = 1_000_000_000.0, 1_500_000_000.0
        session: Any
        with durable_store.acquire("run-a") as session:
            session.restore(sample_record("run-a", 3))
            session.restore_times(created, saved)
        found = capabilities(durable_store)
        assert Capability.SAVE_TIMES in found or Capability.CREATE_TIMES in found, (
            "RESTORE_TIMES is declared, but the store knows no times to restore"
        )
        if Capability.SAVE_TIMES in found:
            assert abs(store.saved_at("run-a") - saved) < 1.0
        if Capability.CREATE_TIMES in found:
            assert abs(store.created_at("run-a") - created) < 1.0
        with durable_store.acquire("run-b") as session, pytest.raises(NotFoundError):
            session.restore_times(created, saved)

    # -- how the runtime may call save --------------------------------------------------------

    def test_save_takes_the_callers_encoding(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            needs(durable_store, Capability.ENCODED_SAVES, session)
            first, second = _chain("run-a", 2)
            session.save(first, 0, encoded=_encoded(None, first))
            session.save(second, 1, encoded=_encoded(first, second))
            assert _json(session.load()) == _json(second)

    def test_saves_may_run_on_an_event_loops_thread(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            found = capabilities(session)
            if not {Capability.QUICK_SAVES, Capability.IDLE_SAVES} & found:
                pytest.skip("the session declares neither QUICK_SAVES nor IDLE_SAVES (optional)")
            records = _chain("run-a", 5)

            async def save_on_the_loop() -> None:
                previous = None
                for record in records:  # called right on the loop's thread, as the runtime does
                    session.save(record, record.revision - 1, _encoded(previous, record))
                    previous = record

            asyncio.run(save_on_the_loop())
            assert _json(session.load()) == _json(records[-1])

    # -- run history (X-HIST) ------------------------------------------------------------------

    @pytest.fixture
    def durable_history_store(self, durable_store: Store) -> Any:
        """The store under test when it has the capability RunHistory; skips otherwise."""
        needs(durable_store, Capability.RUN_HISTORY)
        return durable_store

    @pytest.fixture
    def durable_other_store_factory(self) -> Callable[[], Store] | None:
        """A factory of a store over *other* storage (another directory, database …), for the
        history's isolation between two stores holding one run id; None skips that clause."""
        return None

    def test_history_is_read_back_in_the_order_appended(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        store = durable_history_store
        assert store.read_history("h", "scope-1") == []
        store.append_history("h", "scope-1", ['{"n": 1}', '{"n": 2}'])
        store.append_history("h", "scope-1", [])
        store.append_history("h", "scope-1", ['{"n": 3, "text": "é \\u0000 ✓"}'])
        assert store.read_history("h", "scope-1") == [
            '{"n": 1}',
            '{"n": 2}',
            '{"n": 3, "text": "é \\u0000 ✓"}',
        ]
        many = [f'{{"n": {i}}}' for i in range(500)]
        store.append_history("h-many", "scope-1", many)
        assert store.read_history("h-many", "scope-1") == many

    def test_history_refuses_an_entry_that_is_not_one_line(
        self, durable_history_store: Any
    ) -> None:
        # covers: X-HIST
        store = durable_history_store
        with pytest.raises(ValueError):
            store.append_history("h", "scope-1", ['{"a": 1}', "two\nlines"])
        with pytest.raises(ValueError):
            store.append_history("h", "", ['{"a": 1}'])
        assert store.read_history("h", "scope-1") == []

    def test_history_is_kept_per_run_and_per_root_scope(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        store = durable_history_store
        store.append_history("a", "scope-1", ['{"run": "a1"}'])
        store.append_history("b", "scope-1", ['{"run": "b1"}'])
        store.append_history("a", "scope-2", ['{"run": "a2"}'])
        assert store.read_history("a", "scope-1") == ['{"run": "a1"}']
        assert store.read_history("b", "scope-1") == ['{"run": "b1"}']
        assert store.read_history("a", "scope-2") == ['{"run": "a2"}']
        assert store.read_history("c", "scope-1") == []

    def test_history_is_kept_per_store(
        self,
        durable_history_store: Any,
        durable_other_store_factory: Callable[[], Store] | None,
    ) -> None:
        # covers: X-HIST
        if durable_other_store_factory is None:
            pytest.skip("the backend gives no store over other storage")
        other: Any = durable_other_store_factory()
        try:
            for store, name in ((durable_history_store, "first"), (other, "second")):
                with store.acquire("same") as session:
                    session.save(sample_record("same", 1), 0)
                store.append_history("same", "scope-1", [f'{{"store": "{name}"}}'])
            assert durable_history_store.read_history("same", "scope-1") == ['{"store": "first"}']
            assert other.read_history("same", "scope-1") == ['{"store": "second"}']
        finally:
            other.close()

    def test_history_is_seen_by_another_store_object_on_the_same_storage(
        self, durable_history_store: Any, durable_store_spec: StoreSpec
    ) -> None:
        # covers: X-HIST
        if not durable_store_spec.cross_process:
            pytest.skip("in-process store: another store object has storage of its own")
        durable_history_store.append_history("shared", "scope-1", ['{"n": 1}'])
        other: Any = durable_store_spec.factory()
        try:
            assert other.read_history("shared", "scope-1") == ['{"n": 1}']
            other.append_history("shared", "scope-1", ['{"n": 2}'])
        finally:
            other.close()
        assert durable_history_store.read_history("shared", "scope-1") == ['{"n": 1}', '{"n": 2}']

    def test_a_deleted_runs_history_goes_with_it(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        store = durable_history_store
        needs(store, Capability.DELETE)
        with store.acquire("gone") as session:
            session.save(sample_record("gone", 1), 0)
        store.append_history("gone", "scope-1", ['{"n": 1}'])
        store.append_history("kept", "scope-1", ['{"n": 1}'])
        session = store.acquire("gone")
        session.delete()
        assert store.read_history("gone", "scope-1") == []
        assert store.read_history("kept", "scope-1") == ['{"n": 1}']
        with store.acquire("gone") as session:  # the same id started again
            session.save(sample_record("gone", 1), 0)
        store.append_history("gone", "scope-2", ['{"n": "new"}'])
        assert store.read_history("gone", "scope-1") == []
        assert store.read_history("gone", "scope-2") == ['{"n": "new"}']

    def test_history_never_changes_the_record(
        self, durable_history_store: Any, durable_raw_records: RawRecords
    ) -> None:
        # covers: X-HIST
        store = durable_history_store
        records = _chain("rec", 3)
        with store.acquire("rec") as session:
            session.save(records[0], 0)
            session.save(records[1], 1)
            before = durable_raw_records.read("rec")
            # appended while the run is owned, as the history writer does
            store.append_history("rec", "scope-1", ['{"event": "while owned"}'] * 50)
            assert durable_raw_records.read("rec") == before  # the stored bytes
            assert session.load() == records[1]
            session.save(records[2], 2)  # the revision the session knows is still the stored one
        with store.acquire("rec") as session:
            assert session.load() == records[2]
        store.append_history("rec", "scope-1", ['{"event": "at rest"}'])
        with store.acquire("rec") as session:
            assert session.load() == records[2]

    def test_concurrent_appenders_in_two_processes_never_tear_an_entry(
        self, durable_history_store: Any, durable_store_spec: StoreSpec
    ) -> None:
        # covers: X-HIST
        if not durable_store_spec.cross_process:
            pytest.skip(
                "in-process store, cross-process clauses do not apply: "
                f"{durable_store_spec.reason or 'declared cross_process=False'}"
            )
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        start = context.Event()
        children = [
            context.Process(
                target=_append_history_child, args=(durable_store_spec.factory, name, start)
            )
            for name in ("p", "q")
        ]
        for child in children:
            child.start()
        start.set()
        for child in children:
            child.join(120)
            assert child.exitcode == 0, f"history appender {child.name} exited {child.exitcode}"
        entries = durable_history_store.read_history("shared", "scope-1")
        assert len(entries) == 2 * _APPENDS * _PER_APPEND
        seen: dict[str, list[int]] = {"p": [], "q": []}
        for entry in entries:
            name, number, padding = entry.split(":")
            assert padding == "x" * _PADDING, "an entry was torn or interleaved"
            seen[name].append(int(number))
        for numbers in seen.values():  # each appender's entries, whole and in its order
            assert numbers == list(range(_APPENDS * _PER_APPEND))
