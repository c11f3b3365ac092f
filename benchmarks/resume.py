"""Resuming a large run killed at its last node, against parsing its record with ``json.loads``.

Two runs of a chain of trivial nodes (default 10,000), each made once (untimed):

- **killed** (the target's case, memory store only): the record as a process killed at the
  last node's body leaves it, ``count - 1`` nodes confirmed and the last one not
  (``_support.killed_chain``). Each timed ``Runtime.resume`` loads, decodes and checks that
  record, restores ``count - 1`` nodes, runs the last one and saves it and the run's end; the
  record is put back as the kill left it before the next round (untimed).
- **finished**: the run to completion; every node is confirmed, so no body runs and what is
  timed is loading, decoding and checking the record, restoring every node and finishing.

Beside each, ``json.loads`` of that record's bytes (the same canonical JSON the store holds),
right after each resume. Each resume is given a graph built anew (untimed), as a new process
would build it (``--same-graph``: the graph object that made the run, whose fingerprint is
already worked out). It prints both, medians of ``--repeat`` runs, the median of their ratios
run by run, and the CPU time of the process (``time.process_time``) for each, less disturbed
than wall time by other work on the machine. Target: at most 4 for the killed run. Before each
timed step the cyclic garbage collector runs once, untimed: each step then pays for the
collections its own allocations cause, not for those the step before it left pending (a full
collection of the whole heap would otherwise fall on whichever step comes next).

Run it with::

    uv run python benchmarks/resume.py                    # 10,000 nodes on the memory store
    uv run python benchmarks/resume.py --runs finished --nodes 2000 --store sqlite --repeat 5

The memory store keeps records as bytes and decodes them on every load, so it measures the
runtime without disk reads; ``--store file|sqlite|postgres`` adds the store's read (finished
run only). Making a record runs the whole chain once.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import tempfile
import time
from typing import Any

from _support import STORES, chain, killed_chain, make_store, median, ms, postgres

from durable_core import Runtime, record_to_json

TARGET = 4.0
RUNS = ("killed", "finished")


def measure(
    graph: Any,
    seed: Any,
    runtime: Runtime,
    run_id: str,
    data: bytes,
    repeat: int,
    restored: int,
    rewind: Any = None,
    fresh: bool = True,
) -> dict[str, list[float]]:
    """Time ``repeat`` resumes of ``run_id`` and as many ``json.loads(data)``, alternately.

    With ``fresh``, each resume is given a graph built anew (untimed), as a new process
    builds it: what Durable works out of a graph once (its fingerprint) is then timed."""
    out: dict[str, list[float]] = {"resume": [], "parse": [], "resume_cpu": [], "parse_cpu": []}
    nodes = len(graph.nodes)
    for _ in range(repeat):
        if rewind is not None:
            rewind()
        if fresh:
            graph, seed = chain(nodes)
        gc.collect()  # each side starts from a clean heap and pays its own collections
        cpu, started = time.process_time(), time.perf_counter()
        result = runtime.resume(graph, run_id=run_id, version="1", inputs={seed: 0})
        out["resume"].append(time.perf_counter() - started)
        out["resume_cpu"].append(time.process_time() - cpu)
        assert result.status == "completed", result.error
        assert result.restored == restored, result.restored
        del result
        gc.collect()
        cpu, started = time.process_time(), time.perf_counter()
        json.loads(data)
        out["parse"].append(time.perf_counter() - started)
        out["parse_cpu"].append(time.process_time() - cpu)
    return out


def report(
    kind: str, nodes: int, store: str, data: bytes, made: float, out: dict
) -> tuple[float, float]:
    resume, parse = median(out["resume"]), median(out["parse"])
    ratio = median([r / p for r, p in zip(out["resume"], out["parse"], strict=True)])
    cpu = median([r / p for r, p in zip(out["resume_cpu"], out["parse_cpu"], strict=True)])
    print(f"{nodes}-node {kind} run on the {store} store; record {len(data):,} bytes")
    print(f"(making it took {made:.1f} s); medians of {len(out['resume'])} runs")
    print(
        f"  {'Runtime.resume':<16}{ms(resume):>12}   (min {ms(min(out['resume']))}, "
        f"max {ms(max(out['resume']))}); CPU {ms(median(out['resume_cpu']))}"
    )
    print(
        f"  {'json.loads':<16}{ms(parse):>12}   (min {ms(min(out['parse']))}, "
        f"max {ms(max(out['parse']))}); CPU {ms(median(out['parse_cpu']))}"
    )
    print(f"  {'ratio':<16}{ratio:>12.2f}   (CPU time: {cpu:.2f})")
    return ratio, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the chain")
    parser.add_argument("--store", choices=STORES, default="memory")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument(
        "--same-graph",
        action="store_true",
        help="resume with the graph object that made the run (default: a new one each time)",
    )
    args = parser.parse_args()
    if "killed" in args.runs and args.store != "memory":
        parser.error("the killed run is made on the memory store; use --runs finished")

    print("load average (1, 5, 15 min): " + " / ".join(f"{x:.1f}" for x in os.getloadavg()))
    verdict = None
    if "killed" in args.runs:
        run_id = f"killed-{time.time_ns()}"
        started = time.perf_counter()
        graph, seed, store, data, rewind = killed_chain(args.nodes, run_id)
        made = time.perf_counter() - started
        out = measure(
            graph,
            seed,
            Runtime(store),
            run_id,
            data,
            args.repeat,
            args.nodes - 1,
            rewind,
            fresh=not args.same_graph,
        )
        verdict = report("killed-at-its-last-node", args.nodes, "memory", data, made, out)

    if "finished" in args.runs:
        graph, seed = chain(args.nodes)
        with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
            dsn = stack.enter_context(postgres()) if args.store == "postgres" else None
            store = make_store(args.store, base, dsn)
            stack.callback(store.close)
            runtime = Runtime(store)
            run_id = f"resume-{time.time_ns()}"
            started = time.perf_counter()
            first = runtime.run(graph, run_id=run_id, version="1", inputs={seed: 0})
            made = time.perf_counter() - started
            assert first.status == "completed", first.error
            with store.acquire(run_id) as session:
                data = record_to_json(session.load())
            out = measure(
                graph,
                seed,
                runtime,
                run_id,
                data,
                args.repeat,
                args.nodes,
                fresh=not args.same_graph,
            )
        report("finished", args.nodes, args.store, data, made, out)

    if verdict is not None:
        wall, cpu = verdict
        print(
            f"resume of the killed run: {wall:.2f}x json.loads, CPU time {cpu:.2f}x "
            f"(target <= {TARGET:.0f}x) {'met' if max(wall, cpu) <= TARGET else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
