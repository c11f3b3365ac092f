"""Attempt trees in the record: nested Retry levels, nested Sub scopes, resume inside them."""

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
    Out,
    Retry,
    Runtime,
    validate_record,
)
from tests.durable_core.durable.scenarios import SEED, CallLog, FailingStore, load, open_store

STORES = ["memory", "file", "sqlite"]
OUT = Key("out", int)


@pytest.mark.parametrize("kind", STORES)
def test_nested_retry_levels_record_their_own_boundaries_and_parents(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-ATT-1, R-ATT-2, R-ATT-3, R-ATT-5, G-8
    log = CallLog(tmp_path / "calls.log")
    g = Graph("nested", inputs=[SEED], aspects=[Retry(2)])

    @g.node("work", requires=[SEED], provides=[OUT], aspects=[Retry(2)])
    def work(rc: Any) -> None:
        log.write("work")
        if log.count("work") <= 3:  # outer try 1: inner 1, 2 fail; outer try 2: inner 1 fails
            raise OSError(f"call {log.count('work')} failed")
        rc.set(OUT, rc.get(SEED) + 1)

    store = open_store(kind, tmp_path / "store")
    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={SEED: 1})
    assert result.status == "completed" and result[OUT] == 2
    record = load(store, "r1")
    validate_record(record, definition=g.describe_provides())
    attempts = record.attempts
    (root_id,) = [aid for aid, a in attempts.items() if not a.boundary]
    outer = {a.index: (aid, a) for aid, a in attempts.items() if a.boundary == "graph:0"}
    assert sorted(outer) == [1, 2]
    assert all(a.parent == root_id and a.limit == 2 for _, a in outer.values())
    assert outer[1][1].state is AttemptState.FAILED
    assert outer[2][1].state is AttemptState.CONFIRMED
    for index, (outer_id, _) in outer.items():
        inner = sorted(
            (a.index, a.state) for a in attempts.values() if a.parent == outer_id and a.boundary
        )
        assert {a.boundary for a in attempts.values() if a.parent == outer_id} == {"node:0"}
        expected = (
            [(1, AttemptState.FAILED), (2, AttemptState.FAILED)]
            if index == 1
            else [(1, AttemptState.FAILED), (2, AttemptState.CONFIRMED)]
        )
        assert inner == expected
    assert attempts[root_id].state is AttemptState.CONFIRMED
    store.close()


A, B, C = Key("a", int), Key("b", int), Key("c", int)


def two_levels(log: CallLog) -> Graph:
    """root: Sub "outer" [ step, Sub "inner" [ i1 -> i2 ] ] -> done."""
    inner = Graph("inner", inputs=[A])

    @inner.node("i1", requires=[A], provides=[B])
    def i1(rc: Any) -> None:
        log.write("outer/inner/i1")
        rc.set(B, rc.get(A) + 1)

    @inner.node("i2", requires=[B], provides=[C])
    def i2(rc: Any) -> None:
        log.write("outer/inner/i2")
        rc.set(C, rc.get(B) * 10)

    middle = Graph("middle", inputs=[A])
    mid = Key("mid", int)

    @middle.node("step", requires=[A], provides=[mid])
    def step(rc: Any) -> None:
        log.write("outer/step")
        rc.set(mid, rc.get(A) * 2)

    middle.sub("inner", inner, bindings=[In(mid, A), Out(C, C)])

    g = Graph("top", inputs=[SEED])
    g.sub("outer", middle, bindings=[In(SEED, A), Out(C, OUT)])
    return g


@pytest.mark.parametrize("kind", STORES)
def test_a_run_stopped_inside_a_nested_sub_resumes_only_what_is_left(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-SCOPE-1, R-SCOPE-2, R-ATT-4, R-RT-2, G-9
    real = open_store(kind, tmp_path / "store")
    log = CallLog(tmp_path / "calls.log")

    def confirms_i2(record: Any) -> bool:
        return any("i2" in scope.nodes for scope in record.scopes.values())

    with pytest.raises(CheckpointError):
        Runtime(FailingStore(real, confirms_i2)).run(
            two_levels(log), run_id="r1", version="v1", inputs={SEED: 3}
        )
    stored = load(real, "r1")
    paths = sorted(scope.path for scope in stored.scopes.values())
    assert paths == ["", "outer", "outer/inner"]
    by_path = {scope.path: (sid, scope) for sid, scope in stored.scopes.items()}
    inner_id, inner_scope = by_path["outer/inner"]
    outer_id, _ = by_path["outer"]
    # each child scope is named by its Sub node's attempt, which lives in the scope above
    assert stored.attempts[inner_id].node_id == "inner"
    assert stored.attempts[inner_id].parent == outer_id
    assert stored.attempts[outer_id].parent == stored.root_scope
    assert sorted(inner_scope.nodes) == ["i1"]

    graph = two_levels(log)
    result = Runtime(real).resume(graph, run_id="r1", version="v1", inputs={SEED: 3})
    assert result.status == "completed" and result[OUT] == 70
    assert log.calls() == ["outer/step", "outer/inner/i1", "outer/inner/i2", "outer/inner/i2"]
    final = load(real, "r1")
    validate_record(final, definition=graph.describe_provides())
    assert sorted(final.scopes) == sorted(stored.scopes)
    assert {a.state for a in final.attempts.values()} == {AttemptState.CONFIRMED}
    real.close()
