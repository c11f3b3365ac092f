"""Graphs whose readers of a stream are run again by a Retry, and a child process that runs
one of them durably until it kills itself.

Usage (the killed-process tests)::

    python -m tests.durable_core.durable.stream_retries_child MODE STORE_KIND STORE_LOCATION KILL_AT

``MODE`` is ``run`` or ``resume``. The graph is :func:`sub_graph`: a Sub ``part`` with
``Retry(2)`` whose child ``sum`` reads the root stream; its first try raises after the first
element. With ``KILL_AT`` > 0 the second try kills its own process with SIGKILL when it has
read that many elements (a deterministic point, no timing). Prints one JSON line with the
outcome when the call returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from durable_core import CancelToken, Graph, In, Key, Out, Retry, Runtime
from tests.durable_core.durable.scenarios import open_store

NUMBERS = Key("numbers", int, stream=True, capacity=16)
TOTAL = Key("total", int)
CHILD_IN = Key("child_in", int, stream=True, capacity=16)
CHILD_TOTAL = Key("child_total", int)
RUN = Key("run", int)
SEEN = Key("seen", list[int])
COUNT = 100
WHOLE = COUNT * (COUNT + 1) // 2


def add_source(g: Graph, count: int = COUNT) -> None:
    """A resumable producer ``src`` of 1 … ``count``, one element per turn of the event loop
    (a producer gives the loop a turn only every so many elements: here the readers, their
    failures and Retries keep pace with it, so a reader's new try starts while it still
    sends)."""

    @g.node("src", provides=[NUMBERS])
    async def src(rc: Any) -> None:
        w = rc.writer(NUMBERS)
        for i in range(w.position or 0, count):
            await w.send_at(i + 1, i + 1)
            await asyncio.sleep(0)


def summing_child(runs: list[int], on_element: Callable[[int, int], None]) -> Graph:
    """A child graph whose ``sum`` adds up its stream input (values, no acks).

    ``runs`` gets one entry per run of ``sum`` (in this process), counting what it read;
    ``on_element(run, count)`` is called after each element (run 1, 2, … in this process)."""
    child = Graph("summing", inputs=[CHILD_IN])

    @child.node("sum", requires=[CHILD_IN], provides=[CHILD_TOTAL])
    async def sum_(rc: Any) -> None:
        runs.append(0)
        run = len(runs)
        total = 0
        async for x in rc.reader(CHILD_IN):
            total += x
            runs[run - 1] += 1
            on_element(run, runs[run - 1])
        rc.set(CHILD_TOTAL, total)

    return child


def sub_graph(runs: list[int], on_element: Callable[[int, int], None]) -> Graph:
    """``src`` (1 … 100) -> Sub ``part`` with ``Retry(2)`` whose child ``sum`` reads it."""
    g = Graph("retried_sub")
    add_source(g)
    g.sub(
        "part",
        summing_child(runs, on_element),
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    return g


def fail_first(run: int, count: int) -> None:
    """The first run of the reader raises after its first element."""
    if run == 1:
        raise ValueError("the reader broke after its first element")


def main() -> None:
    mode, kind, location, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    runs: list[int] = []
    resumed = mode == "resume"

    def on_element(run: int, count: int) -> None:
        if not resumed:
            fail_first(run, count)
        if kill_at and not resumed and run == 2 and count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    graph = sub_graph(runs, on_element)
    store = open_store(kind, location)
    runtime = Runtime(store)
    call = runtime.resume if resumed else runtime.run
    result = call(graph, run_id="sub-1", version="1", inputs={}, cancel=CancelToken())
    print(json.dumps({"status": str(result.status), "total": result.get(TOTAL), "runs": runs}))
    store.close()


if __name__ == "__main__":
    main()
