"""Executors side by side: the stdlib audit with threads and with processes, and what the Dask
executor costs per node for trivial bodies.

Part 1 runs ``examples/stdlib_audit`` durably (file store, ``max_running = 4``) once per
executor per round, alternating, and checks that every run writes the same ``report.json``.
``process`` builds a new pool for each run (``executor="process"``, 2 workers on this machine),
so its time includes starting the workers, as ``durable run audit-process.toml`` does.

Part 2 runs graphs of trivial function-form bodies (``n * 2``): a chain (each node waits for
the previous one: latency per node) and a fan-out of independent nodes (throughput per node),
with the ``thread`` executor, the ``process`` executor (2 workers) and the ``dask`` executor on
a ``LocalCluster`` of 2 worker processes started beforehand. No store: the engine alone.

Run it with::

    uv run python benchmarks/executors.py                 # 3 rounds of the audit
    uv run python benchmarks/executors.py --rounds 5 --chain 50 --fan 200

The machine's load average is printed before and after: other work on the machine slows the
process executor more than threads (it needs the cores). The CPU columns do not depend on the
load: CPU seconds of the owner and its workers, and CPU / wall, the cores a run really got.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import sys
import tempfile
import time
from typing import Any

from durable_core import Codecs, Graph, Key, ProcessExecutor, Runtime, execute, make_plugin_manager

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "stdlib_audit"))

import audit  # noqa: E402


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def audit_once(executor: str, workdir: pathlib.Path, max_files: int) -> tuple[float, float, bytes]:
    from durable_filestore import FileStore

    pm = make_plugin_manager(plugins=[("audit", audit)])
    out_dir = workdir / f"report-{executor}"
    runtime = Runtime(
        FileStore(workdir / f"store-{executor}"),
        Codecs.from_plugins(pm),
        plugins=pm,
        executor=ProcessExecutor(max_workers=2) if executor == "process" else None,
    )
    inputs = {audit.SOURCE: "stdlib", audit.MAX_FILES: max_files, audit.OUT_DIR: str(out_dir)}
    run_id = f"audit-{time.monotonic_ns()}"
    cpu = cpu_seconds()
    started = time.perf_counter()
    try:
        result = runtime.run(audit.graph, run_id=run_id, version="1", inputs=inputs, max_running=4)
    finally:
        if runtime.executor is not None:
            runtime.executor.close()  # joins the workers: their CPU time is counted
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds() - cpu
    if result.status != "completed":
        raise SystemExit(
            f"the {executor} run ended {result.status}: {result.error} (the example's report Sub "
            "has Timeout(60), which counts from the start of the run: on a very busy machine "
            "try --max-files)"
        )
    return elapsed, cpu, (out_dir / "report.json").read_bytes()


def part_audit(rounds: int, max_files: int) -> None:
    subset = f"the first {max_files} files of " if max_files else ""
    print(f"# audit of {subset}the standard library, {rounds} rounds ({load()})")
    times: dict[str, list[float]] = {"thread": [], "process": []}
    cpus: dict[str, list[float]] = {"thread": [], "process": []}
    reports: set[bytes] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for executor in times:
                elapsed, cpu, report = audit_once(executor, pathlib.Path(tmp), max_files)
                times[executor].append(elapsed)
                cpus[executor].append(cpu)
                reports.add(report)
    if len(reports) != 1:
        raise SystemExit("the executors wrote different reports")
    print("| executor | best s | median s | runs (s) | CPU s (median) | CPU / wall |")
    print("|---|---:|---:|---|---:|---:|")
    for executor, values in times.items():
        shown = " ".join(f"{v:.2f}" for v in values)
        cpu = statistics.median(cpus[executor])
        ratio = statistics.median(c / w for c, w in zip(cpus[executor], values, strict=True))
        print(
            f"| {executor} | {min(values):.2f} | {statistics.median(values):.2f} | {shown} | "
            f"{cpu:.2f} | {ratio:.2f} |"
        )
    speedup = min(times["thread"]) / min(times["process"])
    median = statistics.median(times["thread"]) / statistics.median(times["process"])
    print(f"process speed-up: {speedup:.2f}x (best), {median:.2f}x (median); same report: yes")
    print(f"({load()})\n")


def double(n: int) -> int:
    return n * 2


def trivial_graphs(chain: int, fan: int) -> tuple[tuple[Graph, Any], tuple[Graph, Any]]:
    keys = [Key(f"c{i}", int) for i in range(chain + 1)]
    g_chain = Graph("chain", inputs=[keys[0]])
    for i in range(chain):
        g_chain.node(f"n{i}", requires=[keys[i]], provides=[keys[i + 1]], executor="default")(
            double
        )
    n = Key("n", int)
    g_fan = Graph("fan", inputs=[n])
    for i in range(fan):
        g_fan.node(f"n{i}", requires=[n], provides=[Key(f"f{i}", int)], executor="default")(double)
    return (g_chain, {keys[0]: 1}), (g_fan, {n: 1})


def per_node(graph: Graph, inputs: Any, executor: Any, count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        result = execute(graph, inputs, executor=executor, max_running=8)
        best = min(best, time.perf_counter() - started)
        assert result.status == "completed", result.error
    return best / count * 1e6


def part_overhead(chain: int, fan: int, repeat: int) -> None:
    import dask
    from distributed import LocalCluster

    from durable_executor_dask import DaskExecutor

    print(f"# trivial bodies: µs per node, best of {repeat} ({load()})")
    (g_chain, in_chain), (g_fan, in_fan) = trivial_graphs(chain, fan)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
    rows = []
    try:
        process = ProcessExecutor(max_workers=2)
        dask_executor = DaskExecutor(address=cluster.scheduler_address)
        for name, executor in (("thread", None), ("process", process), ("dask", dask_executor)):
            if executor is not None:
                executor.start()
            rows.append(
                (
                    name,
                    per_node(g_chain, in_chain, executor, chain, repeat),
                    per_node(g_fan, in_fan, executor, fan, repeat),
                )
            )
            if executor is not None:
                executor.close()
    finally:
        cluster.close()
    print(f"| executor | chain of {chain} (latency) | fan-out of {fan} (throughput) |")
    print("|---|---:|---:|")
    for name, c, f in rows:
        print(f"| {name} | {c:.0f} | {f:.0f} |")
    print(f"({load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="audit runs per executor")
    parser.add_argument("--chain", type=int, default=50, help="nodes in the trivial chain")
    parser.add_argument("--fan", type=int, default=200, help="nodes in the trivial fan-out")
    parser.add_argument("--repeat", type=int, default=3, help="runs per trivial graph (best)")
    parser.add_argument("--max-files", type=int, default=0, help="audit a subset (0: all)")
    parser.add_argument("--skip-audit", action="store_true")
    args = parser.parse_args()
    if not args.skip_audit:
        part_audit(args.rounds, args.max_files)
    part_overhead(args.chain, args.fan, args.repeat)


if __name__ == "__main__":
    main()
