"""Slots and scheduling: write once, AND gate, skips and their cascade (G-3, G-4, G-5)."""

import asyncio
import time

import pytest

from durable_core import (
    Graph,
    Key,
    NodeFailedError,
    SkipNode,
    SlotError,
    UndeclaredKeyError,
    execute,
)

A, B, C, D, E = (Key(name, int) for name in "abcde")


# covers: G-3
def test_a_slot_is_written_once():
    seen = {}
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B, C])
    def x(rc):
        rc.set(B, 1)
        with pytest.raises(SlotError, match="'b' was already written"):
            rc.set(B, 2)
        with pytest.raises(SlotError, match="'b' was already written"):
            rc.skip(B)
        rc.skip(C)
        with pytest.raises(SlotError, match="'c' was already skipped"):
            rc.set(C, 3)
        seen["own"] = rc.get(B)

    result = execute(g, {A: 0})
    assert result.status == "completed"
    assert result[B] == 1 and result.skipped(C)
    assert seen["own"] == 1


# covers: G-3, G-5
def test_values_must_have_the_key_type_and_keys_must_be_declared():
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B])
    def x(rc):
        rc.set(B, "not an int")

    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, SlotError)
    assert "takes Key('b', builtins.int) values, got str" in str(result.error.__cause__)

    for action in ("get", "set", "skip", "skipped"):
        h = Graph("h", inputs=[A])

        def body(rc, action=action):
            if action == "set":
                rc.set(C, 1)
            else:
                getattr(rc, action)(C)

        h.add_node("y", body, requires=[A], provides=[B])
        result = execute(h, {A: 0})
        assert result.status == "failed", action
        assert isinstance(result.error.__cause__, UndeclaredKeyError), action
        assert "node 'y'" in str(result.error.__cause__) and "'c'" in str(result.error.__cause__)


# covers: G-3
def test_a_key_of_the_same_name_but_another_type_is_undeclared():
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B])
    def x(rc):
        rc.get(Key("a", str))

    result = execute(g, {A: 0})
    assert isinstance(result.error.__cause__, UndeclaredKeyError)


# covers: G-4
def test_and_gate_runs_a_node_only_when_all_inputs_arrived():
    times = {}
    g = Graph("g", inputs=[A])

    @g.node("fast", requires=[A], provides=[B])
    async def fast(rc):
        times["fast"] = time.monotonic()
        rc.set(B, 1)

    @g.node("slow", requires=[A], provides=[C])
    async def slow(rc):
        await asyncio.sleep(0.1)
        times["slow"] = time.monotonic()
        rc.set(C, 2)

    @g.node("join", requires=[B, C], provides=[D])
    async def join(rc):
        times["join"] = time.monotonic()
        rc.set(D, rc.get(B) + rc.get(C))

    result = execute(g, {A: 0})
    assert result[D] == 3
    assert times["join"] >= times["slow"] >= times["fast"]


# covers: G-4
def test_all_inputs_skipped_cascades_without_running_the_body():
    ran = []
    g = Graph("g", inputs=[A])

    @g.node("source", requires=[A], provides=[B, C])
    def source(rc):
        ran.append("source")
        rc.skip(B)  # C is left unwritten: skipped after success

    @g.node("both_skipped", requires=[B, C], provides=[D])
    def both_skipped(rc):
        ran.append("both_skipped")

    @g.node("downstream", requires=[D], provides=[E])
    def downstream(rc):
        ran.append("downstream")

    result = execute(g, {A: 0})
    assert result.status == "completed"
    assert ran == ["source"]
    assert all(result.skipped(k) for k in (B, C, D, E))


# covers: G-4
def test_some_inputs_skipped_still_runs_the_body():
    g = Graph("g", inputs=[A])

    @g.node("source", requires=[A], provides=[B, C])
    def source(rc):
        rc.set(B, 5)
        rc.skip(C)

    @g.node("join", requires=[B, C], provides=[D])
    def join(rc):
        assert rc.skipped(C) and not rc.skipped(B)
        with pytest.raises(SlotError, match="required key 'c' was skipped"):
            rc.get(C)
        rc.set(D, rc.get(B) + rc.get(C, 100))

    result = execute(g, {A: 0})
    assert result[D] == 105


# covers: G-4
def test_unwritten_provides_become_skipped_after_success():
    g = Graph("g", inputs=[A])
    g.add_node("x", lambda rc: rc.set(B, 1), requires=[A], provides=[B, C])
    result = execute(g, {A: 0})
    assert result[B] == 1
    assert result.skipped(C) and not result.pending(C)
    with pytest.raises(SlotError, match="'c' was skipped"):
        result[C]
    assert result.get(C, "default") == "default"


# covers: G-4
@pytest.mark.parametrize("how", ["raise", "method", "async"])
def test_a_node_can_skip_itself_and_a_skip_is_never_a_failure(how):
    ran = []
    g = Graph("g", inputs=[A])

    if how == "async":

        async def skipper(rc):
            rc.set(B, 1)  # discarded: the whole node is skipped
            try:
                rc.skip_node()
            except Exception:  # a skip is not an Exception: bodies cannot swallow it by mistake
                ran.append("swallowed")

    else:

        def skipper(rc):
            rc.set(B, 1)
            if how == "raise":
                raise SkipNode
            rc.skip_node()

    g.add_node("skipper", skipper, requires=[A], provides=[B, C])
    g.add_node("after", lambda rc: ran.append("after"), requires=[B, C], provides=[D])
    result = execute(g, {A: 0})
    assert result.status == "completed" and result.error is None
    assert result.skipped(B) and result.skipped(C) and result.skipped(D)
    assert ran == []


# covers: G-3
def test_result_reports_ready_skipped_and_pending():
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B])
    def x(rc):
        raise ValueError("boom")

    g.add_node("y", lambda rc: rc.set(C, 1), requires=[B], provides=[C])
    result = execute(g, {A: 7})
    assert result.status == "failed"
    assert result[A] == 7 and A in result
    assert result.pending(B) and result.pending(C) and B not in result
    with pytest.raises(SlotError, match="pending"):
        result[B]
    with pytest.raises(UndeclaredKeyError):
        result[Key("zzz", int)]
    assert result.values == {"a": 7}
    assert isinstance(result.error, NodeFailedError)


# covers: G-3
def test_ready_values_are_kept_even_when_empty_or_none():
    g = Graph("g", inputs=[A])
    N = Key("maybe", int | None)
    S = Key("s", str)
    g.add_node("x", lambda rc: (rc.set(N, None), rc.set(S, "")), requires=[A], provides=[N, S])
    result = execute(g, {A: 0})
    assert result[N] is None and not result.skipped(N)
    assert result[S] == "" and not result.skipped(S)
