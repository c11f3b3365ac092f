"""Does a node cost the same at the end of a long chain as near its start? Per store, one run.

Runs one chain of trivial nodes (each adds one to the value of the node before; default 10,000
nodes) with the plain engine (``execute``: no store, no checkpoints) and with ``Runtime.run``
on a fresh memory, file, SQLite and PostgreSQL store. Every body notes when it ran; the gap
between two consecutive bodies is what one node cost, runtime and store included. For each it
prints the median gap of the 100 nodes around node 100 and of the last 100 nodes, and:

- ``end/100``: their ratio. Target: at most 1.5 on every store (the cost of a save depends on
  what changed, not on how large the run is).
- ``x engine``: the store's median gap against the engine's (the median over the whole
  chain). Target: MemoryStore at most 20 times the engine alone, near the end as well.

Then peak memory: the engine alone and each store run the same chain once more, each in a fresh
Python process, which reports its peak resident set size (``VmHWM`` on Linux) when the run is done.
For each store it prints that peak, the size of the run's complete record (its canonical JSON),
and ``x (engine + record)``: the peak against the engine's peak plus the record's bytes.
Target: below 2. ``--no-rss`` skips this part.

Run it with::

    uv run python benchmarks/growth.py                      # 10,000 nodes, every store
    uv run python benchmarks/growth.py --nodes 2000 --stores memory sqlite
    uv run python benchmarks/growth.py --repeat 3           # medians of 3 runs per store
    uv run python benchmarks/growth.py --no-rss             # per-node cost only

PostgreSQL: ``PULSE_POSTGRES_TEST_DSN`` when set, else a throwaway server with durable settings
(see ``_support.py``); ``--stores`` without ``postgres`` skips it. ``--dir`` chooses where the
file and SQLite stores write (default: a temporary directory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from _support import STORES, chain, make_store, median, ms, near, node_gaps, postgres, sync_settings

from durable_core import Runtime, execute

TARGET_GROWTH = 1.5
TARGET_MEMORY_VS_ENGINE = 20.0
TARGET_RSS = 2.0


def engine_gaps(nodes: int) -> tuple[list[float], float]:
    """The engine alone: per-node gaps and wall seconds of one run."""
    stamps: list[float] = []
    graph, seed = chain(nodes, stamps)
    started = time.perf_counter()
    result = execute(graph, {seed: 0})
    wall = time.perf_counter() - started
    assert result.status == "completed", result.error
    return node_gaps(stamps), wall


def store_gaps(
    kind: str, nodes: int, base: str, dsn: str | None, run: int
) -> tuple[list[float], float]:
    """``Runtime.run`` on a fresh store of ``kind``: per-node gaps and wall seconds."""
    stamps: list[float] = []
    graph, seed = chain(nodes, stamps)
    directory = tempfile.mkdtemp(prefix=f"{kind}-", dir=base)
    store = make_store(kind, directory, dsn)
    try:
        started = time.perf_counter()
        result = Runtime(store).run(
            graph, run_id=f"growth-{nodes}-{run}-{time.time_ns()}", version="1", inputs={seed: 0}
        )
        wall = time.perf_counter() - started
        assert result.status == "completed", result.error
    finally:
        store.close()
    return node_gaps(stamps), wall


def peak_child(kind: str, nodes: int, base: str, dsn: str | None) -> None:
    """Run the chain once (``kind`` "engine" or a store) and print, as JSON, this process's
    peak RSS in bytes and the size of the run's complete record."""
    graph, seed = chain(nodes)
    record_bytes = 0
    if kind == "engine":
        result = execute(graph, {seed: 0})
        assert result.status == "completed", result.error
        peak = _peak_rss()
    else:
        from durable_core import record_to_json

        store = make_store(kind, tempfile.mkdtemp(prefix=f"rss-{kind}-", dir=base), dsn)
        run_id = f"rss-{nodes}-{time.time_ns()}"
        try:
            result = Runtime(store).run(graph, run_id=run_id, version="1", inputs={seed: 0})
            assert result.status == "completed", result.error
            peak = _peak_rss()  # before the record is read back below
            with store.acquire(run_id) as session:
                record_bytes = len(record_to_json(session.load()))
        finally:
            store.close()
    print(json.dumps({"peak": peak, "record": record_bytes}))


def _peak_rss() -> int:
    """This process's peak resident set size in bytes.

    Linux: ``VmHWM`` of ``/proc/self/status``, the peak of this program's own memory
    (``ru_maxrss`` would also count the parent's memory at the moment it started this
    process, which Linux carries across ``exec``). Elsewhere ``ru_maxrss`` (bytes on macOS).
    """
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/status", encoding="ascii") as status,
    ):
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def peak_rss(kind: str, nodes: int, base: str, dsn: str | None) -> dict[str, int]:
    """Peak RSS (bytes) and record bytes of one run of ``kind`` in a fresh Python process."""
    command = [sys.executable, __file__, "--nodes", str(nodes), "--peak-of", kind, "--dir", base]
    env = dict(os.environ)
    if dsn is not None:
        env["DURABLE_GROWTH_DSN"] = dsn
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the peak-RSS run of {kind} failed:\n{done.stderr}")
    values: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


def mib(count: float) -> str:
    return f"{count / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the chain")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--repeat", type=int, default=1, help="runs per store (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS runs")
    parser.add_argument("--peak-of", default=None, help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.peak_of is not None:
        peak_child(args.peak_of, args.nodes, args.dir, os.environ.get("DURABLE_GROWTH_DSN"))
        return
    if args.nodes < 300:
        parser.error("--nodes must be at least 300 (two windows of 100 nodes apart)")

    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"chain of {args.nodes} nodes; medians of {args.repeat} run(s); load average {load}")
    print("per-node cost = median")
    print("gap between consecutive node bodies, of the 100 nodes around node 100 and the last 100")
    print()
    header = f"{'store':<10}{'whole run':>11}{'near 100':>12}{'near end':>12}{'end/100':>9}"
    print(header + f"{'x engine (100 / end)':>24}")

    engine_runs = [engine_gaps(args.nodes) for _ in range(args.repeat)]
    engine = median([median(gaps) for gaps, _ in engine_runs])
    engine_100 = median([near(gaps, 100) for gaps, _ in engine_runs])
    engine_end = median([near(gaps, args.nodes) for gaps, _ in engine_runs])
    engine_wall = median([wall for _, wall in engine_runs])
    print(
        f"{'engine':<10}{engine_wall:>10.2f}s{ms(engine_100):>12}{ms(engine_end):>12}"
        f"{engine_end / engine_100:>9.2f}{'1 / 1':>24}",
        flush=True,
    )

    verdicts: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.stores else None
        if dsn is not None:
            print(f"{'':<10}PostgreSQL server: {sync_settings(dsn)}", flush=True)
        for kind in args.stores:
            runs = [store_gaps(kind, args.nodes, base, dsn, i) for i in range(args.repeat)]
            at_100 = median([near(gaps, 100) for gaps, _ in runs])
            at_end = median([near(gaps, args.nodes) for gaps, _ in runs])
            wall = median([wall for _, wall in runs])
            growth = at_end / at_100
            print(
                f"{kind:<10}{wall:>10.2f}s{ms(at_100):>12}{ms(at_end):>12}{growth:>9.2f}"
                f"{f'{at_100 / engine:.0f} / {at_end / engine:.0f}':>24}",
                flush=True,
            )
            verdicts.append(
                f"{kind}: end/100 = {growth:.2f} (target <= {TARGET_GROWTH}) "
                f"{'met' if growth <= TARGET_GROWTH else 'NOT met'}"
            )
            if kind == "memory":
                worst = max(at_100, at_end) / engine
                verdicts.append(
                    f"memory: {worst:.0f}x the engine alone (target <= "
                    f"{TARGET_MEMORY_VS_ENGINE:.0f}x) "
                    f"{'met' if worst <= TARGET_MEMORY_VS_ENGINE else 'NOT met'}"
                )
        if not args.no_rss:
            print()
            print("peak RSS, each run in a fresh process:")
            print(f"{'run':<10}{'peak RSS':>12}{'record':>12}{'x (engine + record)':>22}")
            alone = peak_rss("engine", args.nodes, base, None)["peak"]
            print(f"{'engine':<10}{mib(alone):>12}{'':>12}{'':>22}", flush=True)
            for kind in args.stores:
                got = peak_rss(kind, args.nodes, base, dsn)
                ratio = got["peak"] / (alone + got["record"])
                print(
                    f"{kind:<10}{mib(got['peak']):>12}{mib(got['record']):>12}{ratio:>22.2f}",
                    flush=True,
                )
                verdicts.append(
                    f"{kind}: peak RSS {ratio:.2f}x (engine alone + record) (target < "
                    f"{TARGET_RSS:.0f}) {'met' if ratio < TARGET_RSS else 'NOT met'}"
                )
    print()
    print(f"engine alone: median gap {ms(engine)} over the whole chain")
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
