"""``fork_run`` / ``create_fork``: the Python API of ``durable fork`` (real file stores)."""

from __future__ import annotations

import pytest

from durable_core import Codecs, ConfigError, Graph, Key, Runtime
from durable_core.durable import create_fork, fork_run
from tests.durable_core.durable.scenarios import CallLog, load, open_store

N = Key("n", int)
A = Key("a", int)
B = Key("b", int)
C = Key("c", int)


def make_graph(calls: CallLog, broken: list[bool]) -> Graph:
    graph = Graph("fk", inputs=[N])

    @graph.node("a", requires=[N], provides=[A])
    def a(rc):
        calls.write("a")
        rc.set(A, rc.get(N) + 1)

    @graph.node("b", requires=[A], provides=[B])
    def b(rc):
        calls.write("b")
        if broken[0]:
            raise RuntimeError("b is broken")
        rc.set(B, rc.get(A) * 2)

    @graph.node("c", requires=[N], provides=[C])
    def c(rc):
        calls.write("c")
        rc.set(C, rc.get(N) * 3)

    return graph


def test_fork_run_copies_valid_nodes_and_runs_the_rest(tmp_path):
    calls = CallLog(tmp_path / "calls.txt")
    broken = [True]
    graph = make_graph(calls, broken)
    store = open_store("file", tmp_path / "runs")
    runtime = Runtime(store, Codecs.default())
    try:
        failed = runtime.run(graph, run_id="old", version="1", inputs={N: 1})
        assert failed.status == "failed"
        old_bytes = load(store, "old")
        broken[0] = False
        result = fork_run(
            runtime, graph, run_id="old", new_run_id="new", version="1", inputs={N: 1}
        )
        assert result.status == "completed"
        assert result.result[B] == 4
        assert sorted(calls.calls()) == ["a", "b", "b", "c"]
        assert load(store, "old") == old_bytes  # never rewritten
        plan = create_fork(
            runtime,
            graph,
            run_id="new",
            new_run_id="newer",
            version="2",
            inputs={N: 1},
            rerun=["a"],
        )
        assert plan.copied == ("c",) and plan.rerun == ("a", "b")
        newer = load(store, "newer")
        assert newer.version == "2" and newer.revision == 1
        assert set(newer.scopes[newer.root_scope].nodes) == {"c"}
        with pytest.raises(ConfigError):
            create_fork(runtime, graph, run_id="new", new_run_id="new", version="1", inputs={N: 1})
    finally:
        store.close()
