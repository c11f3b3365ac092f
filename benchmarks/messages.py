"""Message transactions per second, exactly once, on the SQLite and file stores.

A resumable producer sends ``--messages`` integers through a stream (``send_at``); a processor
with a trivial body adds each to its state. Every message's acknowledgement, the new state
and the processor's record entries are saved before the next message (or batch) goes on, so
every number below is exactly-once throughput: a crash at any moment loses no committed message
and repeats none.

For each store it measures, on a fresh store in a temporary directory on the same disk:

- ``unbatched``: ``commit_every=1``, one save per message (the producer's sends share those
  saves: group commit);
- ``batched``: ``commit_every=--batch`` (default 100) with ``max_delay=0.05``;
- ``floor``: one bare durable write of a payload the size of the run's average saved record
  (file: temp file + ``fsync`` + rename + directory ``fsync``; SQLite: one ``UPDATE`` of a
  BLOB committed in WAL mode with ``synchronous=FULL``), as messages per second if every
  message cost exactly one such write and nothing else: the best an unbatched exactly-once
  processor can do on that disk.

Columns: ``msg/s`` (messages over wall time of ``Runtime.run``), ``saves``, ``msg/save``,
``avg KiB`` (average saved record), and ``vs floor`` (msg/s divided by the floor's msg/s).

Run it with::

    uv run python benchmarks/messages.py                       # best of 3, 2,000 messages
    uv run python benchmarks/messages.py --messages 20000 --batch 1000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

from checkpoint_overhead import bare_file_write, bare_sqlite_commit

from durable_core import Graph, Key, RunRecord, Runtime
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore

COUNT = Key("count", int)
NUMBERS = Key("numbers", int, stream=True, capacity=256)
TOTAL = Key("total", int)


def graph(commit_every: int) -> Graph:
    g = Graph("messages", inputs=[COUNT])

    @g.node("produce", requires=[COUNT], provides=[NUMBERS])
    async def produce(rc: Any) -> None:
        writer = rc.writer(NUMBERS)
        for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
            await writer.send_at(n, n)

    @g.processor(
        "add",
        input=NUMBERS,
        state=int,
        initial=0,
        provides=[TOTAL],
        commit_every=commit_every,
        max_delay=0.05,
    )
    async def add(rc: Any, state: int, n: int) -> int:
        return state + n

    @add.finish
    def finish(rc: Any, state: int) -> None:
        rc.set(TOTAL, state)

    return g


class Sizes:
    """A store wrapper noting the size of every record saved (its canonical JSON)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.sizes: list[int] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _Session(self, self.store.acquire(run_id, timeout))


class _Session:
    def __init__(self, owner: Sizes, session: Any) -> None:
        self._owner = owner
        self._session = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self._session.load()

    def save(self, record: RunRecord, expected: int, *args: Any) -> None:
        from durable_core import record_to_json

        self._session.save(record, expected, *args)
        self._owner.sizes.append(len(record_to_json(record)))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make(kind: str, directory: str) -> Any:
    if kind == "file":
        return FileStore(os.path.join(directory, "runs"))
    return SQLiteStore(os.path.join(directory, "runs.sqlite"))


def measure(kind: str, messages: int, commit_every: int, root: str) -> tuple[float, int, float]:
    """(seconds, saves, mean saved bytes) of one run on a fresh store."""
    directory = tempfile.mkdtemp(dir=root)
    store = make(kind, directory)
    try:
        started = time.perf_counter()
        result = Runtime(store).run(
            graph(commit_every), run_id="m", version="1", inputs={COUNT: messages}
        )
        seconds = time.perf_counter() - started
        if result.status != "completed" or result[TOTAL] != messages * (messages + 1) // 2:
            raise SystemExit(f"the {kind} run did not add up: {result.status} {result.error}")
        saves = result.saves
    finally:
        store.close()
    sized = Sizes(make(kind, tempfile.mkdtemp(dir=root)))
    Runtime(sized).run(
        graph(commit_every), run_id="m", version="1", inputs={COUNT: min(messages, 500)}
    )
    sized.store.close()
    return seconds, saves, statistics.mean(sized.sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the stores live (default: a temp dir)")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="durable-messages-")
    print(f"{args.messages} messages, best of {args.repeat}, in {root}")
    print(
        f"{'store':7} {'mode':12} {'msg/s':>8} {'saves':>7} {'msg/save':>9} {'avg KiB':>8} "
        f"{'vs floor':>9}"
    )
    for kind in ("sqlite", "file"):
        floor_size = 0.0
        rows = []
        for mode, every in (("unbatched", 1), (f"batched {args.batch}", args.batch)):
            runs = [measure(kind, args.messages, every, root) for _ in range(args.repeat)]
            seconds, saves, size = min(runs)
            floor_size = floor_size or size
            rows.append((mode, args.messages / seconds, saves, size))
        bare = bare_file_write if kind == "file" else bare_sqlite_commit
        floor_seconds = bare(root, [int(floor_size)] * 200)
        floor_rate = 1 / floor_seconds
        for mode, rate, saves, size in rows:
            print(
                f"{kind:7} {mode:12} {rate:8.0f} {saves:7d} {args.messages / saves:9.1f} "
                f"{size / 1024:8.1f} {rate / floor_rate:9.2f}"
            )
        print(f"{kind:7} {'floor':12} {floor_rate:8.0f} {'':7} {'':9} {floor_size / 1024:8.1f}")


if __name__ == "__main__":
    main()
