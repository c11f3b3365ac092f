"""Durable against LangGraph and DBOS: one sequential pipeline, each step saved before the next.

The pipeline has 1,000 steps (``--steps``); each step adds one to the value the step before it
produced. The contenders, each on SQLite and on PostgreSQL:

- ``durable``: a chain graph run by ``Runtime.run`` on ``SQLiteStore`` / ``PostgresStore``
  (every node is confirmed by a save before the next node starts);
- ``langgraph``: a ``StateGraph`` of as many nodes in a line, compiled with ``SqliteSaver`` /
  ``PostgresSaver`` and invoked with ``durability="sync"`` (every step's checkpoint is written
  before the next step starts);
- ``dbos``: a ``@DBOS.workflow`` calling a ``@DBOS.step`` that many times, on a SQLite /
  Postgres system database (every step's output is recorded before the workflow goes on);
- ``dboswal``: the same on SQLite, its database file switched to WAL mode before DBOS opens it
  (SQLite keeps the mode in the file; DBOS's default is the rollback journal);
- ``bare``: no library, the floor: per step one committed statement and nothing else, an
  ``UPDATE`` of a one-row table (psycopg, autocommit, on the same server) / an ``INSERT`` in a
  WAL-mode SQLite file with ``synchronous=FULL`` (the SQLite store's settings). No step can be
  made durable for less; ``peer / bare`` is the most any library committing once per step
  could reach against that peer.

Each contender runs in its own process (DBOS is a process-wide singleton), one after the other,
round after round (``--repeat``); the time is that of the pipeline call alone (imports, schema
setup and launch excluded), divided by the steps. It prints the median ms per step and each
peer's time against Durable's on the same database (the ratio of each round, then their median:
a noisy machine slows a whole round rather than one contender). Target: Durable at least 3
times faster per step than each peer, 5 times LangGraph and DBOS on PostgreSQL. Then each
contender against ``bare`` on the same database, per round: the ratio and the milliseconds per
step above the bare commit (for Durable: what its runtime and store add to the floor).

Does each really commit durably at every step? Two more, untimed runs per contender, of ``K``
and ``2K`` steps (``--check-steps K``), count the flushes to disk, and the difference divided by
``K`` is the flushes per step (setup work cancels out):

- SQLite: the ``fsync`` and ``fdatasync`` calls of the contender's process and its threads,
  counted with ``strace -f -c`` (needs ``strace``);
- PostgreSQL: the server's WAL flushes, ``pg_stat_wal.wal_sync`` before and after (the server
  runs only this benchmark: a throwaway one, or ``PULSE_POSTGRES_TEST_DSN``, then other clients
  of that server add to the count).

A contender with clearly fewer than one flush per step (under 0.9) does not persist every step
durably; it is flagged.

Needs the peers: ``uv sync --group peers``. Run it with::

    uv run --group peers python benchmarks/peers.py
    uv run --group peers python benchmarks/peers.py --steps 500 --repeat 5 --databases sqlite
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _support import chain, make_store, median, postgres, postgres_url, sync_settings, wal_syncs

TARGET = 3.0
TARGETS = {"langgraph-postgres": 5.0, "dbos-postgres": 5.0}
"""Where the target is higher than ``TARGET``: ``peer / Durable`` per contender."""
FLUSH_FLOOR = 0.9
"""Flushes per step below which a contender is flagged: one per step, less the counting noise
(a WAL flush by the server's background writer can carry a commit's records)."""
SYSTEMS = ("durable", "langgraph", "dbos", "dboswal", "bare")
FLOORS = ("bare",)
"""Contenders that are the floor, not peers: no verdict, their ratios printed apart."""
ONLY_SQLITE = ("dboswal",)
DATABASES = ("sqlite", "postgres")


# -- one contender, in its own process -----------------------------------------------------------


def run_durable(database: str, steps: int, directory: str, dsn: str | None) -> float:
    from durable_core import Runtime

    graph, seed = chain(steps)
    store = make_store(database, directory, dsn)
    try:
        started = time.perf_counter()
        result = Runtime(store).run(
            graph, run_id=f"peers-{time.time_ns()}", version="1", inputs={seed: 0}
        )
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    assert result.status == "completed", result.error
    return elapsed


def run_langgraph(database: str, steps: int, directory: str, dsn: str | None) -> float:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        value: int

    def step(state: State) -> dict[str, int]:
        return {"value": state["value"] + 1}

    builder = StateGraph(State)
    names = [f"n{i}" for i in range(steps)]
    for name in names:
        builder.add_node(name, step)
    builder.add_edge(START, names[0])
    for before, after in itertools.pairwise(names):
        builder.add_edge(before, after)
    builder.add_edge(names[-1], END)
    config: Any = {
        "configurable": {"thread_id": f"peers-{time.time_ns()}"},
        "recursion_limit": steps + 10,
    }

    def timed(saver: Any) -> float:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        started = time.perf_counter()
        out = graph.invoke({"value": 0}, config, durability="sync")
        elapsed = time.perf_counter() - started
        assert out["value"] == steps, out
        return elapsed

    if database == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(os.path.join(directory, "langgraph.sqlite"), check_same_thread=False)
        try:
            return timed(SqliteSaver(conn))
        finally:
            conn.close()
    from langgraph.checkpoint.postgres import PostgresSaver

    assert dsn is not None
    with PostgresSaver.from_conn_string(dsn) as saver:
        return timed(saver)


def run_dbos(
    database: str, steps: int, directory: str, dsn: str | None, wal: bool = False
) -> float:
    from dbos import DBOS

    if database == "sqlite":
        path = os.path.join(directory, "dbos.sqlite")
        if wal:
            import sqlite3

            conn = sqlite3.connect(path)
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            finally:
                conn.close()
            assert mode == "wal", mode
        url = f"sqlite:///{path}"
    else:
        assert dsn is not None
        url = postgres_url(dsn)
    DBOS(config={"name": "durable-peers", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def step(value: int) -> int:
        return value + 1

    @DBOS.workflow()
    def pipeline(count: int) -> int:
        value = 0
        for _ in range(count):
            value = step(value)
        return value

    DBOS.launch()
    try:
        started = time.perf_counter()
        out = pipeline(steps)
        elapsed = time.perf_counter() - started
    finally:
        DBOS.destroy()
    assert out == steps, out
    return elapsed


def run_bare(database: str, steps: int, directory: str, dsn: str | None) -> float:
    value = 0
    if database == "sqlite":
        import sqlite3

        conn = sqlite3.connect(os.path.join(directory, "bare.sqlite"), isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("CREATE TABLE steps (step INTEGER PRIMARY KEY, value INTEGER)")
            started = time.perf_counter()
            for step in range(steps):
                value += 1
                conn.execute("INSERT INTO steps VALUES (?, ?)", (step, value))
            elapsed = time.perf_counter() - started
        finally:
            conn.close()
    else:
        import psycopg

        assert dsn is not None
        table = f"peers_bare_{os.getpid()}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, value int8)")
            try:
                conn.execute(f"INSERT INTO {table} VALUES (1, 0)")
                statement = f"UPDATE {table} SET value = %s WHERE id = 1"
                started = time.perf_counter()
                for _ in range(steps):
                    value += 1
                    conn.execute(statement, (value,))
                elapsed = time.perf_counter() - started
            finally:
                conn.execute(f"DROP TABLE {table}")
    assert value == steps
    return elapsed


RUNNERS: dict[str, Callable[[str, int, str, str | None], float]] = {
    "durable": run_durable,
    "langgraph": run_langgraph,
    "dbos": run_dbos,
    "dboswal": lambda database, steps, directory, dsn: run_dbos(
        database, steps, directory, dsn, wal=True
    ),
    "bare": run_bare,
}


def one(args: argparse.Namespace) -> None:
    system, database = args.one.split("-")
    directory = tempfile.mkdtemp(prefix=f"{args.one}-", dir=args.dir)
    try:
        seconds = RUNNERS[system](database, args.steps, directory, args.dsn)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps({"seconds": seconds}))


# -- the comparison ------------------------------------------------------------------------------


def child(name: str, steps: int, base: str, dsn: str | None, strace_to: str | None = None) -> float:
    """Run contender ``name`` in a fresh process; its pipeline seconds."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one", name, "--steps", str(steps)]
    command += ["--dir", base]
    if dsn is not None:
        command += ["--dsn", dsn]
    if strace_to is not None:
        trace = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", strace_to]
        command = trace + command
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return float(json.loads(lines[-1])["seconds"])


def strace_calls(path: str) -> int:
    total = 0
    for line in Path(path).read_text().splitlines():
        fields = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"
        if len(fields) >= 5 and fields[-1] in ("fsync", "fdatasync"):
            total += int(fields[3])
    return total


def flushes(name: str, steps: int, base: str, dsn: str | None) -> int:
    """Flushes to disk of one run of ``steps`` steps (see the module docstring)."""
    if name.endswith("sqlite"):
        with tempfile.NamedTemporaryFile(dir=base, suffix=".strace") as out:
            child(name, steps, base, dsn, strace_to=out.name)
            return strace_calls(out.name)
    assert dsn is not None
    before = wal_syncs(dsn)
    child(name, steps, base, dsn)
    time.sleep(1.0)  # the server's backends report their counts as they exit
    return wal_syncs(dsn) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps in the pipeline")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per contender")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--databases", nargs="+", choices=DATABASES, default=list(DATABASES))
    parser.add_argument("--check-steps", type=int, default=100, help="K of the flush count")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args)
        return
    if "sqlite" in args.databases and shutil.which("strace") is None:
        parser.error("counting fsync calls on SQLite needs strace (apt-get install strace)")

    names = [
        f"{s}-{d}"
        for d in args.databases
        for s in args.systems
        if d == "sqlite" or s not in ONLY_SQLITE
    ]
    print(f"{args.steps}-step pipeline; median of {args.repeat} runs; one process per run")
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.databases else None
        if dsn is not None:
            print(f"PostgreSQL server: {sync_settings(dsn)}")
        per_step: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(args.repeat):
            for name in names:
                per_step[name].append(child(name, args.steps, base, dsn) / args.steps)
        k = args.check_steps
        per_flush = {
            name: (flushes(name, 2 * k, base, dsn) - flushes(name, k, base, dsn)) / k
            for name in names
        }

    print()
    print(f"{'contender':<20}{'ms/step':>9}{'min':>8}{'max':>8}{'flushes/step':>14}  peer/durable")
    verdicts = []
    for name in names:
        system, database = name.split("-")
        mid = median(per_step[name])
        line = (
            f"{name:<20}{mid * 1e3:>9.3f}{min(per_step[name]) * 1e3:>8.3f}"
            f"{max(per_step[name]) * 1e3:>8.3f}{per_flush[name]:>14.2f}"
        )
        own = f"durable-{database}"
        if system not in ("durable", *FLOORS) and own in per_step:
            # Per round (the peer and Durable ran minutes apart at most), then the median.
            speedup = median([p / d for p, d in zip(per_step[name], per_step[own], strict=True)])
            line += f"  {speedup:.2f}"
            target = TARGETS.get(name, TARGET)
            verdicts.append(
                f"durable vs {name}: {speedup:.2f}x (target >= {target:.0f}x) "
                f"{'met' if speedup >= target else 'NOT met'}"
            )
        if per_flush[name] < FLUSH_FLOOR:
            line += "  (fewer flushes than steps: not every step is durable)"
        print(line)
    print()
    for verdict in verdicts:
        print(verdict)
    for floor in FLOORS:
        for database in args.databases:
            bare = f"{floor}-{database}"
            if bare not in per_step:
                continue
            print()
            for name in names:
                if name == bare or not name.endswith(f"-{database}"):
                    continue
                ratios = [p / b for p, b in zip(per_step[name], per_step[bare], strict=True)]
                gaps = [p - b for p, b in zip(per_step[name], per_step[bare], strict=True)]
                print(
                    f"{name} / {bare}: {median(ratios):.2f}x "
                    f"({median(gaps) * 1e3:+.3f} ms per step over the bare commit)"
                )


if __name__ == "__main__":
    main()
