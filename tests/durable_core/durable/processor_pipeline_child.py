"""Run or resume an unbatched processor graph in this (child) process, to be killed mid-stream.

Usage::

    python -m tests.durable_core.durable.processor_pipeline_child MODE KIND STORE LOGS

``MODE`` is ``run`` or ``resume``; ``KIND`` a store kind of ``scenarios.open_store`` at
``STORE``. A resumable producer sends 1…``MESSAGES``; the processor ``sum``
(``commit_every=1``, ``Retry(3)``) adds each to a ``(count, total)`` state and sends it on;
its first try of every ``FAILING``-th message raises. A second processor, ``collect``, adds
up what it receives. Each handler call appends ``m<n> <try>`` to ``LOGS/calls`` (before it
returns). Prints ``status total count received received_count``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from durable_core import Graph, Key, Retry, Runtime
from tests.durable_core.durable.scenarios import open_store

MESSAGES = 300
FAILING = 23
COUNT = Key("count", int)
NUMBERS = Key("numbers", int, stream=True, capacity=16)
SENT = Key("sent", int, stream=True, capacity=16)
TOTAL = Key("total", list[int])
RECEIVED = Key("received", list[int])


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def build(logs: Path) -> Graph:
    g = Graph("pipeline-kill", inputs=[COUNT])
    calls = logs / "calls"

    @g.node("numbers", requires=[COUNT], provides=[NUMBERS])
    async def numbers(rc):
        writer = rc.writer(NUMBERS)
        for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
            await writer.send_at(n, n)

    @g.processor(
        "sum",
        input=NUMBERS,
        state=list[int],
        initial=[0, 0],
        provides=[TOTAL, SENT],
        retry=Retry(3),
        commit_every=1,
    )
    def add(rc, state: list[int], n: int) -> list[int]:
        _append(calls, f"m{n} {rc.message.index}\n")
        if n % FAILING == 0 and rc.message.index == 1:
            raise ValueError(f"message {n} fails its first try on purpose")
        rc.writer(SENT).send(n)
        return [state[0] + 1, state[1] + n]

    @add.finish
    def finish(rc, state: list[int]):
        rc.set(TOTAL, state)

    @g.processor(
        "collect", input=SENT, state=list[int], initial=[0, 0], provides=[RECEIVED], commit_every=1
    )
    def collect(rc, state: list[int], n: int) -> list[int]:
        return [state[0] + 1, state[1] + n]

    @collect.finish
    def collected(rc, state: list[int]):
        rc.set(RECEIVED, state)

    return g


def main() -> None:
    mode, kind, store_dir, logs = sys.argv[1:5]
    store = open_store(kind, store_dir)
    runtime = Runtime(store)
    call = runtime.run if mode == "run" else runtime.resume
    result = call(build(Path(logs)), run_id="k", version="1", inputs={COUNT: MESSAGES})
    if result.status != "completed":
        print(result.status, result.error, file=sys.stderr)
        sys.exit(1)
    count, total = result[TOTAL]
    received_count, received = result[RECEIVED]
    print(result.status, total, count, received, received_count)


if __name__ == "__main__":
    main()
