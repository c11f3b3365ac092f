"""The one explicit save path: the runtime hands each save its bytes as an argument
(``Session.save(..., encoded=...)``), group commit owns no task, and the session is closed off the
event loop's thread once no save is in flight."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from durable_core import (
    EncodedRecord,
    MemoryStore,
    RunRecord,
    Runtime,
    ScopeRecord,
    record_from_json,
    record_to_json,
)
from durable_core.durable.ledger import Committed, Ledger, begin_attempt, new_id
from durable_core.records.delta import apply_delta
from tests.durable_core.durable.scenarios import SEED, CallLog, chain5


class _Session:
    """Delegates to a real session; subclasses change ``save``."""

    def __init__(self, owner: Any, session: Any) -> None:
        self.owner = owner
        self.inner = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self.inner.load()

    def close(self) -> None:
        self.owner.closed_in.append(threading.current_thread())
        self.inner.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Store:
    session_class: type = _Session

    def __init__(self, **options: Any) -> None:
        self.inner = MemoryStore()
        self.closed_in: list[threading.Thread] = []
        self.encoded: list[Any] = []
        self.options = options

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return self.session_class(self, self.inner.acquire(run_id, timeout))

    def close(self) -> None:
        self.inner.close()


class _EditingSession(_Session):
    """A wrapper that stamps the record before handing it to the real store, which encodes
    it itself (the wrapper drops the caller's bytes: they no longer match)."""

    def save(
        self, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None = None
    ) -> None:
        record.version = f"{record.version}+stamped{record.revision}"
        self.inner.save(record, expected_revision)


class _OldSession(_Session):
    """A third-party session written before ``encoded`` existed."""

    def save(self, record: RunRecord, expected_revision: int) -> None:
        self.owner.encoded.append((record, None))
        self.inner.save(record, expected_revision)


class _KeepingSession(_Session):
    def save(
        self, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None = None
    ) -> None:
        assert encoded is not None
        data = encoded.data
        assert data == record_to_json(record)
        self.owner.encoded.append((record.revision, data, encoded.delta))
        self.inner.save(record, expected_revision, encoded)


class _GatedSession(_Session):
    """Blocks every save after the first until ``owner.gate`` is set."""

    def save(self, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        if record.revision > 1:
            self.owner.saving.set()
            assert self.owner.gate.wait(60)
        self.inner.save(record, expected_revision, encoded)


def _saving(store: _Store) -> None:
    """Wait until a gated save is in flight (at most 60 s)."""
    assert store.saving.wait(60), "no save started"


def _store(session_class: type) -> _Store:
    store = _Store()
    store.session_class = session_class
    store.gate = threading.Event()  # type: ignore[attr-defined]
    store.saving = threading.Event()  # type: ignore[attr-defined]
    return store


def test_a_store_wrapper_that_edits_the_record_stores_what_it_edited(tmp_path) -> None:
    # covers: R-STORE-3, R-RT-1
    store = _store(_EditingSession)
    graph = chain5(CallLog(tmp_path / "log"))
    result = Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 4})
    assert result.status == "completed"
    with store.inner.acquire("r1") as session:
        stored = session.load()
    # The bytes the real store wrote are those of the edited record, not stale ones (the
    # runtime adopts the record it passed, edits included).
    stamps = "".join(f"+stamped{revision}" for revision in range(1, stored.revision + 1))
    assert stored.version == f"v1{stamps}"


def test_a_store_that_does_not_take_encoded_bytes_still_runs_and_resumes(tmp_path) -> None:
    # covers: R-STORE-3
    store = _store(_OldSession)
    graph = chain5(CallLog(tmp_path / "log"))
    first = Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 4})
    assert first.status == "completed"
    assert len(store.encoded) == first.saves and first.saves > 1
    again = Runtime(store).resume(graph, run_id="r1", version="v1", inputs={SEED: 4})
    assert again.status == "completed" and again.restored == 5


def test_every_save_gets_the_bytes_of_exactly_its_record(tmp_path) -> None:
    # covers: R-REC-4, R-STORE-3
    store = _store(_KeepingSession)
    graph = chain5(CallLog(tmp_path / "log"))
    result = Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 4})
    assert [revision for revision, _, _ in store.encoded] == list(range(1, result.saves + 1))
    with store.inner.acquire("r1") as session:
        assert record_to_json(session.load()) == store.encoded[-1][1]
    # Differential: the first record plus the deltas of every later save, folded, is the
    # complete record of each save, byte for byte.
    assert store.encoded[0][2] is None
    complete = store.encoded[0][1]
    for _, data, delta in store.encoded[1:]:
        assert delta is not None
        complete = apply_delta(complete, delta)
        assert complete == data


def _first_record(run_id: str) -> RunRecord:
    root = new_id()
    return RunRecord(
        run_id=run_id,
        version="v1",
        definition="d" * 64,
        inputs="e" * 64,
        root_scope=root,
        scopes={root: ScopeRecord(graph="g", inputs="e" * 64)},
    )


def test_a_sweep_of_every_other_task_never_strands_a_waiter_or_fails_a_saved_change() -> None:
    # covers: R-RT-1
    store = _store(_GatedSession)
    session = store.acquire("r1")
    ledger = Ledger(session, None)
    ledger.create(_first_record("r1"))
    root = ledger.record.root_scope
    attempt = new_id()

    async def main() -> Committed:
        waiter = asyncio.ensure_future(
            ledger.commit_async(lambda p: begin_attempt(p, attempt, parent=root, node_id="a"))
        )
        # A host cancels every task but its own and the waiter: before the save starts …
        await asyncio.sleep(0)
        ours = {asyncio.current_task(), waiter}
        for task in asyncio.all_tasks() - ours:
            task.cancel()
        # … and while it is in flight.
        await asyncio.to_thread(_saving, store)
        for task in asyncio.all_tasks() - ours:
            task.cancel()
        store.gate.set()
        return await asyncio.wait_for(waiter, 60)

    committed = asyncio.run(main())
    assert committed.revision == 2
    assert ledger.record.attempts[attempt].node_id == "a"
    assert session.load().revision == 2
    session.close()


def test_a_canceled_waiter_leaves_its_change_saved_and_the_others_answered() -> None:
    # covers: R-RT-1
    store = _store(_GatedSession)
    session = store.acquire("r1")
    ledger = Ledger(session, None)
    ledger.create(_first_record("r1"))
    root = ledger.record.root_scope
    first, second = new_id(), new_id()

    async def main() -> Committed:
        one = asyncio.ensure_future(
            ledger.commit_async(lambda p: begin_attempt(p, first, parent=root, node_id="a"))
        )
        two = asyncio.ensure_future(
            ledger.commit_async(lambda p: begin_attempt(p, second, parent=root, node_id="b"))
        )
        await asyncio.to_thread(_saving, store)
        one.cancel()
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await one
        result = await asyncio.wait_for(two, 60)
        await ledger.settle()
        return result

    committed = asyncio.run(main())
    assert committed.revision == 2
    assert {first, second} <= set(session.load().attempts)
    session.close()


@pytest.mark.parametrize("how", ["run", "resume"])
def test_the_session_is_closed_off_the_event_loop_thread(how: str, tmp_path) -> None:
    store = _store(_KeepingSession)
    graph = chain5(CallLog(tmp_path / "log"))
    runtime = Runtime(store)

    async def main() -> threading.Thread:
        if how == "resume":
            await runtime.run_async(graph, run_id="r1", version="v1", inputs={SEED: 4})
            store.closed_in.clear()
            await runtime.resume_async(graph, run_id="r1", version="v1", inputs={SEED: 4})
        else:
            await runtime.run_async(graph, run_id="r1", version="v1", inputs={SEED: 4})
        return threading.current_thread()

    loop_thread = asyncio.run(main())
    assert len(store.closed_in) == 1
    assert store.closed_in[0] is not loop_thread


def test_canceling_the_run_waits_for_the_save_in_flight_and_leaves_no_task(tmp_path) -> None:
    # covers: R-RT-1, R-RT-2
    store = _store(_GatedSession)
    graph = chain5(CallLog(tmp_path / "log"))
    runtime = Runtime(store)

    async def main() -> set[asyncio.Task[Any]]:
        run = asyncio.ensure_future(
            runtime.run_async(graph, run_id="r1", version="v1", inputs={SEED: 4})
        )
        await asyncio.to_thread(_saving, store)
        run.cancel()
        await asyncio.sleep(0.05)
        assert not run.done()  # the session is not closed under the save in flight
        assert store.closed_in == []
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 60)
        return asyncio.all_tasks() - {asyncio.current_task()}

    left = asyncio.run(main())
    assert left == set()
    assert len(store.closed_in) == 1
    with store.inner.acquire("r1") as session:
        stored = session.load()
    assert stored.revision == 2  # the save in flight completed, then the session closed
    assert record_from_json(record_to_json(stored)) == stored
