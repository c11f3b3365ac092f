"""The quick pass of ``validate_record`` accepts only what the exact checks accept.

``validate_record`` checks the usual attempts and NodeRecords on a quick pass and hands anything
else to the exact checks, which name the first problem. Here every damaged record gets the same
answer (the same path, rule and message, or none) with the quick pass and without it.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_core import (
    AttemptState,
    CorruptRecordError,
    Graph,
    Key,
    MemoryStore,
    NodeReason,
    RunRecord,
    Runtime,
    ValueState,
    copy_record,
    validate_record,
)
from durable_core.records import integrity
from tests.durable_core.records.samples import DEFINITION2, load_format2


def _plain_record() -> tuple[RunRecord, dict[str, Any]]:
    """A finished run of plain nodes (the quick pass takes all of it) and its definition."""
    a, b, c, d = Key("a", int), Key("b", int), Key("c", str), Key("d", int)
    graph = Graph("plain", inputs=[a])
    graph.add_node("double", lambda rc: rc.set(b, rc.get(a) * 2), requires=[a], provides=[b])
    graph.add_node(
        "both",
        lambda rc: (rc.set(c, str(rc.get(b))), rc.set(d, rc.get(b) + 1)),
        requires=[b],
        provides=[c, d],
    )
    graph.validate()
    store = MemoryStore()
    result = Runtime(store).run(graph, run_id="plain", version="1", inputs={a: 3})
    assert result.status == "completed", result.error
    with store.acquire("plain") as session:
        return session.load(), graph.describe_provides()


PLAIN, PLAIN_DEFINITION = _plain_record()


def _outcome(record: RunRecord, definition: Any, quick: bool) -> tuple[Any, ...] | None:
    check = integrity._Check(record, definition)
    if not quick:
        check.attempts_quick = lambda: False  # type: ignore[method-assign]
        check.nodes_quick = lambda sid, scope, nids: list(nids)  # type: ignore[method-assign]
    try:
        integrity.check_shape(record)
        check.run()
    except CorruptRecordError as exc:
        return (exc.path, exc.rule, str(exc))
    return None


def _fields(record: RunRecord) -> list[tuple[Any, str]]:
    found: list[tuple[Any, str]] = []
    stack: list[Any] = [record]
    while stack:
        item = stack.pop()
        if attrs.has(type(item)):
            for attribute in attrs.fields(type(item)):
                found.append((item, attribute.name))
                stack.append(getattr(item, attribute.name))
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _ids(record: RunRecord) -> list[str]:
    return [record.root_scope, *record.attempts]


_REPLACEMENTS = st.one_of(
    st.sampled_from(["", "double", "both", "a", "b", "c", "d", "x/y", "1" * 64, "ab" * 16]),
    st.integers(0, 3),
    st.sampled_from(list(AttemptState) + list(ValueState) + list(NodeReason)),
    st.booleans(),
    st.none(),
    st.binary(max_size=3),
    st.sampled_from([hashlib.sha256(b"6").hexdigest(), hashlib.sha256(b"").hexdigest()]),
)


def _damage(record: RunRecord, changes: list[tuple[int, Any, int]]) -> None:
    for position, replacement, id_index in changes:
        fields = _fields(record)
        target, name = fields[position % len(fields)]
        if replacement == "ab" * 16:  # another id of the record
            ids = _ids(record)
            replacement = ids[id_index % len(ids)]
        setattr(target, name, replacement)


# covers: R-NODE-1
@pytest.mark.parametrize("node_id", ["double", "both"])  # one output, and two
@pytest.mark.parametrize("reason", [ValueState.SKIPPED, "skipped"])
def test_a_reason_that_equals_skipped_is_checked_as_skipped(node_id: str, reason: Any):
    # Not NodeReason.SKIPPED itself, but equal to it: it is written as "skipped", so the node is
    # skipped as a whole and its ready outputs break the rule on both passes.
    record = copy_record(PLAIN)
    (node,) = [n for s in record.scopes.values() for n in s.nodes.values() if n.node_id == node_id]
    node.reason = reason
    for definition in (None, PLAIN_DEFINITION):
        outcome = _outcome(record, definition, quick=True)
        assert outcome == _outcome(record, definition, quick=False)
        assert outcome is not None and outcome[1] == "R-NODE-1", outcome


# covers: R-ATT-1, R-ATT-2, R-ATT-3, R-NODE-1, R-VAL-1, R-VAL-2, R-VAL-3
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), _REPLACEMENTS, st.integers(0, 10)),
        min_size=1,
        max_size=3,
    )
)
def test_damaged_plain_records_get_the_same_answer_with_and_without_the_quick_pass(changes):
    record = copy_record(PLAIN)
    _damage(record, changes)
    for definition in (None, PLAIN_DEFINITION):
        assert _outcome(record, definition, quick=True) == _outcome(record, definition, quick=False)


# covers: R-ATT-5, R-NODE-1, S-1, S-9
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), _REPLACEMENTS, st.integers(0, 10)),
        min_size=1,
        max_size=2,
    )
)
def test_damaged_records_with_retries_and_streams_get_the_same_answer(changes):
    record = load_format2()
    _damage(record, changes)
    for definition in (None, DEFINITION2):
        assert _outcome(record, definition, quick=True) == _outcome(record, definition, quick=False)


def _first_ready(record: RunRecord) -> Any:
    scope = record.scopes[record.root_scope]
    return next(v for n in scope.nodes.values() for v in n.outputs if v.state is ValueState.READY)


@pytest.mark.parametrize(
    ("damage", "rule"),
    [
        (lambda v: setattr(v, "data", v.data + b" "), "R-VAL-3"),  # bytes changed
        (lambda v: setattr(v, "digest", hashlib.sha256(b"other").hexdigest()), "R-VAL-3"),
        (lambda v: setattr(v, "digest", v.digest.upper()), "R-VAL-1"),  # not the digest format
        (lambda v: setattr(v, "digest", v.digest[:-1]), "R-VAL-1"),
        (lambda v: setattr(v, "type_id", ""), "R-VAL-1"),
    ],
)
def test_a_damaged_value_is_refused_naming_its_digest_rule(damage, rule):
    # covers: R-VAL-1, R-VAL-3
    record = copy_record(PLAIN)
    damage(_first_ready(record))
    with pytest.raises(CorruptRecordError) as caught:
        validate_record(record, PLAIN_DEFINITION)
    assert caught.value.rule == rule
    assert caught.value.path is not None and "Outputs[0]" in caught.value.path


def test_outputs_in_another_order_than_the_provides_are_still_valid():
    # covers: R-NODE-1
    record = copy_record(PLAIN)
    node = record.scopes[record.root_scope].nodes["both"]
    node.outputs.reverse()
    validate_record(record, PLAIN_DEFINITION)  # the exact check decides: the set is what counts


def test_joined_attempt_ids_of_wrong_lengths_are_refused():
    # covers: R-REC-3
    record = copy_record(PLAIN)
    first, second = list(record.attempts)
    # 31 + 33 hex digits: joined, still a multiple of 32 hex digits.
    record.attempts = {first[:-1]: record.attempts[first], second + "0": record.attempts[second]}
    with pytest.raises(CorruptRecordError) as caught:
        validate_record(record)
    assert caught.value.rule == "R-REC-3"


def test_the_plain_record_takes_the_quick_pass():
    # The fixture of the tests above really exercises the quick pass.
    check = integrity._Check(PLAIN, PLAIN_DEFINITION)
    assert check.attempts_quick()
    check.check_chains()
    scope = PLAIN.scopes[PLAIN.root_scope]
    assert check.nodes_quick(PLAIN.root_scope, scope, scope.nodes) == []
    assert base64.b64encode(_first_ready(PLAIN).data)  # a ready value with bytes
