"""Fixtures of the launcher tests: a small graph module and its config in a temporary folder,
with a real SQLite (or file) store.

The graph (``first`` → ``second``) appends ``<tag> <node>`` to ``calls.txt`` for every body
that runs, so a test counts executions across processes. ``first`` waits while the file
``hold`` (or ``hold-<tag>``) exists, and SIGKILLs its own process once when the file
``kill-<tag>`` exists (it removes the file first: the next launch goes on). It writes ``+<tag>``
when it starts and ``-<tag>`` when it ends to ``spans.txt`` (which runs ran at once).
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sys
import textwrap
from collections import Counter

import attrs
import pytest

_counter = itertools.count()

GRAPH = """
import os
import pathlib
import signal
import time

from durable_core.graph import Graph, Key

N = Key("n", int)
TAG = Key("tag", str)
CALLS = Key("calls", str)
FIRST = Key("first", int)
OUT = Key("out", int)

graph = Graph("fleet_probe", inputs=[N, TAG, CALLS])


def called(rc, name):
    fd = os.open(rc.get(CALLS), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{rc.get(TAG)} {name}\\n".encode())
    finally:
        os.close(fd)


@graph.node("first", requires=[N, TAG, CALLS], provides=[FIRST])
def first(rc):
    folder = pathlib.Path(rc.get(CALLS)).parent
    kill = folder / f"kill-{rc.get(TAG)}"
    if kill.exists():
        kill.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 60
    with open(folder / "spans.txt", "a") as spans:
        spans.write(f"+{rc.get(TAG)} ")
    holds = [folder / "hold", folder / f"hold-{rc.get(TAG)}"]
    while any(h.exists() for h in holds) and time.monotonic() < deadline and not rc.canceled:
        time.sleep(0.02)
    time.sleep(0.1)
    with open(folder / "spans.txt", "a") as spans:
        spans.write(f"-{rc.get(TAG)} ")
    called(rc, "first")
    rc.set(FIRST, rc.get(N) * 10)


@graph.node("second", requires=[FIRST, TAG, CALLS], provides=[OUT])
def second(rc):
    called(rc, "second")
    rc.set(OUT, rc.get(FIRST) + 1)
"""


@attrs.define
class Fleet:
    """One project: the graph module, a config and a runs file."""

    folder: pathlib.Path
    config: str
    store_url: str

    def runs_file(self, count: int, name: str = "runs.jsonl", start: int = 0) -> str:
        path = self.folder / name
        lines = [
            json.dumps({"run_id": f"r{i:02d}", "inputs": {"n": i, "tag": f"r{i:02d}"}})
            for i in range(start, start + count)
        ]
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    def calls(self) -> Counter[str]:
        path = self.folder / "calls.txt"
        lines = path.read_text().splitlines() if path.exists() else []
        return Counter(lines)

    def spans(self) -> list[str]:
        path = self.folder / "spans.txt"
        return path.read_text().split() if path.exists() else []

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.folder), *sys.path])
        return env


@pytest.fixture
def fleet(tmp_path: pathlib.Path) -> Fleet:
    module = f"fleet_probe_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(GRAPH)
    config = tmp_path / "fleet.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            graph = "{module}:graph"
            run_id = "single"
            version = "1"

            [inputs]
            n = 4
            tag = "single"
            calls = {{ path = "calls.txt" }}

            [store]
            backend = "sqlite"
            path = "runs.sqlite"
            """
        )
    )
    return Fleet(tmp_path, str(config), f"sqlite:{tmp_path / 'runs.sqlite'}")
