"""A project folder moved after a crash: ``durable resume`` from the new place continues the run.

The run is started by ``durable run`` in a real subprocess and crashes (``os._exit``) inside
its second node; the whole folder (graph module, config, input files and the store, kept in the
folder by a relative ``[store]`` path) is then moved to another parent folder, and
``durable resume`` is run there. ``{ path = … }`` inputs are fingerprinted relative to the
config's folder, so the resume is accepted; the node confirmed before the crash is restored, not
run again, and the resumed node gets the new absolute paths.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

GRAPH = """
import os
import pathlib

from durable_core.graph import Graph, Key

DATA = Key("data", str)
OUT = Key("out", str)
LOADED = Key("loaded", str)
REPORT = Key("report", str)

graph = Graph("moved", inputs=[DATA, OUT])


def called(rc, name):
    with open(pathlib.Path(rc.get(OUT)) / "calls.txt", "a") as f:
        f.write(name + "\\n")


@graph.node("load", requires=[DATA, OUT], provides=[LOADED])
def load(rc):
    called(rc, "load")
    rc.set(LOADED, (pathlib.Path(rc.get(DATA)) / "input.txt").read_text())


@graph.node("report", requires=[LOADED, DATA, OUT], provides=[REPORT])
def report(rc):
    called(rc, "report")
    if (pathlib.Path(rc.get(DATA)) / "crash").exists():
        os._exit(3)  # a crash: nothing after 'load' was saved
    target = pathlib.Path(rc.get(OUT)) / "report.txt"
    target.write_text(rc.get(LOADED).upper())
    rc.set(REPORT, str(target))
"""

STORES = {
    "file": 'backend = "file"\ndirectory = ".durable/runs"',
    "sqlite": 'backend = "sqlite"\npath = ".durable/runs.sqlite"',
}


def durable(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_core", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_moved_project_resumes_without_running_confirmed_nodes_again(tmp_path, store):
    # covers: R-REC-3
    first = tmp_path / "home" / "project"
    (first / "data").mkdir(parents=True)
    (first / "out").mkdir()
    (first / "data" / "input.txt").write_text("hello")
    (first / "data" / "crash").write_text("")
    (first / "moved_graph.py").write_text(textwrap.dedent(GRAPH))
    (first / "run.toml").write_text(
        'graph = "moved_graph:graph"\nrun_id = "move-1"\nversion = "1"\n\n'
        '[inputs]\ndata = { path = "data" }\nout = { path = "out" }\n\n'
        f"[store]\n{STORES[store]}\n"
    )
    crashed = durable("run", "run.toml", cwd=first)
    assert crashed.returncode == 3, crashed.stderr
    assert (first / "out" / "calls.txt").read_text().split() == ["load", "report"]

    second = tmp_path / "elsewhere" / "clone"
    second.parent.mkdir()
    shutil.move(first, second)  # the old absolute paths exist no more
    (second / "data" / "crash").unlink()
    resumed = durable("resume", str(second / "run.toml"), "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "completed"
    assert summary["restored"] == 1
    assert summary["outputs"] == {"report": str(second / "out" / "report.txt")}
    assert (second / "out" / "calls.txt").read_text().split() == ["load", "report", "report"]
    assert (second / "out" / "report.txt").read_text() == "HELLO"
