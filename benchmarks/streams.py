"""Elements per second through a durable stream, against the bare durable save floor.

A trivial producer sends ``--elements`` integers with ``send_at(i, i + 1)`` (resumable) and a
trivial reader acks each delivery, either with ``d.ack()`` (queued: saved with the next group
commit; the default way to read fast) or with ``await d.ack()`` (each ack durable before the
next element is read: one element per save round trip; measured on a tenth of the elements).
Every element costs a save (the element and the producer's position) and every ack another,
but saves are group-committed:
while one save is in flight, the producer goes on (up to the key's capacity) and the elements
and acks that arrive meanwhile share the next save. No reader sees an element before its save
returned.

For the file store and the SQLite store it prints:

- ``el/s``: elements per second of the whole run (``Runtime.run``: open, all elements, all
  acks, the confirmations), in a temporary directory;
- ``saves``: saves the run made, and ``el/save``: elements per save (group commit);
- ``floor/s``: bare durable writes per second on the same disk (file: temp file + fsync +
  rename + directory fsync; SQLite: one BLOB UPDATE committed in WAL mode with
  synchronous=FULL), with payloads of the run's average record size;
- ``ratio``: ``el/s`` / ``floor/s`` — elements carried per bare durable write's worth of time.

Run it with::

    uv run python benchmarks/streams.py                     # 10,000 elements, capacity 256
    uv run python benchmarks/streams.py --elements 20000 --capacity 64
    uv run python benchmarks/streams.py --elements 30000 --stores sqlite --modes await
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint_overhead import bare_file_write, bare_sqlite_commit

from durable_core import Graph, Key, Runtime
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore


def stream_graph(capacity: int, wait: bool) -> tuple[Graph, Key[int]]:
    count = Key("count", int)
    events = Key("events", int, stream=True, capacity=capacity)
    done = Key("done", int)
    g = Graph("bench_stream", inputs=[count])

    @g.node("produce", requires=[count], provides=[events])
    async def produce(rc):
        w = rc.writer(events)
        for i in range(w.position or 0, rc.get(count)):
            await w.send_at(i, i + 1)

    @g.node("consume", requires=[events], provides=[done])
    async def consume(rc):
        n = 0
        async for d in rc.reader(events).deliveries():
            n += 1
            if wait:
                await d.ack()  # returns once the ack is saved
            else:
                d.ack()  # queued: saved with the next group commit
        rc.set(done, n)

    return g, count


def measure(kind: str, elements: int, capacity: int, root: str, wait: bool) -> dict[str, float]:
    graph, count = stream_graph(capacity, wait)
    directory = tempfile.mkdtemp(prefix=f"stream-{kind}-", dir=root)
    store = (
        FileStore(directory)
        if kind == "file"
        else SQLiteStore(os.path.join(directory, "runs.sqlite"))
    )
    try:
        started = time.perf_counter()
        result = Runtime(store).run(graph, run_id="bench", version="1", inputs={count: elements})
        elapsed = time.perf_counter() - started
        assert result.status == "completed", result.error
        with store.acquire("bench") as session:
            record = session.load()
        from durable_core.records.jsonio import record_to_json

        size = len(record_to_json(record))
    finally:
        store.close()
    sizes = [max(size, 1024)] * 300
    floor = bare_file_write(root, sizes) if kind == "file" else bare_sqlite_commit(root, sizes)
    return {
        "el/s": elements / elapsed,
        "saves": result.saves,
        "el/save": elements / result.saves,
        "floor/s": 1 / floor,
        "ratio": (elements / elapsed) * floor,
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=10_000)
    parser.add_argument("--capacity", type=int, default=256)
    parser.add_argument("--dir", default=None, help="directory on the disk to measure")
    parser.add_argument(
        "--stores", nargs="+", choices=["sqlite", "file"], default=["sqlite", "file"]
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["ack", "await"],
        default=["ack", "await"],
        help="ack(): queued acks; await: each ack awaited (on a tenth of the elements)",
    )
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="bench-streams-")
    print(f"{args.elements} elements, capacity {args.capacity}, one acking reader")
    print(
        f"{'store':8} {'ack':10} {'el/s':>9} {'saves':>7} {'el/save':>8} {'floor/s':>9} "
        f"{'ratio':>7}"
    )
    for kind in args.stores:
        for wait in [mode == "await" for mode in args.modes]:
            elements = args.elements if not wait else max(args.elements // 10, 100)
            row = measure(kind, elements, args.capacity, root, wait)
            mode = "await ack" if wait else "ack()"
            print(
                f"{kind:8} {mode:10} {row['el/s']:9.0f} {row['saves']:7.0f} "
                f"{row['el/save']:8.1f} {row['floor/s']:9.0f} {row['ratio']:7.1f}"
            )


if __name__ == "__main__":
    main()
