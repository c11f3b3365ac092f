"""Sub nodes: child scopes named by the Sub node's deepest attempt, Retry on a Sub, and failures
inside a child scope that an earlier process left half-recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durable_core import (
    AttemptState,
    CheckpointError,
    Graph,
    In,
    Key,
    MemoryStore,
    NodeFailedError,
    Out,
    Retry,
    Runtime,
    validate_record,
)
from durable_core.durable.fingerprint import bindings_fingerprint
from tests.durable_core.durable.scenarios import (
    SEED,
    CallLog,
    FailingStore,
    load,
    open_store,
    with_sub,
)

STORES = ["memory", "file", "sqlite"]
X, Y, Z = Key("x", int), Key("y", int), Key("z", int)
K, OUT = Key("k", int), Key("out", int)


def retried_sub(log: CallLog, *, attempts: int = 2, fail_first: int = 1) -> Graph:
    """seed -> Sub "job" [Retry(attempts)] (prep -> work) -> out; ``work`` fails its first
    ``fail_first`` invocations."""
    child = Graph("job", inputs=[X])

    @child.node("prep", requires=[X], provides=[Y])
    def prep(rc: Any) -> None:
        log.write("job/prep")
        rc.set(Y, rc.get(X) * 2)

    @child.node("work", requires=[Y], provides=[Z])
    def work(rc: Any) -> None:
        log.write("job/work")
        if log.count("job/work") <= fail_first:
            raise TimeoutError("the service did not answer")
        rc.set(Z, rc.get(Y) + 1)

    g = Graph("main", inputs=[SEED])
    aspects = [Retry(attempts)] if attempts > 1 else []
    g.sub("job", child, bindings=[In(SEED, X), Out(Z, OUT)], aspects=aspects)
    return g


@pytest.mark.parametrize("kind", STORES)
def test_a_child_scope_is_named_by_the_sub_nodes_attempt(kind: str, tmp_path: Path) -> None:
    # covers: R-SCOPE-1, R-SCOPE-2, G-9
    store = open_store(kind, tmp_path / "store")
    graph = with_sub(CallLog(tmp_path / "calls.log"))
    result = Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 1})
    assert result.status == "completed"
    record = load(store, "r1")
    validate_record(record, definition=graph.describe_provides())
    (sub_id,) = [aid for aid, a in record.attempts.items() if a.node_id == "inner"]
    assert sorted(record.scopes) == sorted([record.root_scope, sub_id])
    scope = record.scopes[sub_id]
    assert (scope.graph, scope.path, scope.bindings) == ("inner", "inner", True)
    assert scope.inputs == bindings_fingerprint("inner", [("in", "k1", "x"), ("out", "k2", "y3")])
    for node_id in ("c1", "c2", "c3"):
        attempt = record.attempts[scope.nodes[node_id].attempt]
        assert (attempt.parent, attempt.node_id, attempt.state) == (
            sub_id,
            node_id,
            AttemptState.CONFIRMED,
        )
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_retry_on_a_sub_reruns_the_child_in_a_new_scope(kind: str, tmp_path: Path) -> None:
    # covers: R-SCOPE-2, R-ATT-3, R-ATT-5, G-9
    store = open_store(kind, tmp_path / "store")
    log = CallLog(tmp_path / "calls.log")
    graph = retried_sub(log)
    result = Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 5})
    assert result.status == "completed" and result[OUT] == 11
    assert log.calls() == ["job/prep", "job/work", "job/prep", "job/work"]
    record = load(store, "r1")
    validate_record(record, definition=graph.describe_provides())
    tries = sorted(
        (a.index, a.state, aid)
        for aid, a in record.attempts.items()
        if a.node_id == "job" and a.boundary
    )
    assert [(i, s) for i, s, _ in tries] == [(1, AttemptState.FAILED), (2, AttemptState.CONFIRMED)]
    first, second = tries[0][2], tries[1][2]
    # one scope per try, named by the try; the failed try's scope stays, never used again
    assert record.scopes[first].path == record.scopes[second].path == "job"
    assert sorted(record.scopes[first].nodes) == ["prep"]
    assert sorted(record.scopes[second].nodes) == ["prep", "work"]
    failed_work = [a for a in record.attempts.values() if a.parent == first and a.node_id == "work"]
    assert [a.state for a in failed_work] == [AttemptState.FAILED]

    again = Runtime(store).resume(graph, run_id="r1", version="v1", inputs={SEED: 5})
    assert again.status == "completed" and again[OUT] == 11 and again.restored == 1
    assert len(log.calls()) == 4
    store.close()


def fails_sub_try(record: Any) -> bool:
    """The save that records the Sub node's Retry try as failed."""
    return any(
        a.node_id == "job" and a.boundary and a.state is AttemptState.FAILED
        for a in record.attempts.values()
    )


@pytest.mark.parametrize("kind", STORES)
def test_a_sub_try_whose_child_failed_before_the_crash_counts_as_failed(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-ATT-4, R-SCOPE-2, R-RT-2
    real = open_store(kind, tmp_path / "store")
    log = CallLog(tmp_path / "calls.log")
    failing = FailingStore(real, fails_sub_try)
    with pytest.raises(CheckpointError):
        Runtime(failing).run(retried_sub(log), run_id="r1", version="v1", inputs={SEED: 5})
    stored = load(real, "r1")
    (try_one,) = [aid for aid, a in stored.attempts.items() if a.node_id == "job" and a.boundary]
    assert stored.attempts[try_one].state is AttemptState.ACTIVE  # its failure was not saved
    work = [a for a in stored.attempts.values() if a.parent == try_one and a.node_id == "work"]
    assert [a.state for a in work] == [AttemptState.FAILED]
    assert log.calls() == ["job/prep", "job/work"]

    graph = retried_sub(log)
    result = Runtime(real).resume(graph, run_id="r1", version="v1", inputs={SEED: 5})
    assert result.status == "completed" and result[OUT] == 11
    # the failed child is not run again in its old scope: the second try runs a new one
    assert log.calls() == ["job/prep", "job/work", "job/prep", "job/work"]
    final = load(real, "r1")
    validate_record(final, definition=graph.describe_provides())
    tries = sorted(
        (a.index, a.state) for a in final.attempts.values() if a.node_id == "job" and a.boundary
    )
    assert tries == [(1, AttemptState.FAILED), (2, AttemptState.CONFIRMED)]
    real.close()


def fails_sub_root(record: Any) -> bool:
    return any(
        a.node_id == "job" and not a.boundary and a.state is AttemptState.FAILED
        for a in record.attempts.values()
    )


@pytest.mark.parametrize("crash_window", [False, True], ids=["recorded", "half-recorded"])
def test_a_sub_that_failed_for_good_is_reported_on_resume(
    crash_window: bool, tmp_path: Path
) -> None:
    # covers: R-ATT-4, G-6, G-9
    real = MemoryStore()
    log = CallLog(tmp_path / "calls.log")
    graph = retried_sub(log, attempts=1, fail_first=10)
    if crash_window:  # the child's failure was saved, the Sub's root attempt's was not
        with pytest.raises(CheckpointError):
            Runtime(FailingStore(real, fails_sub_root)).run(
                graph, run_id="r1", version="v1", inputs={SEED: 5}
            )
        stored = load(real, "r1")
        roots = [a for a in stored.attempts.values() if a.node_id == "job"]
        assert [a.state for a in roots] == [AttemptState.ACTIVE]
    else:
        first = Runtime(real).run(graph, run_id="r1", version="v1", inputs={SEED: 5})
        assert first.status == "failed" and first.error.path == "job"
        assert first.error.__cause__.path == "job/work"
        assert isinstance(first.error.original, TimeoutError)
    calls = log.calls()
    before = load(real, "r1")

    result = Runtime(real).resume(graph, run_id="r1", version="v1", inputs={SEED: 5})
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailedError)
    assert result.error.path == "job"
    assert log.calls() == calls  # nothing ran
    assert load(real, "r1") == before  # nothing saved
