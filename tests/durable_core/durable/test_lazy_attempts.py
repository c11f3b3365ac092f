"""Attempts are saved when they matter: a node's root attempt is written with the first change
that needs it (a Retry try, a child scope, a failure, the confirmation), and every save's delta
folds into exactly the complete record the store was given."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from durable_core import (
    AttemptState,
    ConflictError,
    EncodedRecord,
    EventKind,
    Graph,
    Key,
    MemoryStore,
    NodeFailedError,
    RecoveryEvent,
    Runtime,
    record_to_json,
)
from durable_core.records.delta import apply_delta, read_delta
from tests.durable_core.durable.scenarios import (
    SEED,
    CallLog,
    FailingStore,
    chain5,
    load,
    retry3,
    streaming,
    with_sub,
)


def test_nodes_that_have_not_started_leave_nothing_in_the_record(tmp_path: Path) -> None:
    # covers: R-ATT-2, R-RT-1
    real = MemoryStore()
    failing = FailingStore(real, fail_on=2)  # the first confirmation
    with pytest.raises(Exception, match="may or may not"):
        Runtime(failing).run(
            chain5(CallLog(tmp_path / "log")), run_id="r1", version="v1", inputs={SEED: 4}
        )
    first = load(real, "r1")
    assert first.revision == 1
    assert first.attempts == {}  # five nodes, none confirmed: nothing of them was saved


def test_a_node_that_fails_saves_its_root_attempt_failed_and_never_runs_again(
    tmp_path: Path,
) -> None:
    # covers: R-ATT-4, R-RT-3
    calls: list[str] = []
    n, out = Key("n", int), Key("out", int)
    g = Graph("g", inputs=[n])

    @g.node("boom", requires=[n], provides=[out])
    def boom(rc: Any) -> None:
        calls.append("boom")
        raise ValueError("broken")

    store = MemoryStore()
    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={n: 1})
    assert result.status == "failed"
    record = load(store, "r1")
    assert [(a.node_id, a.state) for a in record.attempts.values()] == [
        ("boom", AttemptState.FAILED)
    ]
    assert record.revision == 2  # the first record, then the root attempt begun and failed
    again = Runtime(store).resume(g, run_id="r1", version="v1", inputs={n: 1})
    assert again.status == "failed" and isinstance(again.error, NodeFailedError)
    assert calls == ["boom"]


def test_a_child_scope_that_opens_writes_the_sub_nodes_root_attempt(tmp_path: Path) -> None:
    # covers: R-SCOPE-2, R-ATT-2, R-ATT-4
    real = MemoryStore()
    log = CallLog(tmp_path / "log")
    # Stop at the first save that holds the child scope (it is written all the same).
    failing = FailingStore(real, lambda record: len(record.scopes) > 1, written=True)
    with pytest.raises(Exception, match="may or may not"):
        Runtime(failing).run(with_sub(log), run_id="r1", version="v1", inputs={SEED: 1})
    stored = load(real, "r1")
    (child_id,) = set(stored.scopes) - {stored.root_scope}
    sub_attempt = stored.attempts[child_id]  # the scope's id is the Sub node's attempt
    assert (sub_attempt.node_id, sub_attempt.parent, sub_attempt.state) == (
        "inner",
        stored.root_scope,
        AttemptState.ACTIVE,
    )
    observed: list[RecoveryEvent] = []
    result = Runtime(real, observers=[observed.append]).resume(
        with_sub(log), run_id="r1", version="v1", inputs={SEED: 1}
    )
    assert result.status == "completed"
    adopted = [e.node_id for e in observed if e.kind is EventKind.ATTEMPT_ADOPTED]
    assert "inner" in adopted
    final = load(real, "r1")
    assert final.attempts[child_id].state is AttemptState.CONFIRMED
    assert all(a.state is AttemptState.CONFIRMED for a in final.attempts.values())


class _Keeping:
    """A MemoryStore whose sessions keep each save's bytes and delta, and ``record_to_json`` of
    the record each save was given (encoded when it was saved)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.saves: list[tuple[int, bytes, bytes | None]] = []
        self.records: list[bytes] = []
        self.lock = threading.Lock()

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        store, session = self, self.inner.acquire(run_id, timeout)

        class _Session:
            run_id = session.run_id
            load = session.load
            close = session.close

            def save(self, record: Any, expected: int, encoded: Any = None) -> None:
                if encoded is None:  # from a wrapper that does not pass it on
                    encoded = EncodedRecord(record_to_json(record))
                with store.lock:
                    store.saves.append((record.revision, encoded.data, encoded.delta))
                    store.records.append(record_to_json(record))
                session.save(record, expected, encoded)

        return _Session()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(
    ("scenario", "fail_on"),
    [
        (chain5, None),
        (chain5, 3),
        (retry3, None),
        (retry3, 3),
        (with_sub, None),
        (with_sub, 3),
        (streaming, None),
        (streaming, 3),  # the stream's opening save: the producer's root attempt comes with it
        (streaming, 9),  # mid-stream: resume raises the generation, adopts the producer
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_each_delta_folds_into_exactly_the_complete_record_of_its_save(
    scenario: Any, fail_on: int | None, tmp_path: Path
) -> None:
    # covers: R-REC-4, R-STORE-3, R-RT-1, S-2
    store = _Keeping()
    log = CallLog(tmp_path / "log")
    runtime = Runtime(store)
    if fail_on:  # stop at save ``fail_on``, then resume: the encoder starts from a load
        failing = FailingStore(store, fail_on=fail_on)
        with pytest.raises(Exception, match="may or may not"):
            Runtime(failing).run(scenario(log), run_id="r1", version="v1", inputs={SEED: 2})
        store.saves.clear()
        store.records.clear()
        loaded = record_to_json(load(store.inner, "r1"))
        result = runtime.resume(scenario(log), run_id="r1", version="v1", inputs={SEED: 2})
    else:
        loaded = None
        result = runtime.run(scenario(log), run_id="r1", version="v1", inputs={SEED: 2})
    assert result.status == "completed"
    revision, complete, delta = store.saves[0]
    if loaded is None:
        assert delta is None  # the first record of a run: nothing to be a delta of
    else:  # the first save after a resume: the change against the record it loaded
        assert delta is not None
        assert apply_delta(loaded, delta) == complete
    assert complete == store.records[0]
    for (revision, data, delta), given in zip(store.saves[1:], store.records[1:], strict=True):
        assert delta is not None
        checked = read_delta(delta)
        assert (checked.base, checked.revision) == (revision - 1, revision)
        complete = apply_delta(complete, delta)
        assert complete == data == given, revision
    assert complete == record_to_json(load(store.inner, "r1"))
    if scenario is streaming:
        _assert_stream_entries_were_added_changed_and_shrunk(store.records)


def _assert_stream_entries_were_added_changed_and_shrunk(records: list[bytes]) -> None:
    """The saves of a streaming run added ``Streams`` entries, changed them, and shrank a
    ``Pending`` list (an ack): the deltas above covered each kind of stream change."""
    added = changed = shrunk = 0
    before: dict[str, Any] = {}
    for data in records:
        streams = json.loads(data)["Streams"]
        for entry_id, entry in streams.items():
            old = before.get(entry_id)
            if old is None:
                added += 1
            elif old != entry:
                changed += 1
                shrunk += len(entry["Pending"]) < len(old["Pending"])
        before = streams
    assert added >= 4 and changed > 0 and shrunk > 0, (added, changed, shrunk)


def test_a_delta_save_with_a_stale_revision_is_refused_and_changes_nothing() -> None:
    # covers: R-STORE-3
    store = MemoryStore()
    graph_store = _Keeping()
    graph_store.inner = store
    n, out = Key("n", int), Key("out", int)
    g = Graph("g", inputs=[n])
    g.add_node("a", lambda rc: rc.set(out, rc.get(n)), requires=[n], provides=[out])
    Runtime(graph_store).run(g, run_id="r1", version="v1", inputs={n: 1})
    revision, data, delta = graph_store.saves[-1]
    assert delta is not None
    with store.acquire("r1") as session:
        before = record_to_json(session.load())
        record = session.load()
        record.revision = revision  # claims to follow revision - 1, which is no longer stored
        with pytest.raises(ConflictError):
            session.save(record, revision - 1, EncodedRecord(data, delta))
        assert record_to_json(session.load()) == before
