"""Record deltas: folding them into a complete record, and refusing broken ones."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import (
    AttemptRecord,
    AttemptState,
    CorruptRecordError,
    EncodedRecord,
    NodeRecord,
    copy_record,
    record_to_json,
)
from durable_core.records.delta import (
    Delta,
    apply_delta,
    canonical_json,
    encode_delta,
    read_delta,
)
from durable_core.testing import sample_record


def _diff(
    old: dict[str, Any], new: dict[str, Any], path: tuple[str, ...] = ()
) -> tuple[list[tuple[tuple[str, ...], Any]], list[tuple[str, ...]]]:
    """A delta's Set and Unset turning ``old`` into ``new`` (recursing into objects)."""
    sets: list[tuple[tuple[str, ...], Any]] = []
    unsets: list[tuple[str, ...]] = []
    for key, value in new.items():
        if key not in old:
            sets.append(((*path, key), value))
        elif isinstance(value, dict) and isinstance(old[key], dict):
            more_sets, more_unsets = _diff(old[key], value, (*path, key))
            sets += more_sets
            unsets += more_unsets
        elif old[key] != value or type(old[key]) is not type(value):
            sets.append(((*path, key), value))
    unsets += [(*path, key) for key in old if key not in new]
    return sets, unsets


_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_tree = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)
_objects = st.dictionaries(st.text(max_size=3), _tree, max_size=5)


@settings(max_examples=200, deadline=None)
@given(old=_objects, new=_objects, revision=st.integers(0, 2**64 - 2))
def test_a_delta_turns_one_tree_into_the_next(old, new, revision) -> None:
    # covers: R-STORE-3
    old = {**old, "Revision": revision}
    new = {**new, "Revision": revision + 1}
    sets, unsets = _diff(old, new)
    delta = encode_delta(revision, revision + 1, sets, unsets)
    assert apply_delta(canonical_json(old), delta) == canonical_json(new)


def _record_delta(old, new) -> bytes:
    old_tree = json.loads(record_to_json(old))
    new_tree = json.loads(record_to_json(new))
    sets, unsets = _diff(old_tree, new_tree)
    return encode_delta(old.revision, new.revision, sets, unsets)


def test_a_chain_of_record_deltas_gives_the_last_record_byte_for_byte() -> None:
    # covers: R-REC-4, R-STORE-3
    first = sample_record("run-1", 1)
    versions = [first]
    for step in range(5):
        record = copy_record(versions[-1])
        record.revision += 1
        scope_id = sorted(record.scopes)[0]
        record.attempts[f"{step:032x}"] = AttemptRecord(parent=scope_id, node_id=f"n{step}")
        record.scopes[scope_id].nodes[f"n{step}"] = NodeRecord(
            node_id=f"n{step}", attempt=f"{step:032x}"
        )
        if step == 3:
            del record.attempts[f"{0:032x}"]
            record.attempts[f"{1:032x}"].state = AttemptState.FAILED
        versions.append(record)
    deltas = [_record_delta(a, b) for a, b in itertools.pairwise(versions)]
    assert apply_delta(record_to_json(first), *deltas) == record_to_json(versions[-1])
    assert apply_delta(record_to_json(versions[2]), *deltas[2:]) == record_to_json(versions[-1])
    assert apply_delta(record_to_json(first)) == record_to_json(first)


def test_read_delta_gives_the_parts() -> None:
    data = encode_delta(4, 5, [(("Attempts", "a"), {"State": "active"})], [("Streams", "s")])
    assert read_delta(data) == Delta(
        base=4,
        revision=5,
        set=((("Attempts", "a"), {"State": "active"}),),
        unset=(("Streams", "s"),),
    )
    assert read_delta(data).to_json() == data


def test_a_delta_for_another_revision_breaks_the_chain() -> None:
    complete = canonical_json({"Revision": 3, "Attempts": {}})
    with pytest.raises(CorruptRecordError, match=r"applies to revision 4.*at revision 3.*broken"):
        apply_delta(complete, encode_delta(4, 5))
    # The second of two deltas must follow the first.
    with pytest.raises(CorruptRecordError, match="chain of saves is broken"):
        apply_delta(complete, encode_delta(3, 4), encode_delta(3, 4))


def test_a_set_without_its_parent_object_is_refused() -> None:
    complete = canonical_json({"Revision": 1, "Scopes": {"s": {"Nodes": {}}}})
    with pytest.raises(CorruptRecordError, match=r"no object at \['Scopes'\]\['t'\]"):
        apply_delta(complete, encode_delta(1, 2, [(("Scopes", "t", "Nodes", "n"), {})]))
    ok = apply_delta(complete, encode_delta(1, 2, [(("Scopes", "s", "Nodes", "n"), {})]))
    assert json.loads(ok)["Scopes"]["s"]["Nodes"] == {"n": {}}


def test_an_unset_of_a_missing_key_is_refused() -> None:
    complete = canonical_json({"Revision": 1, "Attempts": {"a": {}}})
    with pytest.raises(CorruptRecordError, match=r"deletes \['Attempts', 'b'\]"):
        apply_delta(complete, encode_delta(1, 2, unset=[("Attempts", "b")]))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\xff", "not UTF-8 JSON"),
        (b"{", "not UTF-8 JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"Base":1,"Revision":2,"Set":[]}', "exactly the keys"),
        (b'{"Base":1,"Revision":2,"Set":[],"Unset":[],"X":1}', "exactly the keys"),
        (b'{"Base":1,"Revision":3,"Set":[],"Unset":[]}', "Revision must be Base \\+ 1"),
        (b'{"Base":-1,"Revision":0,"Set":[],"Unset":[]}', "Base must be a revision"),
        (b'{"Base":true,"Revision":2,"Set":[],"Unset":[]}', "Base must be a revision"),
        (b'{"Base":1,"Revision":2,"Set":{},"Unset":[]}', "Set must be a list"),
        (b'{"Base":1,"Revision":2,"Set":[[["a"]]],"Unset":[]}', r"Set\[0\] must be a"),
        (b'{"Base":1,"Revision":2,"Set":[[[],1]],"Unset":[]}', "non-empty list of object keys"),
        (b'{"Base":1,"Revision":2,"Set":[[["a",1],1]],"Unset":[]}', "non-empty list"),
        (b'{"Base":1,"Revision":2,"Set":[],"Unset":"a"}', "Unset must be a list"),
        (b'{"Base":1,"Revision":2,"Set":[],"Unset":[[]]}', r"Unset\[0\] must be"),
    ],
)
def test_a_malformed_delta_is_a_corrupt_record_error(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptRecordError, match=problem) as caught:
        read_delta(data)
    assert "restore the run" in str(caught.value)
    with pytest.raises(CorruptRecordError, match=problem):
        apply_delta(canonical_json({"Revision": 1}), data)


def test_a_complete_record_that_is_not_json_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="not UTF-8 JSON"):
        apply_delta(b"{oops", encode_delta(1, 2))
    with pytest.raises(CorruptRecordError, match="not a JSON object"):
        apply_delta(b"[1]", encode_delta(1, 2))


def test_encoded_record_computes_its_bytes_once_and_only_when_asked() -> None:
    calls = []

    def encode() -> bytes:
        calls.append(1)
        return b"{}"

    encoded = EncodedRecord(encode, delta=b"d")
    assert calls == []
    assert "not encoded yet" in repr(encoded)
    assert encoded.delta == b"d"
    assert encoded.data == b"{}"
    assert encoded.data == b"{}"
    assert calls == [1]
    assert EncodedRecord(b"xyz").data == b"xyz"
    assert EncodedRecord(b"xyz").delta is None


def test_a_key_written_twice_is_refused_in_the_complete_record_and_in_a_delta() -> None:
    # covers: R-REC-4, R-STORE-2
    # json.loads alone keeps the last of two equal keys: the fold must refuse them instead
    with pytest.raises(CorruptRecordError, match="appears twice"):
        apply_delta(b'{"Revision":1,"Streams":{},"Streams":{}}', encode_delta(1, 2))
    twice = b'{"Base":1,"Base":1,"Revision":2,"Set":[],"Unset":[]}'
    with pytest.raises(CorruptRecordError, match="appears twice"):
        read_delta(twice)
    nested = b'{"Base":1,"Revision":2,"Set":[[["a"],{"x":1,"x":2}]],"Unset":[]}'
    with pytest.raises(CorruptRecordError, match="appears twice"):
        apply_delta(canonical_json({"Revision": 1, "a": {}}), nested)


# -- Splices: a list of sequence-ordered objects changed in part ------------------------------

_HEAD = b'{"Base":1,"Revision":2,"Set":[],"Splice":%s,"Unset":[]}'
_PENDING = {"Revision": 1, "S": {"e": {"Pending": [{"Sequence": n} for n in (2, 3, 5, 8)]}}}


def _spliced(drop: list[int], append: list[int]) -> list[int]:
    delta = encode_delta(
        1, 2, splice=[(("S", "e", "Pending"), drop, [{"Sequence": n} for n in append])]
    )
    folded = json.loads(apply_delta(canonical_json(_PENDING), delta))
    return [item["Sequence"] for item in folded["S"]["e"]["Pending"]]


# covers: R-STORE-3, S-2
def test_a_splice_drops_sequences_then_appends_past_the_last() -> None:
    assert _spliced([2, 3], []) == [5, 8]  # the front: acknowledged in order
    assert _spliced([3, 8], [9]) == [2, 5, 9]  # out of order, and a new element
    assert _spliced([], [9, 12]) == [2, 3, 5, 8, 9, 12]
    assert _spliced([2, 3, 5, 8], [1]) == [1]  # emptied: anything may follow


def test_a_delta_without_a_splice_is_written_as_before() -> None:
    assert encode_delta(1, 2) == b'{"Base":1,"Revision":2,"Set":[],"Unset":[]}'
    data = encode_delta(1, 2, splice=[(("a",), [1], [])])
    assert data == b'{"Base":1,"Revision":2,"Set":[],"Splice":[[["a"],[1],[]]],"Unset":[]}'
    assert read_delta(data).to_json() == data


# covers: R-STORE-3, R-REC-4
@pytest.mark.parametrize(
    ("splice", "problem"),
    [
        (b"[]", "Splice, when present, must be a non-empty list"),
        (b"{}", "Splice, when present, must be a non-empty list"),
        (b'[[["a"],[1]]]', r"Splice\[0\] must be a \[path, drop, append\] triple"),
        (b"[[[],[1],[]]]", r"the path of Splice\[0\] must be a non-empty list"),
        (b'[[["a"],[0],[]]]', r"drop list of Splice\[0\] must hold sequences"),
        (b'[[["a"],[true],[]]]', r"drop list of Splice\[0\] must hold sequences"),
        (b'[[["a"],{"1":1},[]]]', r"drop list of Splice\[0\] must hold sequences"),
        (b'[[["a"],[3,3],[]]]', r"drop list of Splice\[0\] must increase strictly"),
        (b'[[["a"],[],[1]]]', r"append list of Splice\[0\] must hold objects"),
        (b'[[["a"],[],[{"Sequence":"1"}]]]', r"append list of Splice\[0\] must hold objects"),
        (b'[[["a"],[],[{"Sequence":4},{"Sequence":2}]]]', "appended sequences .* increase"),
        (b'[[["a"],[],[]]]', r"Splice\[0\] changes nothing"),
    ],
)
def test_a_malformed_splice_is_a_corrupt_record_error(splice: bytes, problem: str) -> None:
    data = _HEAD % splice
    with pytest.raises(CorruptRecordError, match=problem) as caught:
        read_delta(data)
    assert "restore the run" in str(caught.value)


# covers: R-STORE-3, R-REC-4
@pytest.mark.parametrize(
    ("tree", "splice", "problem"),
    [
        (_PENDING, b'[[["S","e","Pending"],[4],[]]]', "drops sequence 4 .* does not hold"),
        (_PENDING, b'[[["S","e","Pending"],[],[{"Sequence":8}]]]', "not past its last one"),
        (_PENDING, b'[[["S","x","Pending"],[2],[]]]', "no object at"),
        (_PENDING, b'[[["S","e","Other"],[2],[]]]', "holds no list there"),
        ({"Revision": 1, "L": [1, 2]}, b'[[["L"],[1],[]]]', "integer sequences"),
        ({"Revision": 1, "L": [{"Seq": 1}]}, b'[[["L"],[],[{"Sequence":3}]]]', "integer sequences"),
    ],
)
def test_a_splice_that_does_not_fit_the_record_is_refused(
    tree: dict[str, Any], splice: bytes, problem: str
) -> None:
    with pytest.raises(CorruptRecordError, match=problem):
        apply_delta(canonical_json(tree), _HEAD % splice)


def _outcome(read: Any) -> Any:
    try:
        return "record", record_to_json(read())
    except CorruptRecordError as exc:
        return "refused", str(exc), exc.path, exc.rule


_FOLD_CHANGES = {
    "usual": lambda tree: None,
    "escaped string": lambda tree: tree["Attempts"].update(
        {"e" * 32: {**next(iter(tree["Attempts"].values())), "NodeID": 'say "hi"'}}
    ),
    "float for an int": lambda tree: next(iter(tree["Attempts"].values())).update(Index=1.0),
    "int past 64 bits": lambda tree: next(iter(tree["Attempts"].values())).update(Index=2**70),
    "unknown field": lambda tree: tree.update(Extra=1),
    "missing field": lambda tree: tree.pop("RunID"),
    "newer format": lambda tree: tree.update(Format=99),
    "wrong type": lambda tree: tree.update(Attempts=[]),
}


# covers: R-REC-4, R-STORE-3
@pytest.mark.parametrize("change", list(_FOLD_CHANGES), ids=list(_FOLD_CHANGES))
def test_a_fold_decoded_from_its_tree_equals_the_fold_decoded_from_its_bytes(change) -> None:
    from durable_core.records.delta import Folded
    from durable_core.store.checks import decode_stored

    first = sample_record("run-1", 1)
    second = copy_record(first)
    second.revision += 1
    old = json.loads(record_to_json(first))
    new = json.loads(record_to_json(second))
    _FOLD_CHANGES[change](new)
    sets, unsets = _diff(old, new)
    delta = encode_delta(1, 2, sets, unsets)
    complete = record_to_json(first)
    folded = Folded(complete, [delta], "the record of here and its saved deltas")
    by_tree = _outcome(lambda: decode_stored("run-1", folded, "here"))
    by_bytes = _outcome(lambda: decode_stored("run-1", apply_delta(complete, delta), "here"))
    assert by_tree == by_bytes
    assert (by_tree[0] == "record") is (change in ("usual", "escaped string"))
    assert folded.escaped() is (change == "escaped string")


# covers: R-REC-4, R-STORE-3
def test_a_fold_that_does_not_apply_names_the_place_it_was_read_from() -> None:
    from durable_core.records.delta import Folded
    from durable_core.store.checks import decode_stored

    complete = record_to_json(sample_record("run-1", 1))
    broken = encode_delta(5, 6, [(("Revision",), 6)])  # not from the stored revision
    with pytest.raises(CorruptRecordError) as apply_error:
        apply_delta(complete, broken)
    folded = Folded(complete, [broken], "the record of here and its saved deltas")
    with pytest.raises(CorruptRecordError) as decode_error:
        decode_stored("run-1", folded, "here")
    assert str(decode_error.value) == (
        f"the record of here and its saved deltas do not fold into a record: {apply_error.value}"
    )
    assert folded.data  # the bytes are still there to ask for, and refused the same way
    with pytest.raises(CorruptRecordError):
        folded.data()


# covers: R-REC-4, R-STORE-3
def test_a_delta_holding_a_lone_surrogate_is_refused_as_a_corrupt_record() -> None:
    from durable_core.records.delta import Folded
    from durable_core.store.checks import decode_stored

    complete = record_to_json(sample_record("run-1", 1))
    delta = b'{"Base":1,"Revision":2,"Set":[[["Version"],"\\ud800"]],"Unset":[]}'
    with pytest.raises(CorruptRecordError, match="lone surrogate"):
        apply_delta(complete, delta)
    folded = Folded(complete, [delta], "the record of here and its saved deltas")
    with pytest.raises(CorruptRecordError, match="lone surrogate") as error:
        folded.data()
    assert str(error.value).startswith("the record of here and its saved deltas fold into")
    with pytest.raises(CorruptRecordError) as decoded:
        decode_stored("run-1", folded, "here")
    assert "is not a valid run record: run record at $.Version:" in str(decoded.value)
