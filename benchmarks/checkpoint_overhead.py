"""Checkpoint overhead per node of the durable runtime, against the bare cost of a durable write.

For the file store and the SQLite store, and for two graph shapes — a chain of 1,000 nodes
(every node waits for the one before: one confirmation save per node) and a fan-out of 100
nodes released together (their confirmations share saves: group commit) — it times:

- ``engine``: the same graph run by the plain engine (``execute``, no checkpoints);
- ``durable``: ``Runtime.run`` on a fresh store in a temporary directory on the same disk;
- ``bare``: one durable write done by hand on that disk, the floor any durable save pays:
  for the file store, write a temp file + ``fsync`` + ``rename`` + ``fsync`` of the directory
  (B-FILE-3); for SQLite, one ``UPDATE`` of a BLOB committed in WAL mode with
  ``synchronous=FULL`` (B-SQL-1). ``bare 1k`` writes 1 KiB each time; ``bare seq`` writes,
  one after the other, payloads of exactly the sizes of the records the run saved (a chain's
  record grows with every node: saves are whole-record JSON by design).

Columns: ``overhead`` = (durable - engine) / nodes, in ms per node; ``saves`` per node;
``avg KiB`` the average size of the records saved; ``per save`` = (durable - engine) / saves;
``ratio`` = overhead / ``bare 1k`` (how many small bare durable writes one node costs);
``ratio seq`` = per save / ``bare seq`` (one save against the same durable write done by hand
with the same number of bytes: what the ratio shows beyond 1 is the runtime's and the store's
own work — proposals, encoding, checks, the hop to the saving thread).

Run it with::

    uv run python benchmarks/checkpoint_overhead.py              # best of 3
    uv run python benchmarks/checkpoint_overhead.py --repeat 5 --chain 1000 --fan 100
    uv run python benchmarks/checkpoint_overhead.py --profile    # cProfile of the file chain

``--dir`` chooses the directory (default: a temporary directory; give one on the disk you
care about).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from durable_core import Graph, Key, Runtime, execute
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore


def chain(count: int) -> tuple[Graph, Key[int]]:
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(count):
        src, dst = keys[i], keys[i + 1]

        async def body(rc: Any, src: Key[int] = src, dst: Key[int] = dst) -> None:
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[src], provides=[dst])
    g.validate()
    return g, keys[0]


def fan_out(count: int) -> tuple[Graph, Key[int]]:
    seed = Key("seed", int)
    g = Graph("fan", inputs=[seed])
    for i in range(count):
        out = Key(f"o{i}", int)

        async def body(rc: Any, out: Key[int] = out) -> None:
            rc.set(out, rc.get(seed) + 1)

        g.add_node(f"n{i}", body, requires=[seed], provides=[out])
    g.validate()
    return g, seed


# -- bare durable writes ---------------------------------------------------------------------


def bare_file_write(directory: str, sizes: list[int]) -> float:
    """Mean seconds of one temp-file write + fsync + rename + directory fsync, writing payloads
    of ``sizes`` bytes one after the other."""
    payloads = [os.urandom(size) for size in sizes]
    target = os.path.join(directory, "bare.json")
    dir_fd = os.open(directory, os.O_RDONLY)
    times = []
    try:
        for i, payload in enumerate(payloads):
            started = time.perf_counter()
            temp = os.path.join(directory, f"bare-{i}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, target)
            os.fsync(dir_fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(dir_fd)
        os.unlink(target)
    return statistics.mean(times)


def bare_sqlite_commit(directory: str, sizes: list[int]) -> float:
    """Mean seconds of one UPDATE of a BLOB committed with WAL + synchronous=FULL, writing
    payloads of ``sizes`` bytes one after the other."""
    path = tempfile.mkdtemp(prefix="bare-", dir=directory) + "/bare.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, revision TEXT, data BLOB)")
        db.execute("INSERT INTO t VALUES (1, '0', x'')")
        payloads = [os.urandom(size) for size in sizes]
        times = []
        for i, payload in enumerate(payloads):
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE t SET revision = ?, data = ? WHERE id = 1", (str(i), payload))
            db.execute("COMMIT")
            times.append(time.perf_counter() - started)
        return statistics.mean(times)
    finally:
        db.close()


# -- runs --------------------------------------------------------------------------------------


def best(repeat: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(repeat))


def engine_seconds(graph: Graph, seed: Key[int], repeat: int) -> float:
    def measure() -> float:
        started = time.perf_counter()
        result = execute(graph, {seed: 0})
        elapsed = time.perf_counter() - started
        assert result.status == "completed", result.error
        return elapsed

    return best(repeat, measure)


class Sizes:
    """Wraps a store's sessions to note the size of each record saved (for ``bare seq``)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.sizes: list[int] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        from durable_core.records.jsonio import record_to_json

        session = self.store.acquire(run_id, timeout)
        outer = self

        class Counting:
            def __getattr__(self, name: str) -> Any:
                return getattr(session, name)

            def save(self, record: Any, expected_revision: int) -> None:
                session.save(record, expected_revision)
                outer.sizes.append(len(record_to_json(record)))

        return Counting()


def durable_seconds(
    make_store: Callable[[str], Any], graph: Graph, seed: Key[int], repeat: int, base: str
) -> tuple[float, list[int]]:
    """Best seconds of ``Runtime.run`` on a fresh store, and the sizes of the records saved."""
    results = []
    for i in range(repeat):
        directory = tempfile.mkdtemp(prefix=f"run{i}-", dir=base)
        store = make_store(directory)
        try:
            started = time.perf_counter()
            result = Runtime(store).run(graph, run_id="bench", version="1", inputs={seed: 0})
            elapsed = time.perf_counter() - started
            assert result.status == "completed", result.error
            results.append(elapsed)
        finally:
            store.close()
    seconds = min(results)
    # Record sizes, measured in a separate run so that measuring does not slow the timed ones.
    directory = tempfile.mkdtemp(prefix="sizes-", dir=base)
    store = make_store(directory)
    try:
        sizes = Sizes(store)
        Runtime(sizes).run(graph, run_id="bench", version="1", inputs={seed: 0})
    finally:
        store.close()
    return seconds, sizes.sizes


def file_store(directory: str) -> Any:
    return FileStore(directory)


def sqlite_store(directory: str) -> Any:
    return SQLiteStore(os.path.join(directory, "runs.sqlite"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--fan", type=int, default=100, help="nodes in the fan-out")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--profile", action="store_true", help="profile the file-store chain")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as base:
        if args.profile:
            graph, seed = chain(args.chain)
            store = FileStore(os.path.join(base, "profile"))
            profiler = cProfile.Profile()
            profiler.enable()
            Runtime(store).run(graph, run_id="bench", version="1", inputs={seed: 0})
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
            return

        print(f"best of {args.repeat}; directory on the disk of {base}")
        print(
            f"{'store':<8}{'shape':<14}{'engine':>8}{'durable':>9}{'overhead':>10}{'saves':>7}"
            f"{'avg KiB':>9}{'bare 1k':>9}{'bare seq':>10}{'per save':>10}{'ratio':>7}"
            f"{'ratio seq':>11}"
        )
        for store_name, make_store, bare in (
            ("file", file_store, bare_file_write),
            ("sqlite", sqlite_store, bare_sqlite_commit),
        ):
            for shape, build, count in (
                ("chain", chain, args.chain),
                ("fan-out", fan_out, args.fan),
            ):
                graph, seed = build(count)
                engine = engine_seconds(graph, seed, args.repeat)
                durable, sizes = durable_seconds(make_store, graph, seed, args.repeat, base)
                saves = len(sizes)
                bare_small = bare(base, [1024] * max(saves, 200))
                bare_sequence = min(bare(base, sizes) for _ in range(args.repeat))
                overhead = (durable - engine) / count
                per_save = (durable - engine) / saves
                print(
                    f"{store_name:<8}{f'{shape} {count}':<14}{engine * 1e3:>6.0f}ms"
                    f"{durable * 1e3:>7.0f}ms{overhead * 1e3:>8.2f}ms{saves / count:>7.2f}"
                    f"{statistics.mean(sizes) / 1024:>9.0f}{bare_small * 1e3:>7.2f}ms"
                    f"{bare_sequence * 1e3:>8.2f}ms{per_save * 1e3:>8.2f}ms"
                    f"{overhead / bare_small:>7.2f}{per_save / bare_sequence:>11.2f}"
                )


if __name__ == "__main__":
    main()
