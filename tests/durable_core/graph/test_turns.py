"""Whether anything but what cannot commit waits to run before the event loop's next turn
(``alone_in_turn`` and the engine's count of such handles), and what it lets a durable run
spare: a confirmed node whose save nothing else could join is saved without a turn of the loop,
while nodes released together still share their saves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from durable_core import (
    EventKind,
    Graph,
    In,
    Key,
    MemoryStore,
    Out,
    RecoveryEvent,
    Retry,
    Runtime,
    execute,
)
from durable_core.graph.checkpoint import Attempt, Checkpointer, NodeOutputs
from durable_core.graph.turns import alone_in_turn
from tests.durable_core.durable.scenarios import open_store


def _noop(*args: Any) -> None:
    return None


def test_alone_while_the_ready_queue_holds_no_more_than_the_quiet_count() -> None:
    async def main() -> list[bool]:
        loop = asyncio.get_running_loop()
        quiet = [0]
        alone = alone_in_turn(loop, lambda: quiet[0])
        seen = [alone()]  # nothing ready
        loop.call_soon(_noop)
        seen.append(alone())  # one handle nobody counted
        quiet[0] = 1
        seen.append(alone())  # counted as quiet
        handle = loop.call_soon(_noop)
        seen.append(alone())
        handle.cancel()  # still queued: a canceled handle is not told apart, so not alone
        seen.append(alone())
        await asyncio.sleep(0)
        quiet[0] = 0
        seen.append(alone())  # the turn ran them all
        return seen

    assert asyncio.run(main()) == [True, False, True, False, False, True]


def test_a_loop_without_a_readable_queue_is_never_alone() -> None:
    class OtherLoop:  # another implementation (uvloop keeps its queue in C)
        pass

    alone = alone_in_turn(OtherLoop(), lambda: 0)  # type: ignore[arg-type]
    assert alone() is False


def _chain(count: int) -> tuple[Graph, list[Key[int]]]:
    """Nodes ``n0`` … that each add one to the value of the one before."""
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(count):

        async def body(rc: Any, src: Key[int] = keys[i], dst: Key[int] = keys[i + 1]) -> None:
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])
    return g, keys


def _fan_out(g: Graph, source: Key[int], outs: list[Key[int]]) -> None:
    """Readers ``r0`` … of ``source``, reader ``i`` setting ``outs[i]`` to it plus ``i``."""
    for i, out in enumerate(outs):

        async def reader(rc: Any, out: Key[int] = out, i: int = i) -> None:
            rc.set(out, rc.get(source) + i)

        g.add_node(f"r{i}", reader, requires=[source], provides=[out])


class _Watching(Checkpointer):
    """Records, at each confirmation, what the engine's predicate says."""

    def __init__(self) -> None:
        self.alone: Any = None
        self.seen: list[tuple[str, bool]] = []

    def watch_turns(self, alone: Any) -> None:
        self.alone = alone

    async def commit_node(self, attempt: Attempt, outputs: NodeOutputs) -> None:
        self.seen.append((attempt.node_id, self.alone()))


def test_the_engine_counts_nodes_waiting_for_inputs_and_ended_tasks_as_quiet() -> None:
    # Every node of a chain starts at once and waits for the one before: each confirmation
    # finds only such waiting first steps and the done callbacks of ended nodes queued, so
    # each one is alone. After a fan-out, the first reader finds its siblings ready to run.
    count = 20
    g, keys = _chain(count)
    watching = _Watching()
    result = execute(g, {keys[0]: 0}, checkpointer=watching)
    assert result.status == "completed" and result[keys[count]] == count
    assert watching.seen == [(f"n{i}", True) for i in range(count)]

    seed, top = Key("seed", int), Key("top", int)
    outs = [Key(f"o{i}", int) for i in range(5)]
    fan = Graph("fan", inputs=[seed])

    async def first(rc: Any) -> None:
        rc.set(top, rc.get(seed) + 1)

    fan.add_node("top", first, requires=[seed], provides=[top])
    _fan_out(fan, top, outs)
    watching = _Watching()
    result = execute(fan, {seed: 1}, checkpointer=watching)
    assert result.status == "completed" and [result[o] for o in outs] == [2, 3, 4, 5, 6]
    assert watching.seen[0] == ("top", True)
    assert watching.seen[1] == ("r0", False)  # r1…r4 are ready to run in the same turn
    assert watching.seen[-1] == ("r4", True)  # only ended tasks' bookkeeping is left


def test_child_tasks_canceled_by_a_failed_sub_try_leave_the_count_exact() -> None:
    # The Sub's first try fails at its first node; the child nodes waiting behind it are
    # canceled and end, and the Retry runs the child again in a fresh scope. Afterwards the
    # parent fans out to readers: had a canceled child kept a place in the count (too high),
    # the first reader would be told alone although its siblings are ready; had the count
    # lost one (too low), the chain of the second try would not be alone.
    seed, out = Key("seed", int), Key("out", int)
    cin, first = Key("cin", int), Key("first", int)
    child = Graph("child", inputs=[cin])
    tries = [0]

    async def flaky(rc: Any) -> None:
        tries[0] += 1
        if tries[0] == 1:
            raise RuntimeError("first try fails")
        rc.set(first, rc.get(cin) + 1)

    child.add_node("flaky", flaky, requires=[cin], provides=[first])
    links = [first, *(Key(f"w{i}", int) for i in range(4))]
    for i in range(4):

        async def wait(rc: Any, src: Key[int] = links[i], dst: Key[int] = links[i + 1]) -> None:
            rc.set(dst, rc.get(src) + 1)

        child.add_node(f"w{i}", wait, requires=[links[i]], provides=[links[i + 1]])
    parent = Graph("parent", inputs=[seed])
    parent.sub("sub", child, bindings=[In(seed, cin), Out(links[-1], out)], aspects=[Retry(2)])
    outs = [Key(f"r{i}", int) for i in range(4)]
    _fan_out(parent, out, outs)
    watching = _Watching()
    result = execute(parent, {seed: 0}, checkpointer=watching)
    assert result.status == "completed" and [result[k] for k in outs] == [5, 6, 7, 8]
    assert tries[0] == 2
    second = [seen for seen in watching.seen if seen[0] in {"flaky", "w0", "w1", "w2", "w3"}]
    assert second == [("flaky", True), *((f"w{i}", True) for i in range(4))]
    readers = [seen for seen in watching.seen if seen[0].startswith("r")]
    assert readers[0] == ("r0", False) and readers[-1] == ("r3", True)


def test_nodes_released_together_share_saves_made_on_the_loop() -> None:
    # covers: R-RT-1
    # The MemoryStore saves on the event loop: the first of these nodes to commit finds the
    # others ready to run, so its save waits for the loop's turn and they share it. Taken as
    # alone (the save started at once), every node would be confirmed by a save of its own.
    width = 30
    seed = Key("seed", int)
    outs = [Key(f"o{i}", int) for i in range(width)]
    g = Graph("wide", inputs=[seed])
    release: list[asyncio.Event] = []
    arrived = 0

    for i in range(width):

        async def body(rc: Any, i: int = i) -> None:
            nonlocal arrived
            if not release:
                release.append(asyncio.Event())
            arrived += 1
            if arrived == width:
                release[0].set()
            await release[0].wait()
            rc.set(outs[i], rc.get(seed) + i)

        g.add_node(f"n{i}", body, requires=[seed], provides=[outs[i]])

    events: list[RecoveryEvent] = []
    store = MemoryStore()
    result = Runtime(store, observers=[events.append]).run(
        g, run_id="r1", version="v1", inputs={seed: 1}, max_running=width
    )
    assert result.status == "completed"
    assert [result[k] for k in outs] == [1 + i for i in range(width)]
    confirmed = {e.revision for e in events if e.kind is EventKind.NODE_CONFIRMED}
    assert len(confirmed) <= 3, sorted(confirmed)


def test_a_chain_confirms_each_node_in_its_own_save_and_resumes_exactly() -> None:
    # covers: R-RT-1
    # Each node of a chain commits alone (its successor waits for its outputs): one save per
    # confirmed node, made at once, and the record is the one a resume expects.
    count = 50
    g, keys = _chain(count)

    events: list[RecoveryEvent] = []
    store = MemoryStore()
    result = Runtime(store, observers=[events.append]).run(
        g, run_id="r1", version="v1", inputs={keys[0]: 0}
    )
    assert result.status == "completed" and result[keys[count]] == count
    confirmed = [e.revision for e in events if e.kind is EventKind.NODE_CONFIRMED]
    assert len(set(confirmed)) == count and confirmed == sorted(confirmed)
    again = Runtime(store).resume(g, run_id="r1", version="v1", inputs={keys[0]: 0})
    assert again.status == "completed" and again[keys[count]] == count


@pytest.mark.parametrize("kind", ["memory", "file", "sqlite"])
def test_a_chain_with_a_retry_beside_a_stream_resumes_without_running_a_body_again(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-RT-1, R-RT-3
    # Saves that start at once (the chain) and saves shared with the stream's elements and
    # acks, on every embedded store: one node fails its first try, and a resume of the
    # finished run restores every node without calling a body.
    count = 20
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    numbers = Key("numbers", int, stream=True, capacity=8)
    total = Key("total", int)
    g = Graph("mixed", inputs=[keys[0]])
    calls: list[str] = []
    for i in range(count):

        async def body(rc: Any, i: int = i) -> None:
            calls.append(f"n{i}")
            if i == 7 and calls.count("n7") == 1:
                raise OSError("flaky")  # the Retry's second try succeeds
            rc.set(keys[i + 1], rc.get(keys[i]) + 1)

        aspects = [Retry(2)] if i == 7 else []
        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]], aspects=aspects)

    @g.node("produce", requires=[keys[0]], provides=[numbers])
    async def produce(rc: Any) -> None:
        calls.append("produce")
        writer = rc.writer(numbers)
        for n in range((writer.position or 0) + 1, 51):
            await writer.send_at(n, n)

    @g.node("sum", requires=[numbers], provides=[total])
    async def add(rc: Any) -> None:
        calls.append("sum")
        seen = 0
        async for d in rc.reader(numbers).deliveries():
            seen += d.value
            d.ack()
        rc.set(total, seen)

    store = open_store(kind, tmp_path / "store")
    try:
        first = Runtime(store).run(g, run_id="r1", version="v1", inputs={keys[0]: 0})
        assert first.status == "completed", first.error
        assert first[keys[count]] == count and first[total] == 50 * 51 // 2
        assert calls.count("n7") == 2
        ran = len(calls)
        again = Runtime(store).resume(g, run_id="r1", version="v1", inputs={keys[0]: 0})
        assert again.status == "completed"
        assert again[keys[count]] == count and again[total] == 50 * 51 // 2
        assert len(calls) == ran  # nothing ran again
    finally:
        store.close()
