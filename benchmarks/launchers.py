"""The local launcher: CPU-bound runs on ``local:2`` against ``local:1``, and what ``submit``
costs per run against a plain ``durable run``.

Part 1 submits ``--runs`` runs of a CPU-bound graph (one node: a pure-Python loop of about
``--work`` seconds) to ``local:1`` and to ``local:2``, alternating, each round on a fresh SQLite
store. "cold" times the whole ``submit`` call, starting the worker processes included (what
``durable submit`` does); "warm" reuses a launcher whose workers have already run one run.

Part 2 times one trivial run (one node) end to end as commands: ``durable run CONFIG --run-id``
against ``durable submit CONFIG --run-id … --on local:1 --wait`` (median of ``--repeat``
each), and per run inside a warm ``local:1`` pool (``--batch`` trivial runs, one after
another) against ``Runtime.run`` in this process.

Run it with::

    uv run python benchmarks/launchers.py
    uv run python benchmarks/launchers.py --runs 8 --work 1.5 --rounds 3 --repeat 5

The machine's load average is printed before and after: with other work on the machine two
workers cannot be twice as fast (they need two free cores). The workers' CPU / wall column
(cold runs: the CPU seconds of the closed pool's processes over the wall time) shows how many
cores the workers really got.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from durable_core.launchers import LocalLauncher, RunSpec, submit

GRAPH = """
import time

from durable_core.graph import Graph, Key

WORK = Key("work", float)
N = Key("n", int)
OUT = Key("out", int)

graph = Graph("cpu", inputs=[WORK, N])


@graph.node("burn", requires=[WORK, N], provides=[OUT])
def burn(rc):
    end = time.process_time() + rc.get(WORK)
    total = 0
    while time.process_time() < end:  # CPU seconds, whatever the load
        for i in range(10_000):
            total += i * rc.get(N)
    rc.set(OUT, total % 1000)
"""


def project(folder: pathlib.Path, work: float) -> str:
    (folder / "cpu_bench.py").write_text(GRAPH)
    config = folder / "cpu.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            graph = "cpu_bench:graph"
            run_id = "one"
            version = "1"

            [inputs]
            work = {work}
            n = 1

            [store]
            backend = "sqlite"
            path = "runs.sqlite"
            """
        )
    )
    return str(config)


def fresh_store(config: str) -> None:
    folder = pathlib.Path(config).parent
    for path in folder.glob("runs.sqlite*"):
        path.unlink()


def batch(count: int, prefix: str) -> list[RunSpec]:
    return [RunSpec(run_id=f"{prefix}-{i}", inputs={"n": i}) for i in range(count)]


def children_cpu() -> float:
    """CPU seconds of this process's ended children (a launcher's workers, once closed)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_submit(config: str, runs: list[RunSpec], on: object) -> float:
    started = time.perf_counter()
    outcomes = submit(config, runs, on=on)
    elapsed = time.perf_counter() - started
    assert all(o.status == "completed" for o in outcomes), outcomes
    return elapsed


def part1(folder: pathlib.Path, runs: int, work: float, rounds: int) -> None:
    config = project(folder / "cpu", work)
    cold: dict[int, list[float]] = {1: [], 2: []}
    warm: dict[int, list[float]] = {1: [], 2: []}
    cores: dict[int, list[float]] = {1: [], 2: []}
    for r in range(rounds):
        for workers in (1, 2):
            fresh_store(config)
            cpu = children_cpu()
            cold[workers].append(timed_submit(config, batch(runs, f"c{r}"), f"local:{workers}"))
            cores[workers].append((children_cpu() - cpu) / cold[workers][-1])
            fresh_store(config)
            with LocalLauncher(workers) as launcher:
                warmup = [RunSpec(run_id=f"w{r}-{i}", inputs={"work": 0.0}) for i in range(workers)]
                timed_submit(config, warmup, launcher)
                warm[workers].append(timed_submit(config, batch(runs, f"h{r}"), launcher))
    print(f"\nPart 1: {runs} runs of {work} CPU s each, {rounds} rounds (wall s)")
    print("| launcher | cold median | cold runs | workers' CPU / wall | warm median | warm runs |")
    print("|---|---:|---|---:|---:|---|")
    for workers in (1, 2):
        print(
            f"| local:{workers} | {statistics.median(cold[workers]):.2f} | "
            f"{' '.join(f'{t:.2f}' for t in cold[workers])} | "
            f"{statistics.median(cores[workers]):.2f} | "
            f"{statistics.median(warm[workers]):.2f} | "
            f"{' '.join(f'{t:.2f}' for t in warm[workers])} |"
        )
    for label, data in (("cold", cold), ("warm", warm)):
        ratio = statistics.median(data[1]) / statistics.median(data[2])
        print(f"speed-up local:2 against local:1 ({label}, medians): {ratio:.2f}x")


def command(*args: str, cwd: pathlib.Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "durable_core", *args],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def part2(folder: pathlib.Path, repeat: int, count: int) -> None:
    config = project(folder / "trivial", 0.0)
    cwd = pathlib.Path(config).parent
    plain = [command("run", config, "--run-id", f"p{i}", cwd=cwd) for i in range(repeat)]
    submitted = [
        command("submit", config, "--run-id", f"s{i}", "--on", "local:1", "--wait", cwd=cwd)
        for i in range(repeat)
    ]
    print(f"\nPart 2: one trivial run as a command, median of {repeat} (wall s)")
    print("| command | median | runs |")
    print("|---|---:|---|")
    for name, data in (("durable run", plain), ("durable submit --on local:1 --wait", submitted)):
        print(f"| {name} | {statistics.median(data):.3f} | {' '.join(f'{t:.3f}' for t in data)} |")
    overhead = statistics.median(submitted) - statistics.median(plain)
    print(f"submit's overhead per command: {overhead:.3f} s")

    from durable_core.config import load_config
    from durable_core.durable import Runtime
    from durable_core.plugins import make_plugin_manager

    loaded = load_config(config)
    graph = loaded.load_graph()
    pm = make_plugin_manager()
    loaded.register_graph_module(pm)
    codecs = loaded.make_codecs(pm)
    store = loaded.open_store(pm)
    runtime = Runtime(store, codecs, plugins=pm)
    inputs = loaded.resolve_inputs(graph)
    started = time.perf_counter()
    for i in range(count):
        runtime.run(graph, run_id=f"i{i}", version="1", inputs=inputs)
    in_process = (time.perf_counter() - started) / count
    store.close()
    with LocalLauncher(1) as launcher:
        timed_submit(config, [RunSpec(run_id="warmup")], launcher)
        pooled = timed_submit(config, batch(count, "pool"), launcher) / count
    print(f"\nPer run, {count} trivial runs one after another (ms)")
    print("| where | per run |")
    print("|---|---:|")
    print(f"| Runtime.run in this process | {in_process * 1000:.1f} |")
    print(f"| warm local:1 pool (submit) | {pooled * 1000:.1f} |")
    print(f"submit's overhead per run in a warm pool: {(pooled - in_process) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--work", type=float, default=1.5, help="CPU seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=40)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; CPUs: {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (folder / "cpu").mkdir()
        (folder / "trivial").mkdir()
        part1(folder, args.runs, args.work, args.rounds)
        part2(folder, args.repeat, args.batch)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
