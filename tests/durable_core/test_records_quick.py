"""The quick paths of the record layer (shape check, reader) agree with the exact ones."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_samples import load_format2, records, walk_mutable

from durable_core import CorruptRecordError, recordjson
from durable_core.recordjson import check_shape

BAD = [None, -1, 2**63, 2**64, 1.0, True, "\ud800", "x", b"x", [], {}, object()]


def exact(record: Any) -> bool:
    try:
        recordjson._WRITE_RUN(recordjson._Writer(surrogates=True), record, None, None)
    except CorruptRecordError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(records, st.data())
def test_the_quick_check_accepts_only_what_the_writer_accepts(record: Any, data: Any) -> None:
    # covers: R-REC-4
    assert recordjson._SHAPE_OK(record)  # every valid record of exact types takes the quick path
    objects = [o for o in walk_mutable(record) if attrs.has(type(o))]
    target = data.draw(st.sampled_from(objects))
    field = data.draw(st.sampled_from(attrs.fields(type(target))))
    object.__setattr__(target, field.name, data.draw(st.sampled_from(BAD)))
    if recordjson._SHAPE_OK(record):
        assert exact(record)
    if exact(record):
        check_shape(record)
    else:
        with pytest.raises(CorruptRecordError):
            check_shape(record)


def test_a_subclass_of_str_takes_the_exact_path_and_passes() -> None:
    # covers: R-REC-4
    class Name(str):
        pass

    record = load_format2()
    record.run_id = Name(record.run_id)
    assert not recordjson._SHAPE_OK(record)
    check_shape(record)  # the writer accepts any str


def test_a_lone_surrogate_in_a_map_key_is_refused_with_its_path() -> None:
    # covers: R-REC-4
    record = load_format2()
    record.attempts["\udc80"] = next(iter(record.attempts.values()))
    with pytest.raises(CorruptRecordError) as caught:
        check_shape(record)
    assert caught.value.path is not None and caught.value.path.startswith("$.Attempts")


@settings(max_examples=200, deadline=None)
@given(records)
def test_the_quick_reader_builds_what_the_exact_reader_builds(record: Any) -> None:
    # covers: R-REC-4
    tree = json.loads(recordjson.record_to_json(record))
    quick = recordjson._QUICK_READ(tree)
    assert quick == recordjson._READ_RUN(recordjson._Reader(False, None), tree, None, None)
    assert quick == record


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.update(Extra=1),
        lambda t: t.update(Revision=True),
        lambda t: t.pop("RunID"),
        lambda t: next(iter(t["Attempts"].values())).update(Index=1.0),
        lambda t: next(iter(t["Attempts"].values())).update(State="pending"),
    ],
)
def test_what_the_quick_reader_refuses_the_exact_reader_names(change: Any) -> None:
    # covers: R-REC-4
    tree = json.loads(recordjson.record_to_json(load_format2()))
    change(tree)
    with pytest.raises(recordjson._Slow):
        recordjson._QUICK_READ(tree)
    with pytest.raises(CorruptRecordError) as caught:
        recordjson.record_from_json(json.dumps(tree).encode())
    assert caught.value.path is not None
