"""``durable/resume.py``: the ``ResumePlan`` a run starts from, worked out from a real stored
record (SQLite) before any node runs, and handed whole to the checkpointer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    Codecs,
    EventKind,
    Graph,
    InputsMismatchError,
    Key,
    Runtime,
    VersionMismatchError,
    record_to_json,
)
from durable_core.durable.ledger import Ledger
from durable_core.durable.preflight import Mode, RunRequest, input_parts
from durable_core.durable.resume import ResumePlan, plan_resume, repair_streams
from durable_sqlitestore import SQLiteStore

N = Key("n", int)
TWICE = Key("twice", int)
PLUS = Key("plus", int)


def chain(fail: bool = False) -> Graph:
    graph = Graph("chain", inputs=[N])

    @graph.node("double", requires=[N], provides=[TWICE])
    def double(rc: Any) -> None:
        rc.set(TWICE, rc.get(N) * 2)

    @graph.node("plus", requires=[TWICE], provides=[PLUS])
    def plus(rc: Any) -> None:
        if fail:
            raise ValueError("boom")
        rc.set(PLUS, rc.get(TWICE) + 1)

    return graph


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = SQLiteStore(tmp_path / "runs.sqlite")
    yield opened
    opened.close()


def resume_request(graph: Graph, **changes: Any) -> RunRequest:
    return attrs.evolve(RunRequest(Mode.RESUME, graph, "r", "1", {N: 20}), **changes)


def load(store: Any) -> Any:
    with store.acquire("r") as session:
        return session.load()


def test_a_new_run_starts_from_an_empty_plan() -> None:
    given = input_parts(chain(), Codecs.default(), {N: 1})[0]
    plan = ResumePlan.fresh(given)
    assert plan.kind is EventKind.RUN_STARTED
    assert plan.inputs is given
    assert dict(plan.restored) == {} and dict(plan.managed) == {}
    assert plan.failures.propagated == () and plan.failures.terminal == ()
    assert plan.streams is None


# covers: R-REC-3
def test_the_plan_of_a_finished_run_restores_every_node(store: Any) -> None:
    graph = chain()
    Runtime(store).run(graph, run_id="r", version="1", inputs={N: 20})
    record = load(store)
    plan = plan_resume(resume_request(graph), record, Codecs.default(), store, None)
    assert plan.kind is EventKind.RUN_RESUMED
    assert plan.inputs.fingerprint == record.inputs
    root = record.root_scope
    assert set(plan.restored) == {(root, "double"), (root, "plus")}
    assert plan.restored[(root, "plus")].ready == {"plus": 41}
    assert plan.failures.terminal == ()
    assert plan.streams is not None and not plan.streams.repairs
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        plan.kind = EventKind.RUN_STARTED  # type: ignore[misc]


def test_the_plan_names_a_node_failed_for_good(store: Any) -> None:
    graph = chain(fail=True)
    first = Runtime(store).run(graph, run_id="r", version="1", inputs={N: 20})
    assert first.status == "failed"
    plan = plan_resume(resume_request(graph), load(store), Codecs.default(), store, None)
    assert [node for node, _ in plan.failures.terminal] == ["plus"]


# covers: R-REC-3
@pytest.mark.parametrize(
    ("changes", "error"),
    [({"version": "2"}, VersionMismatchError), ({"inputs": {N: 21}}, InputsMismatchError)],
)
def test_planning_refuses_another_version_or_inputs_and_saves_nothing(
    store: Any, changes: dict[str, Any], error: type[Exception]
) -> None:
    graph = chain()
    Runtime(store).run(graph, run_id="r", version="1", inputs={N: 20})
    before = record_to_json(load(store))
    with pytest.raises(error, match="Nothing was saved"):
        plan_resume(resume_request(graph, **changes), load(store), Codecs.default(), store, None)
    assert record_to_json(load(store)) == before


def test_a_plan_without_repairs_is_run_as_it_is_and_saves_nothing(store: Any) -> None:
    graph = chain()
    Runtime(store).run(graph, run_id="r", version="1", inputs={N: 20})
    with store.acquire("r") as session:
        record = session.load()
        plan = plan_resume(resume_request(graph), record, Codecs.default(), store, None)
        ledger = Ledger(session, record)
        assert asyncio.run(repair_streams(ledger, plan)) is plan
        assert ledger.saves == 0 and ledger.revision == record.revision


def test_a_resume_restores_exactly_the_nodes_of_its_plan(store: Any) -> None:
    graph = chain()
    Runtime(store).run(graph, run_id="r", version="1", inputs={N: 20})
    plan = plan_resume(resume_request(graph), load(store), Codecs.default(), store, None)
    restored: list[str] = []
    runtime = Runtime(
        store,
        observers=[
            lambda e: restored.append(e.node_id) if e.kind is EventKind.NODE_RESTORED else None
        ],
    )
    result = runtime.resume(graph, run_id="r", version="1", inputs={N: 20})
    assert result.restored == len(plan.restored) == 2
    assert sorted(restored) == sorted(node for _, node in plan.restored)
