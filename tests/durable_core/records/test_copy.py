"""copy_record: an equal record sharing no mutable object, faster than a JSON round trip."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings

from durable_core import (
    AttemptState,
    RunRecord,
    copy_record,
)
from durable_core.durable import ledger
from durable_core.records import fields
from tests.durable_core.records.samples import (
    FETCH,
    ROOT,
    STREAM,
    load_format2,
    records,
    walk_mutable,
)


def assert_independent(original: RunRecord, copied: RunRecord) -> None:
    originals = {id(item) for item in walk_mutable(original)}
    copies = walk_mutable(copied)
    assert len(copies) == len(walk_mutable(original))
    assert not any(id(item) in originals for item in copies)


# covers: R-RT-1
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_copy_is_equal_and_shares_nothing_mutable(record):
    copied = copy_record(record)
    assert copied == record
    assert_independent(record, copied)


def non_default(tp: Any) -> Any:
    """A value of type ``tp`` that differs from every attrs default, recursively."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is str:
        return "s"
    if tp is bool:
        return True  # every bool field defaults to False
    if tp is int:
        return 7
    if tp is bytes:
        return b"b"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp)[-1]  # the first member is the default where there is one
    if origin is list:
        return [non_default(args[0])]
    if origin is dict:
        return {"k": non_default(args[1])}
    if origin is types.UnionType:
        return non_default(next(a for a in args if a is not type(None)))
    hints = typing.get_type_hints(tp)
    value = tp(**{a.name: non_default(hints[a.name]) for a in attrs.fields(tp)})
    for attribute in attrs.fields(tp):
        default = attribute.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        assert getattr(value, attribute.name) != default, (tp, attribute.name)
    return value


# covers: R-RT-1
def test_every_field_of_every_class_is_copied():
    # Every field of every record class holds a non-default value, so a field the copy forgot
    # would come back as its default and break equality.
    record = non_default(RunRecord)
    assert {type(item) for item in walk_mutable(record) if attrs.has(type(item))} == set(
        fields._CODECS
    )
    copied = copy_record(record)
    assert copied == record
    assert_independent(record, copied)


# covers: R-RT-1
def test_changing_the_copy_leaves_the_original_alone():
    record = load_format2()
    proposed = copy_record(record)
    proposed.attempts[FETCH].state = AttemptState.FAILED
    proposed.scopes[ROOT].nodes["fetch"].outputs[0].name = "changed"
    proposed.streams[STREAM].pending.clear()
    proposed.scopes[ROOT].nodes.pop("split")
    assert record == load_format2()


# covers: R-RT-1
def test_the_ledger_finds_the_copy_where_it_looks():
    assert ledger.copy_record is copy_record
