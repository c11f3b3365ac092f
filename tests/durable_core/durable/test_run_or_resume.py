"""``Runtime.run_or_resume``: start a run, or continue it when it has a record — one call for a
scheduler. Real file stores; bodies log their calls to a side file."""

from __future__ import annotations

import pytest

from durable_core import (
    CancelToken,
    Codecs,
    Graph,
    InputsMismatchError,
    Key,
    NodeFailedError,
    Runtime,
)
from tests.durable_core.durable.scenarios import CallLog, open_store

N = Key("n", int)
DOUBLE = Key("double", int)
TOTAL = Key("total", int)


def make_graph(calls: CallLog, stop: CancelToken) -> Graph:
    graph = Graph("ror", inputs=[N])

    @graph.node("double", requires=[N], provides=[DOUBLE])
    def double(rc):
        calls.write("double")
        rc.set(DOUBLE, rc.get(N) * 2)

    @graph.node("total", requires=[DOUBLE], provides=[TOTAL])
    def total(rc):
        calls.write("total")
        if calls.count("total") == 1:
            stop.cancel()  # as Ctrl-C would: the run stops here and stays resumable
            return
        rc.set(TOTAL, rc.get(DOUBLE) + 1)

    return graph


def test_run_or_resume_starts_then_continues_without_rerunning(tmp_path):
    calls = CallLog(tmp_path / "calls.txt")
    stop = CancelToken()
    graph = make_graph(calls, stop)
    store = open_store("file", tmp_path / "runs")
    runtime = Runtime(store, Codecs.default())
    try:
        first = runtime.run_or_resume(graph, run_id="r", version="1", inputs={N: 20}, cancel=stop)
        assert first.status == "canceled"
        result = runtime.run_or_resume(graph, run_id="r", version="1", inputs={N: 20})
        assert result.status == "completed"
        assert result.result[TOTAL] == 41
        assert calls.count("double") == 1  # restored, not run again
        assert calls.count("total") == 2
        again = runtime.run_or_resume(graph, run_id="r", version="1", inputs={N: 20})
        assert again.status == "completed" and again.restored == 2
        with pytest.raises(InputsMismatchError):  # resume's checks still apply
            runtime.run_or_resume(graph, run_id="r", version="1", inputs={N: 21})
    finally:
        store.close()


def test_a_run_failed_for_good_stays_failed(tmp_path):
    graph = Graph("ff", inputs=[N])

    @graph.node("boom", requires=[N], provides=[TOTAL])
    def boom(rc):
        raise ValueError("boom")

    store = open_store("file", tmp_path / "runs")
    runtime = Runtime(store, Codecs.default())
    try:
        first = runtime.run_or_resume(graph, run_id="f", version="1", inputs={N: 1})
        second = runtime.run_or_resume(graph, run_id="f", version="1", inputs={N: 1})
    finally:
        store.close()
    assert first.status == second.status == "failed"
    assert isinstance(second.error, NodeFailedError)
    assert "failed for good in an earlier process" in str(second.error)
