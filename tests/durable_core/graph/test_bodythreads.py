"""The worker threads of plain bodies (graph/bodythreads.py): reused along a chain, the
caller's context carried in, every outcome handed back (even one a future cannot carry), and
no thread left behind."""

from __future__ import annotations

import contextvars
import threading
import time

from durable_core import Graph, Key, execute

SEED = Key("seed", int)
WHO = contextvars.ContextVar("who", default="nobody")


def _chain(count: int, body_threads: list[threading.Thread]) -> tuple[Graph, Key[int]]:
    keys = [SEED] + [Key(f"k{i}", int) for i in range(1, count + 1)]
    g = Graph("chain", inputs=[SEED])
    for i in range(count):

        def body(rc, src=keys[i], dst=keys[i + 1]):
            body_threads.append(threading.current_thread())
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])
    return g, keys[-1]


# covers: G-7
def test_a_chain_of_plain_bodies_reuses_one_thread_and_leaves_none_behind():
    seen: list[threading.Thread] = []
    g, last = _chain(30, seen)
    result = execute(g, {SEED: 0}, max_running=4)
    assert result[last] == 30
    assert len(set(seen)) == 1  # one body at a time: the idle thread takes the next one
    assert seen[0].name.startswith("durable-node")
    deadline = time.monotonic() + 60
    while seen[0].is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not seen[0].is_alive()


# covers: G-7
def test_a_plain_body_sees_the_context_of_the_run():
    OUT = Key("out", str)
    g = Graph("g", inputs=[SEED])
    g.add_node("read", lambda rc: rc.set(OUT, WHO.get()), requires=[SEED], provides=[OUT])

    token = WHO.set("the caller")
    try:
        assert execute(g, {SEED: 0})[OUT] == "the caller"
    finally:
        WHO.reset(token)


# covers: G-7, G-4
def test_a_plain_body_raising_stop_iteration_fails_its_node_instead_of_hanging():
    OUT = Key("out", int)
    g = Graph("g", inputs=[SEED])

    def body(rc):
        raise StopIteration("exhausted")

    g.add_node("gen", body, requires=[SEED], provides=[OUT])
    result = {}

    def run() -> None:
        result["r"] = execute(g, {SEED: 0})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the run hung on a body that raised StopIteration"
    assert result["r"].status == "failed"
    assert "StopIteration: exhausted" in str(result["r"].error)
