"""The progress of a durable run counts its stream elements and processor messages, so a
long stream job does not look stuck."""

from __future__ import annotations

import pytest

from tests.durable_core.durable.scenarios import open_store


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_the_progress_counts_stream_elements_and_processor_messages(kind, tmp_path):
    # covers: S-1, S-8
    from durable_core import Graph, Key, Runtime
    from durable_core.cli.progress import ProgressCounter, describe

    numbers = Key("numbers", int, stream=True, capacity=8)
    evens = Key("evens", int, stream=True, capacity=8)
    total = Key("total", int)
    count = Key("count", int)
    graph = Graph("counted")

    @graph.node("produce", provides=[numbers])
    async def produce(rc):
        w = rc.writer(numbers)
        for n in range((w.position or 0) + 1, 41):
            await w.send_at(n, n)

    @graph.processor(
        "fold", input=numbers, state=int, initial=0, provides=[evens, total], commit_every=5
    )
    def fold(rc, state, n):
        if n % 2 == 0:
            rc.writer(evens).send(n)
        return state + n

    @fold.finish
    def done(rc, state):
        rc.set(total, state)

    @graph.node("tally", requires=[evens], provides=[count])
    async def tally(rc):
        rc.set(count, len([n async for n in rc.reader(evens)]))

    store = open_store(kind, tmp_path / "store")
    counter = ProgressCounter()
    runtime = Runtime(store, observers=[counter])
    counter.watch(runtime.activity)
    result = runtime.run(graph, run_id="p", version="1", inputs={})
    assert result.status == "completed" and result[count] == 20
    snap = counter.snapshot()
    assert (snap.elements, snap.messages) == (40 + 20, 40)  # 40 numbers, 20 evens sent
    assert "60 stream elements · 40 messages" in describe(snap)
    store.close()
