"""Concurrency: max_running across the Sub tree; waiting takes no slot; sync and async (G-7)."""

import asyncio
import threading
import time

import pytest

from durable_core import Graph, In, Key, Out, execute

SEED = Key("seed", int)


class Peak:
    """How many bodies run at once, at most. Bodies entered before ``limit`` were running
    together stay until it was reached (at most 60 s): a worker thread that starts late cannot
    keep the peak below the limit, so the check does not depend on the machine's speed."""

    def __init__(self, limit):
        self.lock = threading.Lock()
        self.limit = limit
        self.now = 0
        self.peak = 0

    def full(self):
        return self.peak >= self.limit

    def wait_until_full(self):
        deadline = time.monotonic() + 60
        while not self.full() and time.monotonic() < deadline:
            time.sleep(0.001)

    async def wait_until_full_async(self):
        deadline = time.monotonic() + 60
        while not self.full() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)

    def enter(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self):
        with self.lock:
            self.now -= 1


def wide(graph, peak, count, prefix, kind, seed=SEED):
    for i in range(count):
        key = Key(f"{prefix}{i}", int)
        if kind == "sync" or (kind == "mixed" and i % 2):

            def body(rc, key=key):
                peak.enter()
                peak.wait_until_full()
                time.sleep(0.02)  # time for a body beyond the limit to show up
                peak.leave()
                rc.set(key, 1)

        else:

            async def body(rc, key=key):
                peak.enter()
                await peak.wait_until_full_async()
                await asyncio.sleep(0.02)  # time for a body beyond the limit to show up
                peak.leave()
                rc.set(key, 1)

        graph.add_node(f"{prefix}{i}", body, requires=[seed], provides=[key])


# covers: G-7
@pytest.mark.parametrize("kind", ["sync", "async", "mixed"])
def test_max_running_bounds_running_bodies(kind):
    peak = Peak(3)
    g = Graph("g", inputs=[SEED])
    wide(g, peak, 12, "n", kind)
    result = execute(g, {SEED: 0}, max_running=3)
    assert result.status == "completed"
    assert peak.peak == 3


# covers: G-7, G-9
def test_max_running_bounds_the_whole_sub_tree():
    peak = Peak(4)
    child_seed = Key("child_seed", int)
    child = Graph("child", inputs=[child_seed])
    wide(child, peak, 8, "c", "mixed", seed=child_seed)
    grandchild = Graph("grandchild", inputs=[child_seed])
    wide(grandchild, peak, 8, "gc", "mixed", seed=child_seed)
    child.sub("deeper", grandchild, bindings=[In(child_seed, child_seed)])
    g = Graph("g", inputs=[SEED])
    wide(g, peak, 8, "p", "mixed")
    g.sub("sub1", child, bindings=[In(SEED, child_seed), Out(Key("c0", int), Key("r1", int))])
    result = execute(g, {SEED: 0}, max_running=4)
    assert result.status == "completed" and result[Key("r1", int)] == 1
    assert peak.peak == 4


# covers: G-7
def test_waiting_for_input_takes_no_slot():
    # With one slot, a chain and a Sub only finish if waiting nodes (and the Sub node itself,
    # which waits for its child) hold no slot.
    keys = [Key(f"k{i}", int) for i in range(6)]
    g = Graph("g", inputs=[keys[0]])
    for i in range(5):
        if i % 2:

            def body(rc, i=i):
                rc.set(keys[i + 1], rc.get(keys[i]) + 1)

        else:

            async def body(rc, i=i):
                rc.set(keys[i + 1], rc.get(keys[i]) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])
    child_in, child_out = Key("x", int), Key("y", int)
    child = Graph("child", inputs=[child_in])
    child.add_node(
        "inc",
        lambda rc: rc.set(child_out, rc.get(child_in) + 1),
        requires=[child_in],
        provides=[child_out],
    )
    g.sub("sub", child, bindings=[In(keys[5], child_in), Out(child_out, Key("z", int))])
    result = execute(g, {keys[0]: 0}, max_running=1)
    assert result[Key("z", int)] == 6


# covers: G-7
def test_sync_bodies_run_in_a_bounded_pool_and_async_on_the_loop():
    threads = {}
    lock = threading.Lock()
    g = Graph("g", inputs=[SEED])
    for i in range(10):

        def body(rc, i=i):
            time.sleep(0.01)
            with lock:
                threads[f"sync{i}"] = threading.current_thread()

        g.add_node(f"sync{i}", body, requires=[SEED])

    async def on_loop(rc):
        threads["async"] = threading.current_thread()
        assert asyncio.get_running_loop() is not None

    g.add_node("async", on_loop, requires=[SEED])
    execute(g, {SEED: 0}, max_running=2)
    assert threads["async"] is threading.main_thread()
    workers = {threads[f"sync{i}"] for i in range(10)}
    assert threading.main_thread() not in workers
    assert 1 <= len(workers) <= 2
    assert all(t.name.startswith("durable-node") for t in workers)


# covers: G-7, G-2
def test_a_plain_body_returning_a_coroutine_is_refused_clearly():
    async def work(rc):
        rc.set(Key("out", int), 1)

    g = Graph("g", inputs=[SEED])
    g.add_node("wrapped", lambda rc: work(rc), requires=[SEED], provides=[Key("out", int)])
    result = execute(g, {SEED: 0})
    assert result.status == "failed"
    assert "Declare the body with async def" in str(result.error.__cause__)
