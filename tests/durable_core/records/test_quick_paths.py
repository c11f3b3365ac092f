"""The quick paths of the record layer (shape check, reader) agree with the exact ones."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import CorruptRecordError
from durable_core.records import fastpath, fields, jsonio
from durable_core.records.delta import Folded
from durable_core.records.jsonio import check_shape
from tests.durable_core.records.samples import load_format2, records, walk_mutable

BAD = [None, -1, 2**63, 2**64, 1.0, True, "\ud800", "x", b"x", [], {}, object()]


def exact(record: Any) -> bool:
    try:
        fields._WRITE_RUN(fields._Writer(surrogates=True), record, None, None)
    except CorruptRecordError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(records, st.data())
def test_the_quick_check_accepts_only_what_the_writer_accepts(record: Any, data: Any) -> None:
    # covers: R-REC-4
    assert fastpath._SHAPE_OK(record)  # every valid record of exact types takes the quick path
    objects = [o for o in walk_mutable(record) if attrs.has(type(o))]
    target = data.draw(st.sampled_from(objects))
    field = data.draw(st.sampled_from(attrs.fields(type(target))))
    object.__setattr__(target, field.name, data.draw(st.sampled_from(BAD)))
    if fastpath._SHAPE_OK(record):
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
    assert not fastpath._SHAPE_OK(record)
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
    tree = json.loads(jsonio.record_to_json(record))
    quick = fastpath._QUICK_READ(tree)
    assert quick == fields._READ_RUN(fields._Reader(False, None), tree, None, None)
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
    tree = json.loads(jsonio.record_to_json(load_format2()))
    change(tree)
    with pytest.raises(fastpath._Slow):
        fastpath._QUICK_READ(tree)
    with pytest.raises(CorruptRecordError) as caught:
        jsonio.record_from_json(json.dumps(tree).encode())
    assert caught.value.path is not None


# -- The plain parse: duplicate keys found by counting them against the text -----------------


def _write(tree: Any, duplicate_at: int, counter: list[int], spaced: bool) -> str:
    """Canonical JSON text of ``tree``; the ``duplicate_at``-th object (in writing order) writes
    its first key twice (with the same value), ``spaced`` puts a space before every colon."""
    if isinstance(tree, dict):
        index = counter[0]
        counter[0] += 1
        colon = " :" if spaced else ":"
        items = [
            json.dumps(k, ensure_ascii=False) + colon + _write(v, duplicate_at, counter, spaced)
            for k, v in sorted(tree.items())
        ]
        if index == duplicate_at and items:
            items.insert(0, items[0])
        return "{" + ",".join(items) + "}"
    if isinstance(tree, list):
        return "[" + ",".join(_write(v, duplicate_at, counter, spaced) for v in tree) + "]"
    return json.dumps(tree, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(records, st.integers(0, 10_000), st.booleans())
def test_a_key_written_twice_in_any_object_is_refused(record: Any, position: int, spaced: bool):
    # covers: R-REC-4
    tree = json.loads(jsonio.record_to_json(record))
    objects = [0]
    _write(tree, -1, objects, False)
    candidates = [i for i in range(objects[0])]
    text = _write(tree, candidates[position % len(candidates)], [0], spaced)
    if text == _write(tree, -1, [0], spaced):
        return  # that object is empty: nothing to write twice
    with pytest.raises(CorruptRecordError) as caught:
        jsonio.record_from_json(text.encode())
    assert caught.value.rule == "R-REC-4"
    assert "twice" in str(caught.value)


@pytest.mark.parametrize(
    "name", [":", ":x", '":', " :", "a:b", "{", "}", "[", ",", "é:", "\\", '"', "x\n"]
)
def test_strings_that_look_like_keys_are_read_exactly(name: str) -> None:
    # covers: R-REC-4
    record = load_format2()
    record.version = name
    node = next(iter(record.scopes[record.root_scope].nodes.values()))
    node.outputs[0].name = name
    data = jsonio.record_to_json(record)
    assert jsonio.record_from_json(data) == record
    assert jsonio.record_from_json(json.dumps(json.loads(data), indent=1).encode()) == record


def test_a_duplicate_key_is_found_when_another_key_has_a_space_before_its_colon() -> None:
    # covers: R-REC-4
    # One key written twice adds a '":', a space before another key's colon hides one: the
    # count alone would match, so whitespace before a colon sends the text to the exact path.
    data = jsonio.record_to_json(load_format2())
    assert b'"Name":"rows"' in data and b'"RunID":' in data
    data = data.replace(b'"Name":"rows"', b'"Name":"rows","Name":"rows"', 1)
    data = data.replace(b'"RunID":', b'"RunID" :', 1)
    with pytest.raises(CorruptRecordError) as caught:
        jsonio.record_from_json(data)
    assert "twice" in str(caught.value)


# -- Records as the quick reader built them: the shape check need not run again -------------

CHANGES = [None, -1, 0, 2**63, 2**64, 1.5, True, "x", "é", "", [], {}, [1], {"x": 1}]


def _containers(tree: Any) -> list[Any]:
    """Every dict and list of a parsed record, the tree itself first."""
    found, pending = [], [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        children = node.values() if isinstance(node, dict) else node
        pending.extend(c for c in children if isinstance(c, dict | list))
    return found


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_what_the_quick_reader_builds_passes_the_shape_check(record: Any, data: Any) -> None:
    # covers: R-REC-4
    # A resume leaves the shape check out for a record the quick reader built: anything it
    # takes, one field or item of the text changed to a value of another type or range
    # included, must pass that check.
    tree = json.loads(jsonio.record_to_json(record))
    container = data.draw(st.sampled_from(_containers(tree)))
    if container:
        place = data.draw(
            st.sampled_from(
                sorted(container) if isinstance(container, dict) else range(len(container))
            )
        )
        container[place] = data.draw(st.sampled_from(CHANGES))
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        decoded = jsonio.record_from_json(text.encode())
    except CorruptRecordError:
        return
    if jsonio.is_as_read(decoded):
        assert fastpath._SHAPE_OK(decoded)


def test_only_the_object_the_quick_reader_built_counts_as_read() -> None:
    # covers: R-REC-4
    read = jsonio.record_from_json(jsonio.record_to_json(load_format2()))
    assert jsonio.is_as_read(read)
    assert not jsonio.is_as_read(attrs.evolve(read))  # a copy is not what the reader built
    # Text only the exact reader takes: a character outside the BMP written as an escaped
    # surrogate pair.
    record = attrs.evolve(read, version="v\U0001f600")
    tree = json.loads(jsonio.record_to_json(record))
    exact_read = jsonio.record_from_json(json.dumps(tree, sort_keys=True).encode())
    assert exact_read == record and not jsonio.is_as_read(exact_read)
    folded = jsonio.record_from_fold(Folded(jsonio.record_to_json(read), (), "a test"))
    assert folded == read and jsonio.is_as_read(folded)


def test_validate_fresh_checks_the_shape_of_a_record_not_built_by_the_quick_reader() -> None:
    # covers: R-REC-4
    from durable_core.records.integrity import validate_fresh

    read = jsonio.record_from_json(jsonio.record_to_json(load_format2()))
    validate_fresh(read)
    copy = attrs.evolve(read, version=7)
    with pytest.raises(CorruptRecordError) as caught:
        validate_fresh(copy)
    assert caught.value.path == "$.Version"
