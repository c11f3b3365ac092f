"""How long the ``durable`` command takes to answer ``--help``, ``--version`` and the
reading commands ``list``, ``inspect`` and ``log`` of a small file store.

Runs each command as a whole new process (the installed ``durable`` script of this
environment), one warm-up run then ``--repeat`` counted runs, and prints the median, minimum
and maximum wall time. Beside them, the bare interpreter (``python -c pass``) for reference:
what no command can go below. Target: under 0.3 s for each. Every installed plugin is found as
usual; a store or codec plugin's dependencies (psycopg, numpy) are not imported by a command
that does not use them. Python writes no bytecode cache when ``PYTHONDONTWRITEBYTECODE`` is set,
and every start then compiles the sources again: unset it to measure what users see.

Run it with::

    uv run python benchmarks/startup.py
    uv run python benchmarks/startup.py --repeat 20
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import median

TARGET = 0.3


def timed(command: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="counted runs per command")
    args = parser.parse_args()

    script = Path(sys.executable).with_name("durable")
    durable = str(script) if script.exists() else shutil.which("durable")
    if durable is None:
        parser.error("no 'durable' command in this environment: run it with 'uv run'")
    store = f"file://{_small_store(tempfile.mkdtemp(prefix='durable-startup-'))}"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "durable --help": [durable, "--help"],
        "durable --version": [durable, "--version"],
        "durable list": [durable, "list", "--store", store],
        "durable inspect": [durable, "inspect", "--store", store, "startup-1"],
        "durable log": [durable, "log", "--store", store, "startup-1"],
    }
    print(f"wall seconds of a whole process; median of {args.repeat} runs after one warm-up")
    print(f"{'command':<20}{'median':>9}{'min':>9}{'max':>9}  exit")
    verdicts = []
    for name, command in commands.items():
        timed(command)
        runs = [timed(command) for _ in range(args.repeat)]
        walls = [wall for wall, _ in runs]
        codes = sorted({code for _, code in runs})
        mid = median(walls)
        print(
            f"{name:<20}{mid:>8.3f}s{min(walls):>8.3f}s{max(walls):>8.3f}s  "
            f"{','.join(map(str, codes))}"
        )
        if name.startswith("durable"):
            failed = codes != [0]
            verdicts.append(
                f"{name}: {mid:.3f} s (target < {TARGET} s) "
                f"{'FAILED (exit ' + ','.join(map(str, codes)) + ')' if failed else ''}"
                f"{'' if failed else 'met' if mid < TARGET else 'NOT met'}"
            )
    print()
    for verdict in verdicts:
        print(verdict)


def _small_store(folder: str) -> str:
    """A file store holding one completed run ``startup-1`` of a one-node graph."""
    from durable_core import Graph, Key, Runtime, make_plugin_manager
    from durable_filestore import FileStore

    out = Key("out", int)
    graph = Graph("startup")
    graph.add_node("one", lambda rc: rc.set(out, 1), provides=[out])
    store = FileStore(folder)
    try:
        runtime = Runtime(store, plugins=make_plugin_manager())  # its run log too
        runtime.run(graph, run_id="startup-1", version="1", inputs={})
    finally:
        store.close()
    return folder


if __name__ == "__main__":
    main()
