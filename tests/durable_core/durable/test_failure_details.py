"""Where a failed try failed and its traceback: on its recovery event and in the run log,
never in the record (R-REC-2)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from durable_core import EventKind, Graph, In, Key, Out, RecoveryEvent, Retry, Runtime
from durable_core.durable.failures import MAX_TRACEBACK_CHARS, failure_of
from tests.durable_core.durable.scenarios import open_store, stored_bytes

TEXT = Key("text", str)
LENGTH = Key("length", int)
CHILD_TEXT = Key("child_text", str)
CHILD_LENGTH = Key("child_length", int)


def parse(text: str) -> int:
    return {"a": 1}[text]  # KeyError for anything else: the line a failure must point at


PARSE_LINE = inspect.getsourcelines(parse)[1] + 1


def graph_with_a_failing_body_in_a_retried_sub() -> Graph:
    child = Graph("measure", inputs=[CHILD_TEXT])

    @child.node("parse", requires=[CHILD_TEXT], provides=[CHILD_LENGTH], aspects=[Retry(2)])
    def parse_node(rc):
        rc.set(CHILD_LENGTH, parse(rc.get(CHILD_TEXT)))

    graph = Graph("outer", inputs=[TEXT])
    graph.sub(
        "measure",
        child,
        bindings=[In(TEXT, CHILD_TEXT), Out(CHILD_LENGTH, LENGTH)],
        aspects=[Retry(2)],
    )
    return graph


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_every_failed_try_names_its_file_and_line_and_keeps_its_traceback_outside_the_record(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-REC-2, R-ATT-4
    store = open_store(kind, tmp_path / "store")
    events: list[RecoveryEvent] = []
    result = Runtime(store, observers=[events.append]).run(
        graph_with_a_failing_body_in_a_retried_sub(), run_id="r", version="1", inputs={TEXT: "b"}
    )
    assert result.status == "failed"
    failed = [e for e in events if e.kind is EventKind.ATTEMPT_FAILED]
    # two tries of the child node in each of two tries of the Sub, their roots, the Sub's
    child_tries = [e for e in failed if e.node_id == "parse"]
    assert len(child_tries) >= 4
    for event in child_tries:
        assert event.where == f"{__file__}:{PARSE_LINE} in parse", event.where
        assert "KeyError: 'b'" in event.traceback
        assert f"line {PARSE_LINE}, in parse" in event.traceback
    sub = [e for e in failed if e.node_id == "measure"]
    assert sub and all(e.where.endswith(f":{PARSE_LINE} in parse") for e in sub)
    data = stored_bytes(store, "r")
    assert b"Traceback" not in data and b"in parse" not in data and __file__.encode() not in data
    store.close()


def test_a_traceback_is_bounded_and_keeps_its_innermost_frames() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("x" * 50_000)
        deep(n - 1)

    try:
        deep(200)
    except ValueError as exc:
        details = failure_of(exc)
    assert len(details.traceback) <= MAX_TRACEBACK_CHARS + 100
    assert details.traceback.startswith("Traceback (most recent call last):")
    assert details.traceback.rstrip().endswith("x" * 100)  # the error's own line is kept
    assert " in deep" in details.where
    assert failure_of(ValueError("never raised")).where == ""
