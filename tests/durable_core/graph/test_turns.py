"""Whether anything but the engine's bookkeeping waits to run before the event loop's next turn
(``alone_in_turn``), and what it lets a durable run spare: a confirmed node whose save nothing
else could join is saved without a turn of the loop, while nodes released together still share
their saves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from durable_core import EventKind, Graph, Key, MemoryStore, RecoveryEvent, Retry, Runtime
from durable_core.graph.turns import alone_in_turn
from tests.durable_core.durable.scenarios import open_store


def _quiet(*args: Any) -> None:
    return None


def _busy(*args: Any) -> None:
    return None


class _Keeper:
    def done(self, *args: Any) -> None:
        return None


def test_only_quiet_or_canceled_handles_leave_a_commit_alone() -> None:
    async def main() -> list[bool]:
        loop = asyncio.get_running_loop()
        keeper = _Keeper()
        alone = alone_in_turn(loop, (_quiet, _Keeper.done))
        seen = [alone()]  # nothing ready
        loop.call_soon(_quiet)
        loop.call_soon(keeper.done, 1)  # a bound method counts by its function
        seen.append(alone())
        handle = loop.call_soon(_busy)
        seen.append(alone())
        handle.cancel()  # canceled: it will not run
        seen.append(alone())
        loop.call_soon(_busy)
        seen.append(alone())
        await asyncio.sleep(0)
        return seen

    assert asyncio.run(main()) == [True, True, False, True, False]


def test_a_task_step_ready_to_run_is_not_quiet() -> None:
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        alone = alone_in_turn(loop, (_quiet,))
        task = asyncio.ensure_future(asyncio.sleep(0))  # its first step is ready
        answer = alone()
        await task
        return answer

    assert asyncio.run(main()) is False


def test_a_loop_without_a_readable_queue_is_never_alone() -> None:
    class OtherLoop:  # another implementation (uvloop keeps its queue in C)
        pass

    alone = alone_in_turn(OtherLoop(), (_quiet,))  # type: ignore[arg-type]
    assert alone() is False


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
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(count):

        async def body(rc: Any, src: Key[int] = keys[i], dst: Key[int] = keys[i + 1]) -> None:
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])

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
