"""Run or resume the crash-test stream graph in this (child) process.

Usage::

    python -m tests.durable_core.durable.streams_child \
        MODE STORE_KIND STORE_LOCATION LOG_DIR ELEMENTS RUN_ID

``MODE`` is ``run`` or ``resume``. A resumable producer sends ``ELEMENTS`` integers (element
``i`` has sequence ``i + 1`` and position ``i + 1``); the group ``every`` acks each delivery as
it comes, the group ``sparse`` acks in shuffled batches (gaps in between), the group ``awaited``
awaits the save of every seventh ack before it reads on. Each side log line is
written with one unbuffered ``os.write``, so a SIGKILL loses at most the line being written:

- ``producer.log``: ``start <position> <pid>`` when the producer's body starts;
- ``<group>.log``: ``d <sequence> <value> <generation> <pid>`` per delivery and
  ``a <sequence> <pid>`` once an ack is saved.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from durable_core import Graph, Key, Runtime
from tests.durable_core.durable.scenarios import open_store

COUNT = Key("count", int)
EVENTS = Key("events", int, stream=True, capacity=64)
EVERY = Key("every_n", int)
SPARSE = Key("sparse_n", int)
AWAITED = Key("awaited_n", int)


def build(log_dir: Path) -> Graph:
    pid = os.getpid()

    def writer(name: str):
        fd = os.open(log_dir / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return lambda line: os.write(fd, (line + "\n").encode())

    g = Graph("crash_stream", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc):
        log = writer("producer.log")
        w = rc.writer(EVENTS)
        start = w.position or 0
        log(f"start {start} {pid}")
        for i in range(start, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    def acked(log, sequence):
        def done(future):
            if not future.cancelled() and future.exception() is None:
                log(f"a {sequence} {pid}")

        return done

    @g.node("every", requires=[EVENTS], provides=[EVERY])
    async def every(rc):
        log = writer("every.log")
        n = 0
        async for d in rc.reader(EVENTS).deliveries():
            log(f"d {d.sequence} {d.value} {d.generation} {pid}")
            d.ack().add_done_callback(acked(log, d.sequence))
            n += 1
        rc.set(EVERY, n)

    @g.node("sparse", requires=[EVENTS], provides=[SPARSE])
    async def sparse(rc):
        log = writer("sparse.log")
        batch = []
        n = 0
        async for d in rc.reader(EVENTS).deliveries():
            log(f"d {d.sequence} {d.value} {d.generation} {pid}")
            batch.append(d)
            n += 1
            if len(batch) >= random.randint(2, 24):
                random.shuffle(batch)
                for x in batch:
                    x.ack().add_done_callback(acked(log, x.sequence))
                batch = []
        for x in batch:
            await x.ack()
            log(f"a {x.sequence} {pid}")
        rc.set(SPARSE, n)

    @g.node("awaited", requires=[EVENTS], provides=[AWAITED])
    async def awaited(rc):
        # Awaits every seventh ack (saved before it reads on; the run may then save it on the
        # event loop, every other body waiting too), queues the others.
        log = writer("awaited.log")
        n = 0
        async for d in rc.reader(EVENTS).deliveries():
            log(f"d {d.sequence} {d.value} {d.generation} {pid}")
            n += 1
            if d.sequence % 7 == 0:
                await d.ack()
                log(f"a {d.sequence} {pid}")
            else:
                d.ack().add_done_callback(acked(log, d.sequence))
        rc.set(AWAITED, n)

    return g


def main() -> None:
    mode, kind, location, log_dir, elements, run_id = sys.argv[1:7]
    store = open_store(kind, location)
    runtime = Runtime(store)
    call = runtime.run if mode == "run" else runtime.resume
    result = call(build(Path(log_dir)), run_id=run_id, version="v1", inputs={COUNT: int(elements)})
    print(result.status, result.error)
    store.close()


if __name__ == "__main__":
    main()
