"""``resume`` checks the record's scopes and streams against the graph before anything runs.

Each record below passes ``validate_record`` (it is well formed) but disagrees with the graph:
a stream entry naming a key the graph does not have, a child scope whose ``Inputs`` or
``Bindings`` is not what this runtime writes for its Sub node, a child scope under a plain node,
a root scope that says ``Bindings: true``. Each is refused as corrupt before any body runs, and
the stored record stays exactly as it was (it is never written back).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    CancelToken,
    Codecs,
    CorruptRecordError,
    Graph,
    In,
    Key,
    Out,
    RunRecord,
    Runtime,
    StreamRecord,
    validate_record,
)
from tests.durable_core.durable.scenarios import CallLog, enter, load, open_store, stored_bytes

SEED, A, X, Y1, Y2, B = (Key(name, int) for name in ("seed", "a", "x", "y1", "y2", "b"))


def graph(log: CallLog, token: CancelToken | None = None) -> Graph:
    """seed -> a -> Sub "inner" (c1 -> c2) -> after; ``c2`` cancels the run when given a token,
    so the child scope is in the record with ``c1`` confirmed."""
    inner = Graph("inner", inputs=[X])

    @inner.node("c1", requires=[X], provides=[Y1])
    def c1(rc: Any) -> None:
        enter(log, "inner/c1")
        rc.set(Y1, rc.get(X) + 1)

    @inner.node("c2", requires=[Y1], provides=[Y2])
    def c2(rc: Any) -> None:
        enter(log, "inner/c2")
        if token is not None:
            token.cancel()
            return
        rc.set(Y2, rc.get(Y1) * 2)

    g = Graph("outer", inputs=[SEED])

    @g.node("a", requires=[SEED], provides=[A])
    def a(rc: Any) -> None:
        enter(log, "a")
        rc.set(A, rc.get(SEED) + 10)

    g.sub("inner", inner, bindings=[In(A, X), Out(Y2, B)])

    @g.node("after", requires=[B], provides=[])
    def after(rc: Any) -> None:
        enter(log, "after")

    return g


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = open_store(request.param, tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture
def log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.log")


def interrupted(store: Any, log: CallLog) -> None:
    token = CancelToken()
    result = Runtime(store, Codecs.default()).run(
        graph(log, token), run_id="r1", version="v1", inputs={SEED: 1}, cancel=token
    )
    assert result.status == "canceled"
    assert log.calls() == ["a", "inner/c1", "inner/c2"]


def rewrite(store: Any, change: Callable[[RunRecord], RunRecord]) -> bytes:
    """Save ``change(record)`` through the store's own session (a well-formed record)."""
    with store.acquire("r1") as session:
        record = session.load()
        changed = attrs.evolve(change(record), revision=record.revision + 1)
        validate_record(changed)
        session.save(changed, record.revision)
    return stored_bytes(store, "r1")


def child_scope_id(record: RunRecord) -> str:
    (child,) = (sid for sid in record.scopes if sid != record.root_scope)
    return child


def with_scope(record: RunRecord, scope_id: str, **fields: Any) -> RunRecord:
    scopes = dict(record.scopes)
    scopes[scope_id] = attrs.evolve(scopes[scope_id], **fields)
    return attrs.evolve(record, scopes=scopes)


def refused(store: Any, log: CallLog, before: bytes) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as caught:
        Runtime(store, Codecs.default()).resume(
            graph(log), run_id="r1", version="v1", inputs={SEED: 1}
        )
    assert log.calls() == ["a", "inner/c1", "inner/c2"]  # nothing ran
    assert stored_bytes(store, "r1") == before  # nothing was written back
    return caught.value


def test_an_untouched_record_resumes(store: Any, log: CallLog) -> None:
    # covers: R-SCOPE-1, R-SCOPE-2
    interrupted(store, log)
    result = Runtime(store, Codecs.default()).resume(
        graph(log), run_id="r1", version="v1", inputs={SEED: 1}
    )
    assert result.status == "completed"
    assert log.calls() == ["a", "inner/c1", "inner/c2", "inner/c2", "after"]


def test_a_stream_entry_for_a_key_the_graph_does_not_have_is_refused(
    store: Any, log: CallLog
) -> None:
    # covers: S-2, E-1
    interrupted(store, log)

    def add_stream(record: RunRecord) -> RunRecord:
        ghost = StreamRecord(scope=record.root_scope, node_id="a", key="ghost", group="g")
        return attrs.evolve(record, streams={"s1": ghost})

    before = rewrite(store, add_stream)
    error = refused(store, log, before)
    assert error.rule == "S-2"
    assert "'ghost'" in str(error) and "none" in str(error)
    assert load(store, "r1").streams  # kept as evidence


def test_a_stream_entry_naming_a_value_key_is_refused(store: Any, log: CallLog) -> None:
    # covers: S-2
    interrupted(store, log)

    def add_stream(record: RunRecord) -> RunRecord:
        value_key = StreamRecord(scope=record.root_scope, node_id="a", key="a", group="g")
        return attrs.evolve(record, streams={"s1": value_key})

    error = refused(store, log, rewrite(store, add_stream))
    assert error.rule == "S-2" and "'a'" in str(error)


def test_a_child_scope_whose_inputs_are_not_its_bindings_fingerprint_is_refused(
    store: Any, log: CallLog
) -> None:
    # covers: R-SCOPE-1, E-1
    interrupted(store, log)
    before = rewrite(
        store, lambda record: with_scope(record, child_scope_id(record), inputs="0" * 64)
    )
    error = refused(store, log, before)
    assert error.rule == "R-SCOPE-1"
    assert "Inputs" in str(error) and "'inner'" in str(error)


def test_a_child_scope_without_bindings_is_refused(store: Any, log: CallLog) -> None:
    # covers: R-SCOPE-1
    interrupted(store, log)
    before = rewrite(
        store, lambda record: with_scope(record, child_scope_id(record), bindings=False)
    )
    error = refused(store, log, before)
    assert error.rule == "R-SCOPE-1" and "Bindings: false" in str(error)


def test_a_root_scope_that_says_bindings_is_refused(store: Any, log: CallLog) -> None:
    # covers: R-SCOPE-1
    interrupted(store, log)
    before = rewrite(store, lambda record: with_scope(record, record.root_scope, bindings=True))
    error = refused(store, log, before)
    assert error.rule == "R-SCOPE-1" and "root scope" in str(error)


def test_a_child_scope_under_a_plain_node_is_refused(store: Any, log: CallLog) -> None:
    # covers: R-SCOPE-2
    interrupted(store, log)

    def scope_under_a(record: RunRecord) -> RunRecord:
        root = record.scopes[record.root_scope]
        a_attempt = root.nodes["a"].attempt
        child = record.scopes[child_scope_id(record)]
        scopes = dict(record.scopes)
        scopes[a_attempt] = attrs.evolve(child, path="a", nodes={})
        return attrs.evolve(record, scopes=scopes)

    error = refused(store, log, rewrite(store, scope_under_a))
    assert error.rule == "R-SCOPE-2" and "plain node" in str(error)
