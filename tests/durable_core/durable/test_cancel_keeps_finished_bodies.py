"""A run canceled from outside (Ctrl-C, a CancelToken) keeps the work of the plain bodies that
were running: they cannot be interrupted, so the run waits for them, and what they return is
confirmed instead of dropped. Nothing else starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_core import CancelToken, Graph, Key, Retry, Runtime, Timeout
from tests.durable_core.durable.scenarios import load, open_store

SEED = Key("seed", int)
SLOW = Key("slow", int)
LATER = Key("later", int)


def graph_for(calls: list[str], token: CancelToken, function_form: bool) -> Graph:
    graph = Graph("keeps", inputs=[SEED])

    if function_form:

        @graph.node("slow", requires=[SEED], provides=[SLOW], aspects=[Retry(2)], executor="local")
        def slow(seed: int) -> int:
            calls.append("slow")
            if calls.count("slow") == 1:
                token.cancel()  # Ctrl-C while this body runs
            return seed * 10

    else:

        @graph.node("slow", requires=[SEED], provides=[SLOW], aspects=[Retry(2)])
        def slow_rc(rc):
            calls.append("slow")
            if calls.count("slow") == 1:
                token.cancel()  # Ctrl-C while this body runs
            rc.set(SLOW, rc.get(SEED) * 10)

    @graph.node("later", requires=[SLOW], provides=[LATER])
    def later(rc):
        calls.append("later")
        rc.set(LATER, rc.get(SLOW) + 1)

    return graph


@pytest.mark.parametrize("kind", ["file", "sqlite"])
@pytest.mark.parametrize("function_form", [False, True], ids=["rc-form", "function-form"])
def test_a_body_that_returns_after_the_cancel_is_confirmed_and_not_run_again(
    kind: str, function_form: bool, tmp_path: Path
) -> None:
    # covers: G-6, R-RT-1
    calls: list[str] = []
    token = CancelToken()
    store = open_store(kind, tmp_path / "store")
    graph = graph_for(calls, token, function_form)
    first = Runtime(store).run(graph, run_id="r", version="1", inputs={SEED: 4}, cancel=token)
    assert first.status == "canceled"
    assert calls == ["slow"]  # 'later' never started
    record = load(store, "r")
    assert "slow" in record.scopes[record.root_scope].nodes  # its work was kept
    again = Runtime(store).resume(graph, run_id="r", version="1", inputs={SEED: 4})
    assert again.status == "completed" and again[LATER] == 41
    assert calls == ["slow", "later"]  # 'slow' did not run again
    store.close()


def test_a_timeout_still_drops_what_a_late_body_returns(tmp_path: Path) -> None:
    # covers: G-6
    import threading

    from durable_core import Observer

    release = threading.Event()
    graph = Graph("late", inputs=[SEED])

    @graph.node("late", requires=[SEED], provides=[SLOW], aspects=[Timeout(0.05)])
    def late(rc):
        release.wait(60)  # returns only once the run has given up on it
        rc.set(SLOW, 1)

    class ReleaseWhenGivenUp(Observer):
        def node_finished(self, event):
            if event.path == "late":
                release.set()

    store = open_store("sqlite", tmp_path / "store")
    runtime = Runtime(store, graph_observers=[ReleaseWhenGivenUp()])
    result = runtime.run(graph, run_id="t", version="1", inputs={SEED: 1})
    assert result.status == "failed" and release.is_set()
    record = load(store, "t")
    assert "late" not in record.scopes[record.root_scope].nodes
    store.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_body_that_sees_the_cancel_and_stops_early_is_not_confirmed(
    kind: str, tmp_path: Path
) -> None:
    # covers: G-6
    calls: list[str] = []
    token = CancelToken()
    graph = Graph("stops", inputs=[SEED])

    @graph.node("spin", requires=[SEED], provides=[SLOW])
    def spin(rc):
        calls.append("spin")
        if calls.count("spin") == 1:
            token.cancel()
            while not rc.canceled:  # stops early: its work must not be kept
                pass
            return
        rc.set(SLOW, 7)

    store = open_store(kind, tmp_path / "store")
    first = Runtime(store).run(graph, run_id="s", version="1", inputs={SEED: 1}, cancel=token)
    assert first.status == "canceled"
    record = load(store, "s")
    assert "spin" not in record.scopes[record.root_scope].nodes
    again = Runtime(store).resume(graph, run_id="s", version="1", inputs={SEED: 1})
    assert again.status == "completed" and again[SLOW] == 7 and calls == ["spin", "spin"]
    store.close()


def test_a_body_that_returns_with_an_output_unset_after_the_cancel_is_not_confirmed(
    tmp_path: Path,
) -> None:
    # covers: G-6
    calls: list[str] = []
    token = CancelToken()
    graph = Graph("unset", inputs=[SEED])

    @graph.node("half", requires=[SEED], provides=[SLOW, LATER])
    def half(rc):
        calls.append("half")
        if calls.count("half") == 1:
            token.cancel()
            rc.set(SLOW, 1)  # LATER left unset: maybe stopped early, so nothing is kept
            return
        rc.set(SLOW, 1)
        rc.set(LATER, 2)

    store = open_store("file", tmp_path / "store")
    first = Runtime(store).run(graph, run_id="u", version="1", inputs={SEED: 1}, cancel=token)
    assert first.status == "canceled"
    record = load(store, "u")
    assert "half" not in record.scopes[record.root_scope].nodes
    again = Runtime(store).resume(graph, run_id="u", version="1", inputs={SEED: 1})
    assert again.status == "completed" and again[LATER] == 2 and calls == ["half", "half"]
    store.close()
