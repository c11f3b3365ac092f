"""Durable's processor against bytewax: one exactly-once stateful job, messages per second.

The job: ``--messages`` integers (20,000) from a resumable source, one stateful step adding each
to a ``(count, total)`` state, the state recoverable after a crash from local SQLite, and the
result checked (``count`` = messages, ``total`` = their sum). The contenders:

- ``bytewax``: ``TestingSource`` (resumable: it snapshots its position) -> ``stateful_map``
  keyed on one key -> ``TestingSink``, run by ``bytewax.testing.run_main`` with a recovery
  directory (``bytewax.recovery``: SQLite partitions, one here) and a 50 ms epoch: state and
  source positions are snapshotted to SQLite once per epoch;
- ``def-attrs-100``: a graph whose producer sends the integers with ``send_at`` (resumable:
  each element is saved with the producer's position) and a processor with
  ``commit_every=100, max_delay=0.05``, an attrs ``Sum(count, total)`` state (stored with a
  JSON codec) and a plain ``def`` handler, on ``SQLiteStore``;
- ``async-int-100``: the same with an ``async def`` handler and an int state (the total; the
  count is checked from the producer's side);
- ``def-attrs-100-c1024``: ``def-attrs-100`` with the stream's capacity at 1,024 elements instead
  of 256 (the producer may then run further ahead of the commits; see "Sizing a processor's
  input" in docs/graphs.md); the target is measured on ``def-attrs-100``;
- ``def-attrs-1``: ``def-attrs-100`` with ``commit_every=1``: one save per message (run on
  ``--unbatched`` messages: it is slow);
- ``floor-1``: one bare durable write (one ``UPDATE`` of a BLOB in WAL mode with
  ``synchronous=FULL``, as ``benchmarks/messages.py`` measures it) of the median size of one
  unbatched commit's delta, as messages per second if each message cost exactly that write.
  The unbatched target is at least 0.7 of it.
- ``python-floor-100``: no job, a lower bound: what each message of ``def-attrs-100`` costs at
  least in Python on Durable's model (an element saved, hashed, before a reader sees it),
  in a tight loop without I/O, event loop or threads: the handler call, the element encoded
  and hashed into a pending record, a message attempt id, and per 100 messages the state
  encoded (``run_python_floor``).

Each contender runs in its own process, one after the other, round after round (``--repeat``);
the time is the job's call alone (imports and graph building excluded). It prints the median
messages per second of each contender and the ratios of Durable's rates against bytewax's (per
round, then their median: a noisy machine slows a whole round rather than one contender).

Needs bytewax: ``uv sync --group peers``. Run it with::

    uv run --group peers python benchmarks/processor_peers.py
    uv run --group peers python benchmarks/processor_peers.py --repeat 5 --unbatched 1000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CONTENDERS = (
    "bytewax",
    "def-attrs-100",
    "def-attrs-100-c1024",
    "async-int-100",
    "def-attrs-1",
    "floor-1",
    "python-floor-100",
)
BATCHED_TARGET = 1.0
UNBATCHED_TARGET = 0.7


@attrs.frozen
class Sum:
    count: int = 0
    total: int = 0


# -- the contenders, each in its own process -----------------------------------------------------


def run_bytewax(messages: int, directory: str) -> float:
    from datetime import timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import TestingSink, TestingSource, run_main

    db_dir = Path(directory) / "recovery"
    db_dir.mkdir()
    init_db_dir(db_dir, 1)
    out: list[tuple[str, tuple[int, int]]] = []

    def add(state: tuple[int, int] | None, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
        count, total = state if state is not None else (0, 0)
        new = (count + 1, total + n)
        return new, new

    flow = Dataflow("processor-peers")
    numbers = op.input("numbers", flow, TestingSource(range(1, messages + 1)))
    keyed = op.key_on("key", numbers, lambda _n: "all")
    summed = op.stateful_map("sum", keyed, add)
    op.output("out", summed, TestingSink(out))
    started = time.perf_counter()
    run_main(
        flow,
        epoch_interval=timedelta(milliseconds=50),
        recovery_config=RecoveryConfig(db_dir),
    )
    elapsed = time.perf_counter() - started
    assert out[-1] == ("all", (messages, messages * (messages + 1) // 2)), out[-1]
    assert len(out) == messages
    return elapsed


def durable_graph(commit_every: int, *, plain: bool, capacity: int = 256) -> tuple[Any, Any, Any]:
    from durable_core import Graph, Key

    count_key = Key("count", int)
    numbers = Key("numbers", int, stream=True, capacity=capacity)
    total_key = Key("total", Sum) if plain else Key("total", int)
    g = Graph("processor-peers", inputs=[count_key])

    @g.node("produce", requires=[count_key], provides=[numbers])
    async def produce(rc: Any) -> None:
        writer = rc.writer(numbers)
        for n in range((writer.position or 0) + 1, rc.get(count_key) + 1):
            await writer.send_at(n, n)  # resumable: the position is saved with the element

    if plain:

        def add_sum(rc: Any, state: Sum, n: int) -> Sum:
            return Sum(state.count + 1, state.total + n)

        add = g.processor(
            "sum",
            input=numbers,
            state=Sum,
            initial=Sum(),
            provides=[total_key],
            commit_every=commit_every,
            max_delay=0.05,
        )(add_sum)
    else:

        async def add_int(rc: Any, state: int, n: int) -> int:
            return state + n

        add = g.processor(
            "sum",
            input=numbers,
            state=int,
            initial=0,
            provides=[total_key],
            commit_every=commit_every,
            max_delay=0.05,
        )(add_int)

    @add.finish
    def finish(rc: Any, state: Any) -> None:
        rc.set(total_key, state)

    return g, count_key, total_key


def run_durable(
    messages: int, directory: str, commit_every: int, plain: bool, capacity: int = 256
) -> float:
    from durable_core import Codecs, Runtime
    from durable_sqlitestore import SQLiteStore

    graph, count_key, total_key = durable_graph(commit_every, plain=plain, capacity=capacity)
    codecs = Codecs.default()
    codecs.register_json(Sum)
    store = SQLiteStore(os.path.join(directory, "runs.sqlite"))
    try:
        started = time.perf_counter()
        result = Runtime(store, codecs).run(
            graph, run_id="processor-peers", version="1", inputs={count_key: messages}
        )
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    assert result.status == "completed", result.error
    total = messages * (messages + 1) // 2
    expected = Sum(messages, total) if plain else total
    assert result[total_key] == expected, result[total_key]
    return elapsed


def unbatched_delta_size(messages: int = 300) -> int:
    """Median bytes of the deltas of an unbatched run's processor commits (memory store)."""
    from durable_core import Codecs, MemoryStore, Runtime

    sizes: list[int] = []
    store = MemoryStore()

    class Noting:
        def acquire(self, run_id: str, timeout: float | None = None) -> Any:
            session = store.acquire(run_id, timeout)

            class Session:
                def __getattr__(self, name: str) -> Any:
                    return getattr(session, name)

                def save(self, record: Any, expected: int, encoded: Any = None) -> None:
                    session.save(record, expected, encoded=encoded)
                    if encoded is not None and encoded.delta is not None:
                        sizes.append(len(encoded.delta))

                def __enter__(self) -> Any:
                    return self

                def __exit__(self, *exc: object) -> None:
                    session.close()

            return Session()

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

    graph, count_key, _ = durable_graph(1, plain=True)
    codecs = Codecs.default()
    codecs.register_json(Sum)
    result = Runtime(Noting(), codecs).run(
        graph, run_id="sizes", version="1", inputs={count_key: messages}
    )
    assert result.status == "completed", result.error
    return int(statistics.median(sizes))


def run_python_floor(messages: int, directory: str) -> float:
    """The per-message minimum of Durable's model in a tight loop, without I/O, loop or
    threads: the handler call and its new state, the element encoded and hashed (its record
    digest) into a pending record, the ack taking it out again, one message attempt id; per
    100 messages the state encoded (JSON) as one commit would."""
    import hashlib
    import random

    from durable_core import Codecs, Key
    from durable_core.records import PendingMessageRecord

    codecs = Codecs.default()
    codecs.register_json(Sum)
    element_codec = codecs.lookup(int)
    state_key = Key("state", Sum)
    bits = random.Random(1).getrandbits

    def add_sum(rc: Any, state: Sum, n: int) -> Sum:
        return Sum(state.count + 1, state.total + n)

    started = time.perf_counter()
    state = Sum()
    pending: list[PendingMessageRecord] = []
    for n in range(1, messages + 1):
        data = element_codec.encode(n)
        pending.append(PendingMessageRecord(n, data, hashlib.sha256(data).hexdigest()))
        state = add_sum(None, state, n)
        _ = f"{bits(128):032x}"
        if n % 100 == 0:
            codecs.encode_value(state_key.type, state, name="state")
            pending.clear()
    elapsed = time.perf_counter() - started
    assert state == Sum(messages, messages * (messages + 1) // 2)
    return elapsed


def run_floor(messages: int, directory: str) -> float:
    from checkpoint_overhead import bare_sqlite_commit

    size = unbatched_delta_size()
    return bare_sqlite_commit(directory, [size] * messages) * messages


RUNNERS: dict[str, Callable[[int, str], float]] = {
    "bytewax": run_bytewax,
    "def-attrs-100": lambda m, d: run_durable(m, d, 100, True),
    "def-attrs-100-c1024": lambda m, d: run_durable(m, d, 100, True, capacity=1024),
    "async-int-100": lambda m, d: run_durable(m, d, 100, False),
    "def-attrs-1": lambda m, d: run_durable(m, d, 1, True),
    "floor-1": run_floor,
    "python-floor-100": run_python_floor,
}


def one(name: str, messages: int, base: str) -> None:
    directory = tempfile.mkdtemp(prefix=f"{name}-", dir=base)
    try:
        seconds = RUNNERS[name](messages, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps({"seconds": seconds}))


def child(name: str, messages: int, base: str) -> float:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", name]
    command += ["--messages", str(messages), "--dir", base]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return float(json.loads(lines[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--unbatched", type=int, default=2_000, help="messages of def-attrs-1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.messages, args.dir)
        return
    counts = {
        name: args.unbatched if name.endswith("-1") else args.messages for name in args.contenders
    }
    print(
        f"{args.messages} messages ({args.unbatched} unbatched), median of {args.repeat} rounds, "
        f"one process per run; load average {os.getloadavg()[0]:.2f}"
    )
    rates: dict[str, list[float]] = {name: [] for name in args.contenders}
    with tempfile.TemporaryDirectory(dir=args.dir) as base:
        for _ in range(args.repeat):
            for name in args.contenders:
                rates[name].append(counts[name] / child(name, counts[name], base))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print(f"{'contender':<20}{'msg/s':>9}{'min':>9}{'max':>9}{'us/msg':>9}")
    for name in args.contenders:
        mid = statistics.median(rates[name])
        print(
            f"{name:<20}{mid:>9.0f}{min(rates[name]):>9.0f}{max(rates[name]):>9.0f}"
            f"{1e6 / mid:>9.1f}"
        )
    print()

    def ratio(a: str, b: str) -> float:
        return statistics.median([x / y for x, y in zip(rates[a], rates[b], strict=True)])

    if "bytewax" in rates:
        for name in ("def-attrs-100", "def-attrs-100-c1024", "async-int-100", "def-attrs-1"):
            if name in rates:
                line = f"{name} / bytewax: {ratio(name, 'bytewax'):.3f}"
                if name == "def-attrs-100":
                    met = ratio(name, "bytewax") >= BATCHED_TARGET
                    line += f" (target >= {BATCHED_TARGET:.1f}) {'met' if met else 'NOT met'}"
                print(line)
    if "python-floor-100" in rates and "def-attrs-100" in rates:
        print(f"def-attrs-100 / python-floor-100: {ratio('def-attrs-100', 'python-floor-100'):.3f}")
    if "def-attrs-1" in rates and "floor-1" in rates:
        value = ratio("def-attrs-1", "floor-1")
        print(
            f"def-attrs-1 / floor-1: {value:.3f} (target >= {UNBATCHED_TARGET}) "
            f"{'met' if value >= UNBATCHED_TARGET else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
