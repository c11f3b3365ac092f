"""The encoder's text writers write each record object exactly as the writing pass and the C
JSON encoder write it, and hand over everything else: they never write what the pass refuses."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import (
    AttemptRecord,
    AttemptState,
    CorruptRecordError,
    NodeReason,
    NodeRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    copy_record,
    record_to_json,
)
from durable_core.durable.proposal import Proposal, adopt
from durable_core.records import encoder, fastpath, fields
from durable_core.records.delta import apply_delta, canonical_json
from durable_core.records.encoder import RecordEncoder
from durable_core.testing import sample_record
from tests.durable_core.records.samples import load_format2, records, walk_mutable


class _Str(str):
    pass


class _Int(int):
    pass


class _List(list):  # type: ignore[type-arg]
    pass


class _Other(enum.StrEnum):
    READY = "ready"


BAD = [
    None,
    -1,
    0,
    2**63,
    2**64,
    1.0,
    True,
    "\ud800",
    "x",
    "ready",
    "",
    _Str("ready"),
    _Int(3),
    b"x",
    bytearray(b"x"),
    [],
    _List(),
    {},
    {1: 2},
    object(),
    AttemptState.CONFIRMED,
    NodeReason.SKIPPED,
    ValueState.READY,
    StreamTerminal.OPEN,
    _Other.READY,
]


def _general(cls: type, value: Any) -> str | None:
    """The writing pass and the C encoder; None when the pass refuses the value."""
    writer = fields._CODECS[cls][1]
    try:
        return encoder._DUMPS(writer(fields._Writer(False), value, None, None))
    except CorruptRecordError:
        return None


def _quick(cls: type, value: Any) -> str | None:
    """The generated text writer; None when it hands the value over."""
    try:
        return fastpath._TEXT[cls](value)
    except fastpath._Slow:
        return None


def _objects(record: Any) -> list[Any]:
    return [o for o in walk_mutable(record) if attrs.has(type(o))]


@settings(max_examples=200, deadline=None)
@given(records)
def test_every_record_object_is_written_as_the_writing_pass_writes_it(record: Any) -> None:
    # covers: R-REC-4
    for obj in _objects(record):
        cls = type(obj)
        assert _quick(cls, obj) == _general(cls, obj) is not None
        for field in fields._SPECS[cls].fields:
            value = getattr(obj, field.attr)
            if value is None:
                continue  # an optional field left out: the object's writer says so
            text = fastpath._FIELD_TEXT[cls][field.attr](value)
            assert text == encoder._DUMPS(
                field.write(fields._Writer(False), value, None, field.key)
            )
    assert RecordEncoder().encode(record) == record_to_json(record)


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_the_text_writers_take_only_what_the_writing_pass_takes(record: Any, data: Any) -> None:
    # covers: R-REC-4
    target = data.draw(st.sampled_from(_objects(record)))
    field = data.draw(st.sampled_from(attrs.fields(type(target))))
    object.__setattr__(target, field.name, data.draw(st.sampled_from(BAD)))
    for obj in _objects(record):
        _agree(obj)
    try:
        expected_bytes = record_to_json(record)
    except CorruptRecordError as exc:
        with pytest.raises(CorruptRecordError) as caught:
            RecordEncoder().encode(record)
        assert caught.value.path == exc.path
    else:
        assert RecordEncoder().encode(record) == expected_bytes


def _agree(obj: Any) -> None:
    cls = type(obj)
    expected = _general(cls, obj)
    got = _quick(cls, obj)
    if expected is None:
        assert got is None, (cls, obj)  # refused: the writing pass names the path
    else:
        assert got in (None, expected), (cls, obj)


@pytest.mark.parametrize("sample", ["format2", "rich"])
def test_every_field_of_every_object_given_any_odd_value(sample: str) -> None:
    # covers: R-REC-4
    record = load_format2() if sample == "format2" else sample_record("run-1", 3)
    objects = _objects(record)
    for target in objects:
        for field in attrs.fields(type(target)):
            kept = getattr(target, field.name)
            for bad in BAD:
                object.__setattr__(target, field.name, bad)
                _agree(target)
            object.__setattr__(target, field.name, kept)
            _agree(target)


def test_the_text_writers_refuse_a_value_of_a_subclass_and_the_pass_writes_it() -> None:
    # covers: R-REC-4
    value = ValueRecord(name=_Str("k"), type_id="json:int", version="1", data=b"1")
    assert _quick(ValueRecord, value) is None
    assert _general(ValueRecord, value) == _quick(ValueRecord, attrs.evolve(value, name="k"))


def _confirm(record: Any, node: NodeRecord, attempt_id: str) -> tuple[Any, int]:
    proposal = Proposal(record)
    proposal.record.attempts[attempt_id] = AttemptRecord(
        parent=record.root_scope, node_id=node.node_id, state=AttemptState.CONFIRMED
    )
    proposal.scope(record.root_scope).nodes[node.node_id] = node
    base = record.revision
    proposal.record.revision = base + 1
    change, _ = adopt(proposal, record)
    return change, base


def test_a_confirmed_node_gives_the_canonical_delta() -> None:
    # covers: R-REC-4, R-STORE-3
    record = load_format2()
    encoder = RecordEncoder()
    encoder.encode(record)
    before = record_to_json(record)
    node = NodeRecord(
        node_id="n-é\u2028\"'",
        attempt="a" * 32,
        outputs=[
            ValueRecord(
                name="k", type_id="json:int", version="1", digest="d" * 64, data=b"\x00\xff"
            )
        ],
    )
    change, base = _confirm(record, node, "a" * 32)
    delta, data = encoder.encode_change(record, change, base)
    assert delta is not None
    assert canonical_json(json.loads(delta)) == delta  # sorted keys, no whitespace, one spelling
    assert apply_delta(before, delta) == data() == record_to_json(record)
    assert delta.startswith(f'{{"Base":{base},"Revision":{base + 1},"Set":['.encode())


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        (lambda n: setattr(n, "attempt", 7), "Attempt"),
        (lambda n: setattr(n.outputs[0], "data", "not bytes"), "Outputs[0].Data"),
        (lambda n: setattr(n.outputs[0], "state", "pending"), "Outputs[0].State"),
        (lambda n: setattr(n.outputs[0], "name", "lone \udc80"), "Outputs[0].Name"),
    ],
)
def test_a_changed_part_that_cannot_be_written_is_refused_naming_its_path(
    bad: Any, path: str
) -> None:
    # covers: R-REC-4, B-FILE-5
    record = load_format2()
    encoder = RecordEncoder()
    encoder.encode(record)
    node = NodeRecord(node_id="late", attempt="b" * 32, outputs=[ValueRecord(name="k", data=b"1")])
    bad(node)
    change, base = _confirm(record, node, "b" * 32)
    with pytest.raises(CorruptRecordError) as caught:
        encoder.encode_change(record, change, base)
    assert caught.value.path is not None
    assert caught.value.path.endswith(f'.Nodes["late"].{path}')
    # the encoder forgot what it remembered: the next save is whole, and exact
    good = copy_record(record)
    good.scopes[good.root_scope].nodes["late"] = NodeRecord(node_id="late", attempt="b" * 32)
    assert encoder.encode(good) == record_to_json(good)
