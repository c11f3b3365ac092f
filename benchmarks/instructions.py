"""Instructions the durable layer executes per confirmed node, counted by valgrind.

The same chain as ``durable_cpu.py`` (``_support.chain``: trivial ``async def`` nodes), run by
``Runtime.run`` on a ``MemoryStore`` and by the engine alone (``execute``). Each is run in a
process of its own under ``valgrind --tool=cachegrind --cache-sim=no`` twice, with ``--small``
and ``--large`` nodes; the difference of the two processes' instruction counts over the
difference of their nodes is the count per node (start-up, imports and the warm-up run cancel
out). ``PYTHONHASHSEED=0`` keeps dicts in the same order, so that two invocations agree to about
0.01 %: a change of a few hundred instructions a node shows, where timings of the same runs
swing by several percent between invocations. The durable layer's count is the durable run's
minus the engine's.

With ``--processor`` it counts what one message of ``processor_peers.py``'s ``def-attrs-100``
job costs (SQLite, ``commit_every=100``, a plain ``def`` handler and an attrs state), from jobs
of ``--small`` and ``--large`` messages; that job's commits follow its timing (``max_delay``,
the save thread), which valgrind slows about fifty times, so its count varies by about 1 %
between invocations rather than 0.01 %.

With ``--resume`` it counts, the same way, what resuming a chain killed at its last node
(``_support.killed_chain``, memory store, a graph built anew) costs per restored node, beside
``json.loads`` of the same record: processes that make the killed run and stop, that make it and
resume it, and that make it and parse its record.

It needs ``valgrind`` (``apt-get install valgrind``); a run takes about a minute.

Run it with::

    uv run python benchmarks/instructions.py
    uv run python benchmarks/instructions.py --small 200 --large 2200
    uv run python benchmarks/instructions.py --resume --small 300 --large 1300
    uv run python benchmarks/instructions.py --processor --small 2000 --large 12000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys


def _child(mode: str, nodes: int) -> None:
    """Run once: a warm-up chain of 50 nodes, then the measured one."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _support import chain, killed_chain

    from durable_core import MemoryStore, Runtime, execute

    if mode == "processor":
        import tempfile

        from processor_peers import run_durable

        with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as directory:
            run_durable(200, warm, 100, True)
            run_durable(nodes, directory, 100, True)
        return
    if mode in _RESUME_MODES:
        graph, seed, store, data, _ = killed_chain(nodes, "killed")
        graph, seed = chain(nodes)  # as a new process builds it
        gc.collect()
        if mode == "resume":
            result = Runtime(store).resume(graph, run_id="killed", version="1", inputs={seed: 0})
            assert result.status == "completed", result.error
        elif mode == "json.loads":
            json.loads(data)
        return

    graph, seed = chain(50)
    Runtime(MemoryStore()).run(graph, run_id="warm", version="1", inputs={seed: 0})
    execute(graph, {seed: 0})
    graph, seed = chain(nodes)
    if mode == "durable":
        result = Runtime(MemoryStore()).run(graph, run_id="c", version="1", inputs={seed: 0})
    else:
        result = execute(graph, {seed: 0})
    assert result.status == "completed", result.error


_RESUME_MODES = ("made", "resume", "json.loads")
"""Make the killed run only; and resume it; and parse its record."""


def _count(mode: str, nodes: int) -> int:
    """The instructions of a process running ``mode`` on a chain of ``nodes``."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            mode,
            str(nodes),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="nodes of the smaller chain")
    parser.add_argument("--large", type=int, default=1200, help="nodes of the larger chain")
    parser.add_argument(
        "--resume", action="store_true", help="count a resume of a killed chain instead"
    )
    parser.add_argument(
        "--processor",
        action="store_true",
        help="count a message of the batched processor job instead (--small/--large messages)",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    if args.large <= args.small:
        sys.exit("--large must be more nodes than --small")
    span = args.large - args.small
    if args.processor:
        per_message = (_count("processor", args.large) - _count("processor", args.small)) / span
        print(f"processor jobs of {args.small} and {args.large} messages (def-attrs-100)")
        print(f"instructions per message    {per_message:>10,.0f}")
        return
    if args.resume:
        counts = {
            mode: (_count(mode, args.large) - _count(mode, args.small)) / span
            for mode in _RESUME_MODES
        }
        resume = counts["resume"] - counts["made"]
        parse = counts["json.loads"] - counts["made"]
        print(f"killed chains of {args.small} and {args.large} nodes; instructions per node")
        print(f"Runtime.resume              {resume:>10,.0f}")
        print(f"json.loads of the record    {parse:>10,.0f}")
        print(f"ratio                       {resume / parse:>10.2f}")
        return
    per_node = {
        mode: (_count(mode, args.large) - _count(mode, args.small)) / span
        for mode in ("durable", "engine")
    }
    print(f"chains of {args.small} and {args.large} nodes; instructions per node")
    print(f"durable run (memory store)  {per_node['durable']:>10,.0f}")
    print(f"engine alone                {per_node['engine']:>10,.0f}")
    print(f"durable layer               {per_node['durable'] - per_node['engine']:>10,.0f}")


if __name__ == "__main__":
    main()
