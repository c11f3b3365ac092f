"""The node totals of ``run``, ``inspect`` and ``list`` agree for a graph with Sub nodes:
``run`` and its progress count the Sub graphs' nodes, and so does ``inspect``'s "in all"."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap

import pytest
from click.testing import CliRunner

from durable_core.cli import cli

_counter = itertools.count()

GRAPH = """
from durable_core import Graph, In, Key, Out, Retry

X, Y, A, B = Key("x", int), Key("y", int), Key("a", int), Key("b", int)
child = Graph("child", inputs=[X])
child.add_node("c1", lambda rc: rc.set(Y, rc.get(X) + 1), requires=[X], provides=[Y])
graph = Graph("parent")
graph.add_node("a", lambda rc: rc.set(A, 1), provides=[A])
graph.sub("s", child, bindings=[In(A, X), Out(Y, B)], aspects=[Retry(2)])
"""


@pytest.fixture(params=["file", "sqlite"])
def config(request, tmp_path, monkeypatch):
    module = f"totals_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    store = (
        '[store]\nbackend = "file"\ndirectory = "runs"\n'
        if request.param == "file"
        else '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    path = tmp_path / "totals.toml"
    path.write_text(f'graph = "{module}:graph"\nrun_id = "{module}"\nversion = "1"\n\n{store}')
    monkeypatch.chdir(tmp_path)
    yield str(path)
    sys.modules.pop(module, None)


def test_run_inspect_and_list_count_the_same_nodes(config):
    runner = CliRunner()
    ran = json.loads(runner.invoke(cli, ["run", config, "--json"]).stdout)
    assert (ran["confirmed"], ran["total_nodes"]) == (3, 3)  # a, s and s/c1
    shown = runner.invoke(cli, ["inspect", config])
    assert "(2 of 2 root nodes confirmed; 3 of 3 nodes in all)" in shown.stdout
    data = json.loads(runner.invoke(cli, ["inspect", config, "--json"]).stdout)
    assert (data["nodes_confirmed"], data["nodes_total"]) == (ran["confirmed"], ran["total_nodes"])
    (row,) = json.loads(runner.invoke(cli, ["list", config, "--json"]).stdout)
    assert (row["root_nodes_confirmed"], row["root_nodes_total"]) == (2, 2)
    assert (row["nodes_confirmed"], row["nodes_total"]) == (3, 3)
