"""Bytes and time per ack save while a reading group holds a backlog of unacked elements.

A producer sends ``B`` elements of ``--payload`` bytes; the reader receives all of them (each
saved before it is delivered), then acks them one at a time with ``await d.ack()`` (each ack
durable before the next), in order. For each backlog ``B`` it prints, on the SQLite store:

- ``delta B``: the mean bytes of the deltas the ack saves handed the store;
- ``µs/ack``: wall time per awaited ack; ``CPU µs``: the process's CPU time per ack (every
  thread: the event loop's and the save's), steadier than wall time on a busy machine;
- ``floor µs``: one bare durable write of a delta of that size on the same disk (a BLOB
  UPDATE committed in WAL mode with synchronous=FULL), and ``ratio`` = ``µs/ack`` / ``floor``.

A save whose bytes follow what changed has a ``delta B`` that does not grow with ``B``.

Run it with::

    uv run python benchmarks/stream_backlog.py
    uv run python benchmarks/stream_backlog.py --backlogs 10 100 1000 --payload 256
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint_overhead import bare_sqlite_commit

from durable_core import Graph, Key, Runtime
from durable_sqlitestore import SQLiteStore


class NotingStore:
    """The SQLite store, noting the delta size (or None: a whole save) of every save."""

    def __init__(self, path: str) -> None:
        self.inner = SQLiteStore(path)
        self.saves: list[int | None] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        session = self.inner.acquire(run_id, timeout)
        save, saves = session.save, self.saves

        def noting(record: Any, expected_revision: int, encoded: Any = None) -> None:
            delta = None if encoded is None else encoded.delta
            saves.append(None if delta is None else len(delta))
            save(record, expected_revision, encoded)

        session.save = noting
        return session

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def measure(backlog: int, payload: int, root: str) -> dict[str, float]:
    count = Key("count", int)
    blobs = Key("blobs", bytes, stream=True, capacity=backlog + 1)
    done = Key("done", int)
    g = Graph("bench_backlog", inputs=[count])
    sent = asyncio.Event()
    marks: dict[str, Any] = {}

    @g.node("produce", requires=[count], provides=[blobs])
    async def produce(rc: Any) -> None:
        w = rc.writer(blobs)
        for i in range(rc.get(count)):
            await w.send(bytes([i % 256]) * payload)
        sent.set()

    @g.node("consume", requires=[blobs], provides=[done])
    async def consume(rc: Any) -> None:
        await sent.wait()
        deliveries = [d async for d in rc.reader(blobs).deliveries()]
        marks["first"] = len(store.saves)
        started, cpu = time.perf_counter(), time.process_time()
        for d in deliveries:
            await d.ack()
        marks["seconds"] = time.perf_counter() - started
        marks["cpu"] = time.process_time() - cpu
        marks["last"] = len(store.saves)
        rc.set(done, len(deliveries))

    directory = tempfile.mkdtemp(prefix="backlog-", dir=root)
    store = NotingStore(os.path.join(directory, "runs.sqlite"))
    try:
        result = Runtime(store).run(g, run_id="bench", version="1", inputs={count: backlog})
        assert result.status == "completed", result.error
    finally:
        store.inner.close()
    acks = store.saves[marks["first"] : marks["last"]]
    deltas = [size for size in acks if size is not None]
    mean = sum(deltas) / max(len(deltas), 1)
    floor = bare_sqlite_commit(root, [max(int(mean), 64)] * 300)
    per_ack = marks["seconds"] / backlog
    return {
        "delta": mean,
        "saves": len(acks),
        "per_ack": per_ack * 1e6,
        "cpu": marks["cpu"] / backlog * 1e6,
        "floor": floor * 1e6,
        "ratio": per_ack / floor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlogs", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--payload", type=int, default=256, help="bytes per element")
    parser.add_argument("--dir", default=None, help="directory on the disk to measure")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="bench-backlog-")
    print(f"SQLite, elements of {args.payload} bytes, each ack awaited, in order")
    print(
        f"{'backlog':>8} {'saves':>6} {'delta B':>9} {'µs/ack':>8} {'CPU µs':>7} "
        f"{'floor µs':>9} {'ratio':>6}"
    )
    for backlog in args.backlogs:
        row = measure(backlog, args.payload, root)
        print(
            f"{backlog:8d} {row['saves']:6.0f} {row['delta']:9.0f} "
            f"{row['per_ack']:8.0f} {row['cpu']:7.0f} {row['floor']:9.0f} {row['ratio']:6.2f}"
        )


if __name__ == "__main__":
    main()
