"""Resuming a run killed at its last step: Durable against DBOS and LangGraph, on SQLite.

The job is ``peers.py``'s pipeline of 10,000 steps (``--steps``), each adding one to the value
the step before it produced, and each saved before the next starts. For every contender a
process runs it on a fresh SQLite file and ends itself (``os._exit``) in the body of the last
step, so that every step but the last is saved and the last one is not; the files it leaves
are kept. Then, round after round (``--repeat``), the kept files are copied and a new process
takes the run back to its end the contender's own way, and that is timed (imports, schema
setup and building the pipeline excluded):

- ``durable``: ``Runtime.resume`` of the chain graph on ``SQLiteStore``: it loads and checks
  the record, restores the 9,999 confirmed nodes from it and runs the last one. Beside it, in
  the same process, ``json.loads`` of the record's bytes (read after the resume: the finished
  record, one node more than the killed one), after a full collection of what the process
  holds: otherwise a full collection the resume's objects have made due falls inside it.
- ``dbos``: ``DBOS.launch()`` recovers the pending workflow by running it again from the
  start: each of the 9,999 recorded steps returns its recorded output (one read of the system
  database each), and the last step runs. Timed from ``launch()`` to the workflow's result
  (polled every 2 ms); ``launch()`` itself (which starts the recovery in a thread and returns)
  and the moment the workflow's status records its end (``updated_at``, ms) beside it.
- ``langgraph``: ``invoke(None, config)`` of the compiled ``StateGraph`` with ``SqliteSaver``
  and the same ``thread_id``: it loads the thread's last checkpoint, which holds the state's
  channels' last values (here one int), and runs the one step left.

It prints, per contender, the median wall time and CPU time of the process, the time of each
peer against Durable's (the ratio of each round, then their median), and Durable's time against
``json.loads`` of its record. Targets: Durable faster than DBOS; against LangGraph, a ratio to
report (LangGraph's checkpoint holds the channels' last values, a Durable record holds every
confirmed node's outputs, so its size grows with the steps).

Needs the peers: ``uv sync --group peers``. Run it with::

    uv run --group peers python benchmarks/resume_peers.py
    uv run --group peers python benchmarks/resume_peers.py --steps 2000 --repeat 5
"""

from __future__ import annotations

import argparse
import gc
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

from _support import chain, median

SYSTEMS = ("durable", "dbos", "langgraph")
KILL_ENV = "DURABLE_BENCH_KILL_AT_LAST"
KILLED = 3
"""The exit status of a process that ended itself at the last step."""
RUN_ID = "resume-peers"


def _kill_here(value: int, steps: int) -> None:
    """End the process when the step about to run is the last one and the kill is asked for."""
    if value == steps - 1 and os.environ.get(KILL_ENV):
        sys.stdout.flush()
        os._exit(KILLED)


# -- one contender, in its own process -----------------------------------------------------------


def durable(phase: str, steps: int, directory: str) -> dict[str, float]:
    from durable_core import Runtime, record_to_json
    from durable_sqlitestore import SQLiteStore

    graph, seed = chain(steps, hook=lambda index: _kill_here(index, steps))
    store = SQLiteStore(os.path.join(directory, "runs.sqlite"))
    try:
        runtime = Runtime(store)
        if phase == "make":
            runtime.run(graph, run_id=RUN_ID, version="1", inputs={seed: 0})
            raise SystemExit("the run was not killed at its last node")
        cpu, started = time.process_time(), time.perf_counter()
        result = runtime.resume(graph, run_id=RUN_ID, version="1", inputs={seed: 0})
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert result.status == "completed", result.error
        assert result.restored == steps - 1, result.restored
        with store.acquire(RUN_ID) as session:
            data = record_to_json(session.load())
    finally:
        store.close()
    gc.collect()  # not inside the measured parse (see the module's docstring)
    parse, parse_cpu = time.perf_counter(), time.process_time()
    json.loads(data)
    parse, parse_cpu = time.perf_counter() - parse, time.process_time() - parse_cpu
    return {"seconds": seconds, "cpu": cpu, "parse": parse, "parse_cpu": parse_cpu}


def dbos(phase: str, steps: int, directory: str) -> dict[str, float]:
    from dbos import DBOS, SetWorkflowID

    url = f"sqlite:///{os.path.join(directory, 'dbos.sqlite')}"
    DBOS(config={"name": "durable-resume-peers", "system_database_url": url, "log_level": "ERROR"})

    @DBOS.step()
    def step(value: int) -> int:
        _kill_here(value, steps)
        return value + 1

    @DBOS.workflow()
    def pipeline(count: int) -> int:
        value = 0
        for _ in range(count):
            value = step(value)
        return value

    try:
        if phase == "make":
            DBOS.launch()
            with SetWorkflowID(RUN_ID):
                pipeline(steps)
            raise SystemExit("the workflow was not killed at its last step")
        cpu, started, epoch = time.process_time(), time.perf_counter(), time.time()
        DBOS.launch()  # finds the pending workflow and recovers it in a thread
        launched = time.perf_counter() - started
        # Polled every 2 ms (DBOS's default is 1 s); the finish is also read from the record.
        out = DBOS.retrieve_workflow(RUN_ID).get_result(polling_interval_sec=0.002)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        status = DBOS.get_workflow_status(RUN_ID)
    finally:
        DBOS.destroy()
    assert out == steps, out
    assert status is not None and status.updated_at is not None
    recorded = status.updated_at / 1e3 - epoch
    return {"seconds": seconds, "cpu": cpu, "launch": launched, "recorded": recorded}


def langgraph(phase: str, steps: int, directory: str) -> dict[str, float]:
    import sqlite3
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        value: int

    def step(state: State) -> dict[str, int]:
        _kill_here(state["value"], steps)
        return {"value": state["value"] + 1}

    builder = StateGraph(State)
    names = [f"n{i}" for i in range(steps)]
    for name in names:
        builder.add_node(name, step)
    builder.add_edge(START, names[0])
    for before, after in itertools.pairwise(names):
        builder.add_edge(before, after)
    builder.add_edge(names[-1], END)
    config: Any = {"configurable": {"thread_id": RUN_ID}, "recursion_limit": steps + 10}
    conn = sqlite3.connect(os.path.join(directory, "langgraph.sqlite"), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        if phase == "make":
            graph.invoke({"value": 0}, config, durability="sync")
            raise SystemExit("the thread was not killed at its last step")
        cpu, started = time.process_time(), time.perf_counter()
        out = graph.invoke(None, config, durability="sync")  # from the last checkpoint
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        conn.close()
    assert out["value"] == steps, out
    return {"seconds": seconds, "cpu": cpu}


RUNNERS: dict[str, Callable[[str, int, str], dict[str, float]]] = {
    "durable": durable,
    "dbos": dbos,
    "langgraph": langgraph,
}


# -- the comparison ------------------------------------------------------------------------------


def child(system: str, phase: str, steps: int, directory: str) -> dict[str, float]:
    """Run ``phase`` of ``system`` in a fresh process; what it measured (nothing for make)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one", system, phase]
    command += ["--steps", str(steps), "--dir", directory]
    env = dict(os.environ)
    if phase == "make":
        env[KILL_ENV] = "1"
    else:
        env.pop(KILL_ENV, None)
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if phase == "make":
        if done.returncode != KILLED:
            raise SystemExit(
                f"{system}: making the killed run ended with {done.returncode}, not {KILLED}:\n"
                f"{done.stderr[-3000:]}"
            )
        return {}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{system} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="steps in the pipeline")
    parser.add_argument("--repeat", type=int, default=3, help="timed resumes per contender")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        system, phase = args.one
        print(json.dumps(RUNNERS[system](phase, args.steps, args.dir)))
        return

    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.steps}-step pipeline killed at its last step, on SQLite; load average {load}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in args.systems}
    with tempfile.TemporaryDirectory(dir=args.dir) as base:
        kept = {}
        for name in args.systems:
            kept[name] = os.path.join(base, f"{name}-killed")
            os.mkdir(kept[name])
            started = time.perf_counter()
            child(name, "make", args.steps, kept[name])
            print(f"  {name}: made the killed run in {time.perf_counter() - started:.1f} s")
        for round_ in range(args.repeat):
            for name in args.systems:
                work = os.path.join(base, f"{name}-{round_}")
                shutil.copytree(kept[name], work)
                results[name].append(child(name, "resume", args.steps, work))
                shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    print(f"{'contender':<12}{'resume ms':>11}{'min':>9}{'max':>9}{'CPU ms':>9}  peer/durable")
    for name in args.systems:
        seconds = [r["seconds"] for r in results[name]]
        line = (
            f"{name:<12}{median(seconds) * 1e3:>11.1f}{min(seconds) * 1e3:>9.1f}"
            f"{max(seconds) * 1e3:>9.1f}{median([r['cpu'] for r in results[name]]) * 1e3:>9.1f}"
        )
        if name != "durable" and "durable" in results:
            ratio = median(
                [
                    p["seconds"] / d["seconds"]
                    for p, d in zip(results[name], results["durable"], strict=True)
                ]
            )
            line += f"  {ratio:.2f}"
        if name == "dbos":
            launch = median([r["launch"] for r in results[name]]) * 1e3
            recorded = median([r["recorded"] for r in results[name]]) * 1e3
            line += f"   (launch() {launch:.1f} ms; finish recorded at {recorded:.0f} ms)"
        print(line)
    if "durable" in results:
        own = results["durable"]
        wall = median([r["seconds"] / r["parse"] for r in own])
        cpu = median([r["cpu"] / r["parse_cpu"] for r in own])
        print()
        print(
            f"durable resume / json.loads of its record: {wall:.2f}x wall, {cpu:.2f}x CPU "
            f"(json.loads {median([r['parse'] for r in own]) * 1e3:.1f} ms)"
        )
        if "dbos" in results:
            faster = median(
                [p["seconds"] / d["seconds"] for p, d in zip(results["dbos"], own, strict=True)]
            )
            print(
                f"durable vs dbos recovery: {faster:.2f}x (target: faster) "
                f"{'met' if faster > 1 else 'NOT met'}"
            )


if __name__ == "__main__":
    main()
