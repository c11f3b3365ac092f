"""Real processes that die in the middle of a run, and a new process that resumes it.

The child (``crash_child.py``) runs a scenario on a real file or SQLite store and ends itself
with ``os._exit`` inside a body or right after a recovery event: no ``finally``, no close, the
OS releases the run's lock. A new child process resumes the run. Bodies log each invocation to
a side file, which tells which bodies ran again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from durable_core import AttemptState, MemoryStore, Runtime, execute
from tests import ROOT
from tests.durable_core.durable.scenarios import (
    CRASH_EXIT,
    SCENARIOS,
    SEED,
    CallLog,
    load,
    open_store,
)

CHILD = "tests.durable_core.durable.crash_child"
STORES = ["file", "sqlite"]


def child(
    mode: str,
    scenario: str,
    kind: str,
    location: Path | str,
    log: CallLog,
    *,
    crash: str = "",
    fail: str = "",
    crash_event: str = "",
) -> tuple[int, dict[str, Any] | None, str]:
    env = dict(os.environ, DURABLE_TEST_CRASH=crash, DURABLE_TEST_FAIL=fail)
    args = [sys.executable, "-m", CHILD, mode, scenario, kind, str(location), str(log.path), "r1"]
    if crash_event:
        args.append(crash_event)
    proc = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def uninterrupted(scenario: str, tmp_path: Path) -> dict[str, Any]:
    """The root values of the scenario run without any crash (plain engine, no store)."""
    graph = SCENARIOS[scenario](CallLog(tmp_path / "reference.log"))
    result = execute(graph, {SEED: 4})
    assert result.status == "completed", result.error
    return result.values


@pytest.mark.parametrize("kind", STORES)
def test_a_process_dying_in_node_3_resumes_without_running_nodes_1_and_2(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-RT-3, R-ATT-2, R-ATT-4, R-NODE-1, R-VAL-3, B-FILE-3, B-SQL-2
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    code, _, stderr = child("run", "chain5", kind, location, log, crash="n3")
    assert code == CRASH_EXIT, stderr
    assert log.calls() == ["n1", "n2", "n3"]

    store = open_store(kind, location)
    record = load(store, "r1")
    nodes = record.scopes[record.root_scope].nodes
    assert sorted(nodes) == ["n1", "n2"]
    # n3 had started, but nothing of it needed saving yet: a node that got no further than its
    # body leaves nothing in the record, and runs again under a new root attempt.
    assert sorted(a.node_id for a in record.attempts.values()) == ["n1", "n2"]
    store.close()

    code, result, stderr = child("resume", "chain5", kind, location, log)
    assert code == 0, stderr
    assert result is not None and result["status"] == "completed", result
    assert result["restored"] == 2
    assert log.calls() == ["n1", "n2", "n3", "n3", "n4", "n5"]
    assert log.count("n1") == log.count("n2") == 1
    assert result["values"] == uninterrupted("chain5", tmp_path)

    store = open_store(kind, location)
    final = load(store, "r1")
    assert final.format == 2
    assert sorted(final.scopes[final.root_scope].nodes) == ["n1", "n2", "n3", "n4", "n5"]
    n3_after = [aid for aid, a in final.attempts.items() if a.node_id == "n3"]
    assert len(n3_after) == 1 and n3_after[0] not in record.attempts
    assert all(a.state is AttemptState.CONFIRMED for a in final.attempts.values())
    store.close()


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize(
    ("crash", "crash_event", "third_try"),
    [
        ("flaky@3", "", "adopted"),  # died inside the third try's body
        ("", "attempt_failed:2", "new"),  # died right after the second failure was saved
    ],
)
def test_retry_keeps_its_spent_tries_across_a_crash(
    kind: str, crash: str, crash_event: str, third_try: str, tmp_path: Path
) -> None:
    # covers: R-ATT-1, R-ATT-3, R-ATT-4, G-8
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    code, _, stderr = child(
        "run", "retry3", kind, location, log, crash=crash, crash_event=crash_event
    )
    assert code == CRASH_EXIT, stderr
    store = open_store(kind, location)
    before = load(store, "r1")
    store.close()
    tries = sorted(
        ((a.index, a.state, aid) for aid, a in before.attempts.items() if a.boundary),
    )
    expected = [(1, AttemptState.FAILED), (2, AttemptState.FAILED)]
    if third_try == "adopted":
        expected.append((3, AttemptState.ACTIVE))
    assert [(i, s) for i, s, _ in tries] == expected
    calls_before = log.count("flaky")

    # The body now fails every time: exactly one try is left, then the node fails.
    code, result, stderr = child("resume", "retry3", kind, location, log, fail="flaky")
    assert code == 0, stderr
    assert result is not None and result["status"] == "failed", result
    assert result["error_path"] == "flaky"
    assert log.count("flaky") == calls_before + 1
    assert log.count("prep") == 1

    store = open_store(kind, location)
    after = load(store, "r1")
    store.close()
    final_tries = sorted((a.index, a.limit, a.state) for a in after.attempts.values() if a.boundary)
    assert final_tries == [
        (1, 3, AttemptState.FAILED),
        (2, 3, AttemptState.FAILED),
        (3, 3, AttemptState.FAILED),
    ]
    third_id = next(aid for aid, a in after.attempts.items() if a.boundary and a.index == 3)
    assert (third_id in before.attempts) == (third_try == "adopted")
    roots = [aid for aid, a in after.attempts.items() if a.node_id == "flaky" and not a.boundary]
    assert [after.attempts[aid].state for aid in roots] == [AttemptState.FAILED]
    assert {(a.boundary, a.parent) for a in after.attempts.values() if a.boundary} == {
        ("node:0", roots[0])
    }


@pytest.mark.parametrize("kind", STORES)
def test_retry_after_a_crash_succeeds_with_its_last_try(kind: str, tmp_path: Path) -> None:
    # covers: R-ATT-2, R-ATT-4
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    code, _, stderr = child("run", "retry3", kind, location, log, crash_event="attempt_failed:2")
    assert code == CRASH_EXIT, stderr
    code, result, stderr = child("resume", "retry3", kind, location, log)
    assert code == 0, stderr
    assert result is not None and result["status"] == "completed", result
    assert result["values"] == uninterrupted("retry3", tmp_path)
    assert log.count("flaky") == 3
    store = open_store(kind, location)
    after = load(store, "r1")
    store.close()
    assert sorted((a.index, a.state) for a in after.attempts.values() if a.boundary) == [
        (1, AttemptState.FAILED),
        (2, AttemptState.FAILED),
        (3, AttemptState.CONFIRMED),  # confirmed together with its root, never on its own
    ]


@pytest.mark.parametrize("kind", STORES)
def test_a_sub_whose_child_did_2_of_3_nodes_resumes_with_only_the_third(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-SCOPE-1, R-SCOPE-2, R-ATT-4, G-9
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    code, _, stderr = child("run", "with_sub", kind, location, log, crash="inner/c3")
    assert code == CRASH_EXIT, stderr
    assert log.calls() == ["before", "inner/c1", "inner/c2", "inner/c3"]

    store = open_store(kind, location)
    record = load(store, "r1")
    store.close()
    sub_attempt = next(aid for aid, a in record.attempts.items() if a.node_id == "inner")
    scope = record.scopes[sub_attempt]  # the child scope's id is the Sub node's attempt id
    assert scope.graph == "inner" and scope.path == "inner" and scope.bindings
    assert sorted(scope.nodes) == ["c1", "c2"]

    code, result, stderr = child("resume", "with_sub", kind, location, log)
    assert code == 0, stderr
    assert result is not None and result["status"] == "completed", result
    assert log.calls() == ["before", "inner/c1", "inner/c2", "inner/c3", "inner/c3", "after"]
    assert result["values"] == uninterrupted("with_sub", tmp_path)

    store = open_store(kind, location)
    final = load(store, "r1")
    store.close()
    assert sorted(final.scopes) == sorted(record.scopes)  # the same child scope, reused
    assert sorted(final.scopes[sub_attempt].nodes) == ["c1", "c2", "c3"]
    assert final.scopes[sub_attempt].nodes["c1"] == scope.nodes["c1"]


def test_a_process_dying_in_node_3_resumes_on_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    # covers: R-RT-3, R-ATT-4, B-PG-1, B-PG-3
    log = CallLog(tmp_path / "calls.log")
    code, _, stderr = child("run", "chain5", "postgres", postgres_dsn, log, crash="n3")
    assert code == CRASH_EXIT, stderr
    assert log.calls() == ["n1", "n2", "n3"]
    code, result, stderr = child("resume", "chain5", "postgres", postgres_dsn, log)
    assert code == 0, stderr
    assert result is not None and result["status"] == "completed", result
    assert log.count("n1") == log.count("n2") == 1 and log.count("n3") == 2
    assert result["values"] == uninterrupted("chain5", tmp_path)


def test_the_reference_values_come_from_the_same_graph_in_memory(tmp_path: Path) -> None:
    # covers: R-RT-3
    # The in-process durable run gives what the plain engine gives (the crash tests compare
    # against the plain engine).
    graph = SCENARIOS["chain5"](CallLog(tmp_path / "calls.log"))
    durable = Runtime(MemoryStore()).run(graph, run_id="r", version="v1", inputs={SEED: 4})
    assert durable.status == "completed"
    assert durable.result.values == uninterrupted("chain5", tmp_path)
