"""``quick_init`` builds the same objects as attrs' ``__init__``, and refuses classes where it
could not (validators, converters, factory defaults, init hooks, slots that are not fields)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from durable_core import Graph, Key, NodeReason
from durable_core._quickinit import quick_init
from durable_core.graph.checkpoint import Attempt, NodeOutputs, Scope
from durable_core.records import NodeRecord, RunRecord, ValueRecord, ValueState


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in attrs.fields(type(value))}


def test_a_restored_attempt_is_the_attempt_attrs_builds():
    graph = Graph("g", inputs=[Key("a", int)])
    graph.add_node("n", lambda rc: None, requires=[Key("a", int)], provides=[Key("b", int)])
    graph.validate()
    scope = Scope(id="s" * 32, graph=graph, path="")
    outputs = NodeOutputs(NodeReason.COMPLETED, {"b": 1}, frozenset(), True)
    node = graph.nodes["n"]
    made = quick_init(Attempt, "id", "scope", "node", "restored")("a" * 32, scope, node, outputs)
    expected = Attempt(id="a" * 32, scope=scope, node=node, restored=outputs)
    assert type(made) is Attempt
    assert _fields(made) == _fields(expected)
    assert made.path == "n" and made.root is made
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.index = 2  # type: ignore[misc]


def test_checked_outputs_are_the_node_outputs_attrs_builds():
    make = quick_init(NodeOutputs, "reason", "ready", "skipped", "checked")
    made = make(NodeReason.COMPLETED, {"b": 1}, frozenset(), True)
    expected = NodeOutputs(NodeReason.COMPLETED, {"b": 1}, frozenset(), True)
    assert made == expected and _fields(made) == _fields(expected)
    partial = quick_init(NodeOutputs, "reason")(NodeReason.SKIPPED)
    assert _fields(partial) == _fields(NodeOutputs(NodeReason.SKIPPED))


def test_a_record_object_that_is_not_frozen_is_the_one_attrs_builds() -> None:
    # Such a class takes plain attribute stores: the same fields, defaults for the others,
    # and it stays changeable (the ledger sets a proposed record's revision).
    node = quick_init(NodeRecord, "node_id", "attempt", "outputs")("n", "a" * 32, [])
    expected = NodeRecord(node_id="n", attempt="a" * 32, outputs=[])
    assert type(node) is NodeRecord and node == expected and _fields(node) == _fields(expected)
    value = quick_init(ValueRecord, "name", "state")("k", ValueState.SKIPPED)
    assert _fields(value) == _fields(ValueRecord(name="k", state=ValueState.SKIPPED))
    names = [f.name for f in attrs.fields(RunRecord)]
    args = [f"v{i}" for i in range(len(names))]
    record = quick_init(RunRecord, *names)(*args)
    assert _fields(record) == dict(zip(names, args, strict=True))
    record.revision = 7
    assert record.revision == 7


@attrs.frozen
class _Validated:
    x: int = attrs.field(validator=attrs.validators.instance_of(int))


@attrs.frozen
class _Converted:
    x: int = attrs.field(converter=int)


@attrs.frozen
class _Factory:
    x: list[int] = attrs.Factory(list)


@attrs.frozen
class _Hooked:
    x: int

    def __attrs_post_init__(self) -> None:
        pass


@attrs.frozen(slots=False)
class _Dict:
    x: int


@attrs.frozen
class _Plain:
    x: int
    y: int = 0


@pytest.mark.parametrize("cls", [_Validated, _Converted, _Hooked, _Dict, int])
def test_classes_attrs_init_does_more_for_are_refused(cls: type):
    with pytest.raises(TypeError):
        quick_init(cls, "x")


def test_a_factory_default_or_a_missing_required_field_or_an_unknown_name_is_refused():
    with pytest.raises(TypeError, match="plain default"):
        quick_init(_Factory)
    with pytest.raises(TypeError, match="plain default"):
        quick_init(_Plain, "y")  # x has no default
    with pytest.raises(TypeError, match="distinct fields"):
        quick_init(_Plain, "x", "z")
    with pytest.raises(TypeError, match="distinct fields"):
        quick_init(_Plain, "x", "x")
    assert _fields(quick_init(_Plain, "x")(3)) == {"x": 3, "y": 0}
