"""Where ``Runtime.resume`` of a large run spends its time, step by step.

The same runs as ``resume.py`` (a chain of trivial nodes on the memory store): by default the
run killed at its last node (``--run killed``: every node but the last confirmed; each resume
restores them, runs the last one and saves), or the finished one (``--run finished``: every
node confirmed), resumed ``--repeat`` times. Each step of the resume is timed where it is
called, in CPU seconds of the whole process (``time.process_time``: less disturbed by other
work on a shared machine than wall time): reading the stored bytes, decoding them into a
record, the checks of the record (``validate_fresh``: ``validate_record`` less the shape
check the quick reader made as it read), decoding every confirmed value
(``decode_confirmed``), the stream plan, the saves (``Ledger._save``: encoding the change and
the store's write), the definition's fingerprint (each resume is given a graph built anew, as a
new process builds it; ``--same-graph`` keeps the one that made the run); what is left is
restoring every node in the engine and the checkpointer and finishing. The time the cyclic
garbage collector took during the resume is shown beside them (it happens inside the steps; as
in ``resume.py``, it runs once, untimed, before each timed step). Each figure is a median, in
milliseconds and as a multiple of ``json.loads`` of the record's bytes measured right after
each resume.

Run it with::

    uv run python benchmarks/resume_breakdown.py                 # killed, 10,000 nodes, 7 runs
    uv run python benchmarks/resume_breakdown.py --run finished --nodes 2000 --repeat 5

It wraps a few functions of the runtime to time them, so the total runs a little slower than
``resume.py`` measures; use ``resume.py`` for the ratio itself.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from _support import chain, killed_chain, median

import durable_core.durable.ledger as ledger_module
import durable_core.durable.resume as resume_module
import durable_core.durable.runtime as runtime_module
import durable_core.graph.definition as definition_module
import durable_core.store.kit as kit_module
import durable_core.store.memory as memory_module
from durable_core import MemoryStore, Runtime, record_to_json

clock = time.process_time
STEPS = {
    "read": "read the stored bytes",
    "decode": "decode them into a record",
    "validate": "validate_fresh",
    "values": "decode_confirmed (every value)",
    "streams": "plan_streams",
    "preflight": "checks before the store",
    "saves": "saves (encode the change, write)",
    "fingerprint": "the definition's fingerprint",
}


def _timed(owner: Any, name: str, step: str, spent: dict[str, float]) -> None:
    """Replace ``owner.name`` by a wrapper adding its CPU time to ``spent[step]``."""
    inner: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[step] += clock() - started

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the chain")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs (medians)")
    parser.add_argument("--run", choices=("killed", "finished"), default="killed")
    parser.add_argument(
        "--same-graph",
        action="store_true",
        help="resume with the graph object that made the run (default: a new one each time)",
    )
    args = parser.parse_args()

    spent: dict[str, float] = defaultdict(float)
    _timed(memory_module.MemorySession, "_read", "read", spent)
    _timed(kit_module, "decode_stored", "decode", spent)
    _timed(resume_module, "validate_fresh", "validate", spent)
    _timed(resume_module, "decode_confirmed", "values", spent)
    _timed(resume_module, "plan_streams", "streams", spent)
    _timed(runtime_module, "preflight", "preflight", spent)
    _timed(ledger_module.Ledger, "_save", "saves", spent)
    _timed(definition_module.Graph, "fingerprint", "fingerprint", spent)
    collecting = {"since": 0.0, "total": 0.0}

    def on_collect(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting["since"] = clock()
        else:
            collecting["total"] += clock() - collecting["since"]

    run_id = "breakdown"
    rewind: Callable[[], None] | None = None
    if args.run == "killed":
        graph, seed, store, data, rewind = killed_chain(args.nodes, run_id)
        runtime = Runtime(store)
    else:
        graph, seed = chain(args.nodes)
        store = MemoryStore()
        runtime = Runtime(store)
        first = runtime.run(graph, run_id=run_id, version="1", inputs={seed: 0})
        assert first.status == "completed", first.error
        with store.acquire(run_id) as session:
            data = record_to_json(session.load())
    restored = args.nodes - 1 if rewind is not None else args.nodes

    gc.callbacks.append(on_collect)
    totals: list[float] = []
    parses: list[float] = []
    steps: dict[str, list[float]] = defaultdict(list)
    for _ in range(args.repeat):
        if rewind is not None:
            rewind()
        if not args.same_graph:  # as a new process: the graph built anew (untimed)
            graph, seed = chain(args.nodes)
        gc.collect()  # as in resume.py: each step pays only for its own collections
        spent.clear()
        collecting["total"] = 0.0
        started = clock()
        result = runtime.resume(graph, run_id=run_id, version="1", inputs={seed: 0})
        totals.append(clock() - started)
        assert result.status == "completed" and result.restored == restored
        for step in STEPS:
            steps[step].append(spent[step])
        steps["gc"].append(collecting["total"])
        del result
        gc.collect()
        started = clock()
        json.loads(data)
        parses.append(clock() - started)
    gc.callbacks.remove(on_collect)

    parse, total = median(parses), median(totals)
    print(f"{args.nodes}-node {args.run} run, memory store; record {len(data):,} bytes")
    print("load average (1, 5, 15 min): " + " / ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"CPU medians of {args.repeat} runs; x = multiple of json.loads ({parse * 1e3:.1f} ms)")
    print(f"{'Runtime.resume':<44}{total * 1e3:>9.1f} ms {total / parse:>6.2f}x")
    named = 0.0
    for step, label in STEPS.items():
        value = median(steps[step])
        named += value
        print(f"  {label:<42}{value * 1e3:>9.1f} ms {value / parse:>6.2f}x")
    rest = total - named
    print(
        f"  {'the rest: restore every node, finish':<42}{rest * 1e3:>9.1f} ms {rest / parse:>6.2f}x"
    )
    collected = median(steps["gc"])
    print(
        f"  {'(garbage collector, inside the above)':<42}{collected * 1e3:>9.1f} ms "
        f"{collected / parse:>6.2f}x"
    )


if __name__ == "__main__":
    main()
