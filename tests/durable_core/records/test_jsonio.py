"""The record's JSON layout: names, canonical bytes, strict reading with paths, safe writing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_core import (
    MAX_REVISION,
    AttemptState,
    CorruptRecordError,
    RunRecord,
    ScopeRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    record_from_json,
    record_to_json,
)
from durable_core.records import fields
from durable_core.records import path as paths
from tests.durable_core.records.samples import (
    CLEANUP,
    FETCH,
    FORMAT1,
    FORMAT2,
    ROOT,
    SPLIT1,
    STREAM,
    canonical,
    fixture_tree,
    load_format1,
    load_format2,
    records,
)

INT_MAX, UINT64_MAX, json_name = fields.INT_MAX, fields.UINT64_MAX, fields.json_name

# The seed's field names (seed 000 "数据模型"), spelled exactly as there, per object kind.
SEED_NAMES = {
    "RunRecord": {
        "Format",
        "RunID",
        "Revision",
        "Version",
        "Definition",
        "Inputs",
        "RootScope",
        "Scopes",
        "Attempts",
        "Streams",
        "Messages",
        "Managed",
    },
    "ScopeRecord": {"Graph", "Path", "Inputs", "Nodes", "Bindings"},
    "AttemptRecord": {"Parent", "NodeID", "Boundary", "Index", "Limit", "State"},
    "NodeRecord": {"NodeID", "Attempt", "Reason", "Outputs"},
    "ValueRecord": {"Name", "TypeID", "Version", "State", "Digest", "Data"},
    "StreamRecord": {
        "Scope",
        "NodeID",
        "Key",
        "Group",
        "Generation",
        "SourceID",
        "Resumable",
        "LastSequence",
        "AckedThrough",
        "Pending",
        "Cursor",
        "Terminal",
    },
}


def key_path(*segments: Any) -> str:
    return paths.render_path(paths.path_of(*segments))


def read_error(data: bytes) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        record_from_json(data)
    return info.value


# -- Fixtures and layout -----------------------------------------------------------------------


# covers: R-REC-2, R-REC-4, R-SCOPE-1, R-ATT-1, R-NODE-1, R-VAL-1, S-1, S-2, S-7
def test_format2_fixture_uses_the_seed_names_exactly():
    tree = json.loads(record_to_json(load_format2()))
    assert set(tree) == SEED_NAMES["RunRecord"]
    scope = tree["Scopes"][ROOT]
    assert set(scope) == SEED_NAMES["ScopeRecord"]
    assert set(tree["Attempts"][FETCH]) == SEED_NAMES["AttemptRecord"]
    node = scope["Nodes"]["fetch"]
    assert set(node) == SEED_NAMES["NodeRecord"]
    assert set(node["Outputs"][0]) == SEED_NAMES["ValueRecord"]  # no Stream: omitted when None
    stream_value = scope["Nodes"]["ticks"]["Outputs"][0]
    assert set(stream_value) == SEED_NAMES["ValueRecord"] | {"Stream"}
    assert set(stream_value["Stream"]) == {
        "SourceID",
        "Scope",
        "NodeID",
        "Key",
        "Attempt",
        "Capacity",
        "Terminal",
    }
    assert set(tree["Streams"][STREAM]) == SEED_NAMES["StreamRecord"]
    assert set(tree["Streams"][STREAM]["Pending"][0]) == {"Sequence", "Data", "Digest"}
    message = next(iter(tree["Messages"].values()))
    assert set(message) == {
        "Stream",
        "Group",
        "Sequence",
        "Parent",
        "NodeID",
        "Index",
        "Limit",
        "State",
    }
    assert set(next(iter(tree["Managed"].values()))) == {
        "Scope",
        "Parent",
        "NodeID",
        "State",
        "Values",
    }


# covers: R-REC-4
@pytest.mark.parametrize(
    ("attribute", "name"),
    [
        ("run_id", "RunID"),
        ("root_scope", "RootScope"),
        ("type_id", "TypeID"),
        ("node_id", "NodeID"),
        ("source_id", "SourceID"),
        ("acked_through", "AckedThrough"),
        ("last_sequence", "LastSequence"),
        ("format", "Format"),
    ],
)
def test_json_names_follow_the_go_spelling(attribute, name):
    assert json_name(attribute) == name


# covers: R-REC-4
def test_format2_fixture_decodes_to_typed_records_and_re_encodes_canonically():
    record = load_format2()
    assert record.format == 2 and record.revision == 17 and record.run_id == "order-42"
    attempt = record.attempts[SPLIT1]
    assert attempt.state is AttemptState.FAILED and attempt.index == 1 and attempt.limit == 3
    rows = record.scopes[ROOT].nodes["fetch"].outputs[0]
    assert rows.data == b'["a,1","b,2"]' and rows.state is ValueState.READY
    ticks = record.scopes[ROOT].nodes["ticks"].outputs[0]
    assert ticks.stream is not None and ticks.stream.terminal is StreamTerminal.COMPLETED
    assert record.streams[STREAM].terminal is StreamTerminal.OPEN
    assert record.streams[STREAM].cursor == b"offset=5"
    # The file is pretty-printed for reading; the encoder writes the same tree canonically.
    assert record_to_json(record) == canonical(fixture_tree(FORMAT2))


# covers: R-REC-1, R-REC-4
def test_format1_fixture_reads_with_go_compatible_defaults():
    tree = fixture_tree(FORMAT1)
    assert {"Streams", "Messages", "Managed"}.isdisjoint(tree)
    assert all("Bindings" not in scope for scope in tree["Scopes"].values())
    record = load_format1()
    assert record.format == 1
    assert record.streams == {} and record.messages == {} and record.managed == {}
    root = record.scopes[record.root_scope]
    assert root.bindings is False
    note = root.nodes["load"].outputs[1]
    assert note.state is ValueState.SKIPPED and note.data == b"" and note.stream is None
    again = record_from_json(record_to_json(record))
    assert again == record


# covers: R-REC-4
def test_output_is_compact_sorted_and_raw_utf8():
    record = load_format2()
    record.version = "été 🌍"
    data = record_to_json(record)
    assert b" " not in data.replace("été 🌍".encode(), b"")
    assert "été 🌍".encode() in data  # valid Unicode is kept, not \u-escaped
    tree = json.loads(data)

    def check_sorted(node: Any) -> None:
        if isinstance(node, dict):
            assert list(node) == sorted(node)
            for value in node.values():
                check_sorted(value)
        elif isinstance(node, list):
            for value in node:
                check_sorted(value)

    check_sorted(tree)


# covers: R-REC-4
def test_equal_records_built_in_different_orders_give_equal_bytes():
    a = load_format2()
    b = load_format2()
    b.attempts = dict(reversed(list(b.attempts.items())))
    b.scopes[ROOT].nodes = dict(reversed(list(b.scopes[ROOT].nodes.items())))
    assert a == b
    assert record_to_json(a) == record_to_json(b)


# covers: R-REC-2
def test_revision_bounds_on_read():
    tree = fixture_tree()
    tree["Revision"] = UINT64_MAX
    assert record_from_json(canonical(tree)).revision == MAX_REVISION == UINT64_MAX
    for bad in (0, UINT64_MAX + 1, -1):
        tree["Revision"] = bad
        error = read_error(canonical(tree))
        assert (error.path, error.rule) == ("$.Revision", "R-REC-2")
        assert "$.Revision" in str(error) and error.rule == "R-REC-2"


# covers: R-REC-4, B-FILE-5
def test_valid_surrogate_pairs_and_astral_characters_are_kept():
    text = canonical(fixture_tree()).replace(b'"order-42"', b'"order-\\ud83d\\ude00"')
    assert record_from_json(text).run_id == "order-😀"
    raw = canonical(fixture_tree()).replace(b'"order-42"', '"order-😀"'.encode())
    assert record_from_json(raw).run_id == "order-😀"


# -- Strict reading: each refusal names its path ------------------------------------------------


def replace(old: bytes, new: bytes) -> Any:
    def mutate(data: bytes) -> bytes:
        assert old in data, old
        return data.replace(old, new, 1)

    return mutate


def edit(change: Any) -> Any:
    def mutate(data: bytes) -> bytes:
        tree = json.loads(data)
        change(tree)
        return canonical(tree)

    return mutate


def node(tree: Any, name: str = "fetch") -> Any:
    return tree["Scopes"][ROOT]["Nodes"][name]


FETCH_OUT = ("Scopes", (ROOT,), "Nodes", ("fetch",), "Outputs", 0)
TICKS_STREAM = ("Scopes", (ROOT,), "Nodes", ("ticks",), "Outputs", 0, "Stream")

BAD_JSON = [
    # (id, mutation of the canonical fixture bytes, expected path, expected rule)
    ("invalid-utf8-in-string", replace(b'"order-42"', b'"order-\xff"'), "$.RunID", "R-REC-4"),
    (
        "invalid-utf8-in-key",
        replace(b'"fetch":{', b'"fe\xfftch":{'),
        key_path("Scopes", (ROOT,), "Nodes", ("fe\udcfftch",)),
        "R-REC-4",
    ),
    ("invalid-utf8-outside-strings", lambda d: d[:-1] + b"\xff}", "$", "R-REC-4"),
    ("unpaired-high-surrogate", replace(b'"order-42"', b'"order\\ud800"'), "$.RunID", "R-REC-4"),
    ("unpaired-low-surrogate", replace(b'"2024.06"', b'"\\uDC00x"'), "$.Version", "R-REC-4"),
    ("reversed-pair", replace(b'"2024.06"', b'"\\udc00\\ud800"'), "$.Version", "R-REC-4"),
    (
        "unpaired-surrogate-in-key",
        replace(f'"{FETCH}":{{'.encode(), f'"{FETCH}\\ud800":{{'.encode()),
        key_path("Attempts", (FETCH + "\ud800",)),
        "R-REC-4",
    ),
    (
        "unpaired-surrogate-deep",
        replace(b'"Name":"rows"', b'"Name":"r\\udfffows"'),
        key_path(*FETCH_OUT, "Name"),
        "R-REC-4",
    ),
    ("unknown-top-field", edit(lambda t: t.update(Extra=1)), "$.Extra", "R-REC-4"),
    (
        "unknown-nested-field",
        edit(lambda t: node(t)["Outputs"][0].update(Checksum="x")),
        key_path(*FETCH_OUT, "Checksum"),
        "R-REC-4",
    ),
    ("case-differs", edit(lambda t: t.update(RunId=t.pop("RunID"))), "$.RunId", "R-REC-4"),
    ("trailing-garbage", lambda d: d + b" x", "$", "R-REC-4"),
    ("second-value", lambda d: d + b"{}", "$", "R-REC-4"),
    ("truncated", lambda d: d[:-1], "$", "R-REC-4"),
    ("empty", lambda d: b"", "$", "R-REC-4"),
    ("bom", lambda d: b"\xef\xbb\xbf" + d, "$", "R-REC-4"),
    ("raw-control-char", replace(b'"2024.06"', b'"2024\n06"'), "$", "R-REC-4"),
    ("duplicate-top-key", lambda d: b'{"RunID":"x",' + d[1:], "$.RunID", "R-REC-4"),
    (
        "duplicate-field-deep",
        replace(b'"Name":"rows"', b'"Name":"rows","Name":"rows"'),
        key_path(*FETCH_OUT, "Name"),
        "R-REC-4",
    ),
    (
        "duplicate-map-key",
        replace(b'"Nodes":{"cleanup":', b'"Nodes":{"cleanup":{},"cleanup":'),
        key_path("Scopes", (ROOT,), "Nodes", ("cleanup",)),
        "R-REC-4",
    ),
    ("top-level-array", lambda d: b"[" + d + b"]", "$", "R-REC-4"),
    ("top-level-string", lambda d: b'"record"', "$", "R-REC-4"),
    ("top-level-null", lambda d: b"null", "$", "R-REC-4"),
    (
        "bool-is-not-int",
        edit(lambda t: t["Attempts"][SPLIT1].update(Index=True)),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    (
        "float-is-not-int",
        edit(lambda t: t["Attempts"][SPLIT1].update(Limit=3.0)),
        key_path("Attempts", (SPLIT1,), "Limit"),
        "R-REC-4",
    ),
    (
        "exponent-is-not-int",
        replace(b'"Capacity":16', b'"Capacity":1.6e1'),
        key_path(*TICKS_STREAM, "Capacity"),
        "R-REC-4",
    ),
    (
        "string-is-not-int",
        edit(lambda t: t["Streams"][STREAM].update(Generation="2")),
        key_path("Streams", (STREAM,), "Generation"),
        "R-REC-4",
    ),
    (
        "int-is-not-bool",
        edit(lambda t: t["Streams"][STREAM].update(Resumable=1)),
        key_path("Streams", (STREAM,), "Resumable"),
        "R-REC-4",
    ),
    ("int-is-not-string", edit(lambda t: t.update(RunID=42)), "$.RunID", "R-REC-4"),
    ("null-is-not-string", edit(lambda t: t.update(Version=None)), "$.Version", "R-REC-4"),
    ("array-is-not-map", edit(lambda t: t.update(Scopes=[])), "$.Scopes", "R-REC-4"),
    (
        "object-is-not-list",
        edit(lambda t: node(t).update(Outputs={})),
        key_path("Scopes", (ROOT,), "Nodes", ("fetch",), "Outputs"),
        "R-REC-4",
    ),
    (
        "pending-is-not-a-value-state",
        edit(lambda t: node(t)["Outputs"][0].update(State="pending")),
        key_path(*FETCH_OUT, "State"),
        "R-REC-4",
    ),
    (
        "unknown-attempt-state",
        edit(lambda t: t["Attempts"][FETCH].update(State="Confirmed")),
        key_path("Attempts", (FETCH,), "State"),
        "R-REC-4",
    ),
    (
        "negative-int",
        edit(lambda t: t["Attempts"][SPLIT1].update(Index=-1)),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    (
        "int-beyond-int64",
        edit(lambda t: t["Streams"][STREAM].update(LastSequence=INT_MAX + 1)),
        key_path("Streams", (STREAM,), "LastSequence"),
        "R-REC-4",
    ),
    (
        "int-beyond-uint64",  # the quick parser reads it as a float: the exact path names it
        edit(lambda t: t["Attempts"][SPLIT1].update(Index=2**70)),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    (
        "float-for-int",
        edit(lambda t: t["Attempts"][SPLIT1].update(Index=1.0)),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    ("huge-int-literal", replace(b'"Format":2', b'"Format":' + b"9" * 5000), "$", "R-REC-4"),
    ("revision-zero", edit(lambda t: t.update(Revision=0)), "$.Revision", "R-REC-2"),
    ("revision-overflow", edit(lambda t: t.update(Revision=2**64)), "$.Revision", "R-REC-2"),
    ("format-newer", edit(lambda t: t.update(Format=3, Future={})), "$.Format", "R-REC-1"),
    ("format-zero", edit(lambda t: t.update(Format=0)), "$.Format", "R-REC-1"),
    ("format-not-int", edit(lambda t: t.update(Format="2")), "$.Format", "R-REC-1"),
    (
        "nan",
        replace(b'"Capacity":16', b'"Capacity":NaN'),
        key_path(*TICKS_STREAM, "Capacity"),
        "R-REC-4",
    ),
    (
        "infinity",
        replace(b'"Capacity":16', b'"Capacity":Infinity'),
        key_path(*TICKS_STREAM, "Capacity"),
        "R-REC-4",
    ),
    (
        "minus-infinity",
        replace(b'"Generation":2', b'"Generation":-Infinity'),
        key_path("Streams", (STREAM,), "Generation"),
        "R-REC-4",
    ),
    (
        "base64-missing-padding",
        edit(lambda t: node(t)["Outputs"][0].update(Data="QQ")),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "base64-non-canonical-bits",
        edit(lambda t: node(t)["Outputs"][0].update(Data="QR==")),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "base64-urlsafe",
        edit(lambda t: node(t)["Outputs"][0].update(Data="-_8=")),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "base64-newline",
        edit(lambda t: node(t)["Outputs"][0].update(Data="QUJD\nREVG")),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "base64-non-ascii",
        edit(lambda t: t["Streams"][STREAM].update(Cursor="QUJé")),
        key_path("Streams", (STREAM,), "Cursor"),
        "R-REC-4",
    ),
    (
        "data-is-not-a-string",
        edit(lambda t: node(t)["Outputs"][0].update(Data=[1, 2])),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "missing-required-scalar",
        edit(lambda t: node(t)["Outputs"][0].pop("Digest")),
        key_path(*FETCH_OUT, "Digest"),
        "R-REC-4",
    ),
    ("missing-run-id", edit(lambda t: t.pop("RunID")), "$.RunID", "R-REC-4"),
    ("missing-revision", edit(lambda t: t.pop("Revision")), "$.Revision", "R-REC-4"),
    (
        "missing-attempt-state",
        edit(lambda t: t["Attempts"][CLEANUP].pop("State")),
        key_path("Attempts", (CLEANUP,), "State"),
        "R-REC-4",
    ),
    ("deeply-nested", lambda d: b"[" * 100_000 + b"]" * 100_000, "$", "R-REC-4"),
]


# covers: R-REC-1, R-REC-2, R-REC-4, R-VAL-4, B-FILE-5
@pytest.mark.parametrize(
    ("mutate", "path", "rule"), [case[1:] for case in BAD_JSON], ids=[case[0] for case in BAD_JSON]
)
def test_bad_json_is_refused_naming_path_and_rule(mutate, path, rule):
    data = mutate(canonical(fixture_tree()))
    error = read_error(data)
    assert error.path == path
    assert error.rule == rule
    assert f"at {path}:" in str(error) and rule not in str(error)  # the rule is an attribute


# covers: R-REC-4
@pytest.mark.parametrize("literal", [b"1e400", b"-1e400", b"1.5", b"NaN", b"Infinity"])
def test_a_number_the_quick_parser_refuses_is_named_by_the_exact_path(literal):
    data = canonical(fixture_tree())
    assert data.count(b'"Index":1,') >= 1
    error = read_error(data.replace(b'"Index":1,', b'"Index":' + literal + b",", 1))
    assert error.rule == "R-REC-4"
    assert error.path is not None and error.path.endswith(".Index")
    assert "expected an integer" in str(error)


# covers: R-REC-4, B-FILE-5
def test_invalid_utf8_message_gives_the_byte_offset():
    data = canonical(fixture_tree())
    offset = data.index(b"order-42") + 6
    error = read_error(data[:offset] + b"\xc3\x28" + data[offset + 2 :])
    assert error.path == "$.RunID"
    assert f"byte offset {offset}" in str(error)


# -- Missing fields, nulls: the documented decisions ----------------------------------------------


# covers: R-REC-1, R-REC-4
def test_missing_maps_lists_and_optionals_read_as_empty_and_null_where_go_writes_it():
    tree = fixture_tree()
    for name in ("Streams", "Messages", "Managed"):
        del tree[name]
    del tree["Scopes"][ROOT]["Bindings"]
    del tree["Scopes"][ROOT]["Nodes"]["ticks"]["Outputs"][0]["Stream"]
    tree["Scopes"][ROOT]["Nodes"]["split"]["Outputs"][1]["Data"] = None  # Go's nil []byte
    tree["Attempts"] = None  # Go's nil map
    tree["Scopes"][ROOT]["Nodes"]["fetch"]["Outputs"] = None  # Go's nil slice
    record = record_from_json(canonical(tree))
    assert record.streams == {} and record.messages == {} and record.managed == {}
    assert record.attempts == {}
    assert record.scopes[ROOT].bindings is False
    assert record.scopes[ROOT].nodes["ticks"].outputs[0].stream is None
    assert record.scopes[ROOT].nodes["split"].outputs[1].data == b""
    assert record.scopes[ROOT].nodes["fetch"].outputs == []


# covers: R-REC-4
def test_null_stream_and_state_read_as_absent():
    tree = fixture_tree()
    node(tree)["Outputs"][0]["Stream"] = None
    next(iter(tree["Managed"].values()))["State"] = None
    record = record_from_json(canonical(tree))
    assert record.scopes[ROOT].nodes["fetch"].outputs[0].stream is None
    assert next(iter(record.managed.values())).state is None
    assert (
        "State"
        not in json.loads(record_to_json(record))["Managed"][
            "count/" + record.managed[next(iter(record.managed))].parent
        ]
    )


# -- Writing -------------------------------------------------------------------------------------


def write_error(record: RunRecord) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        record_to_json(record)
    return info.value


BAD_WRITES = [
    ("lone-surrogate-run-id", lambda r: setattr(r, "run_id", "run\ud800"), "$.RunID", "R-REC-4"),
    (
        "lone-surrogate-map-key",
        lambda r: r.scopes[ROOT].nodes.update({"x\udc80": r.scopes[ROOT].nodes["fetch"]}),
        key_path("Scopes", (ROOT,), "Nodes", ("x\udc80",)),
        "R-REC-4",
    ),
    (
        "lone-surrogate-output-name",
        lambda r: setattr(r.scopes[ROOT].nodes["fetch"].outputs[0], "name", "\udfff"),
        key_path(*FETCH_OUT, "Name"),
        "R-REC-4",
    ),
    (
        "lone-surrogate-group",
        lambda r: setattr(r.streams[STREAM], "group", "g\ud801"),
        key_path("Streams", (STREAM,), "Group"),
        "R-REC-4",
    ),
    ("revision-zero", lambda r: setattr(r, "revision", 0), "$.Revision", "R-REC-2"),
    ("format-newer", lambda r: setattr(r, "format", 3), "$.Format", "R-REC-1"),
    ("format-zero", lambda r: setattr(r, "format", 0), "$.Format", "R-REC-1"),
    ("revision-overflow", lambda r: setattr(r, "revision", 2**64), "$.Revision", "R-REC-2"),
    (
        "negative-index",
        lambda r: setattr(r.attempts[SPLIT1], "index", -1),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    (
        "str-index",
        lambda r: setattr(r.attempts[SPLIT1], "index", "1"),
        key_path("Attempts", (SPLIT1,), "Index"),
        "R-REC-4",
    ),
    (
        "bool-limit",
        lambda r: setattr(r.attempts[SPLIT1], "limit", True),
        key_path("Attempts", (SPLIT1,), "Limit"),
        "R-REC-4",
    ),
    (
        "bytearray-data",
        lambda r: setattr(r.scopes[ROOT].nodes["fetch"].outputs[0], "data", bytearray(b"x")),
        key_path(*FETCH_OUT, "Data"),
        "R-REC-4",
    ),
    (
        "unknown-state",
        lambda r: setattr(r.attempts[FETCH], "state", "done"),
        key_path("Attempts", (FETCH,), "State"),
        "R-REC-4",
    ),
    (
        "non-str-key",
        lambda r: r.attempts.update({1: r.attempts[FETCH]}),
        "$.Attempts",
        "R-REC-4",
    ),
    (
        "wrong-record-class",
        lambda r: r.scopes[ROOT].nodes.update(fetch=r.scopes[ROOT]),
        key_path("Scopes", (ROOT,), "Nodes", ("fetch",)),
        "R-REC-4",
    ),
]


# covers: R-REC-2, R-REC-4, B-FILE-5
@pytest.mark.parametrize(
    ("mutate", "path", "rule"), [c[1:] for c in BAD_WRITES], ids=[c[0] for c in BAD_WRITES]
)
def test_writing_refuses_what_could_not_be_read_back(mutate, path, rule):
    record = load_format2()
    mutate(record)
    error = write_error(record)
    assert (error.path, error.rule) == (path, rule)
    assert f"at {path}:" in str(error) and "Nothing was written" in str(error)


# covers: R-REC-4
def test_plain_strings_for_enum_fields_are_written_as_their_values():
    record = load_format2()
    record.attempts[FETCH].state = "confirmed"  # type: ignore[assignment]
    assert record_from_json(record_to_json(record)) == load_format2()


# -- Properties ------------------------------------------------------------------------------------


# covers: R-REC-4
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_round_trip_and_byte_stable_re_encoding(record):
    data = record_to_json(record)
    again = record_from_json(data)
    assert again == record
    assert record_to_json(again) == data


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# covers: R-REC-4
@settings(max_examples=200)
@given(json_values)
def test_arbitrary_json_never_raises_anything_but_corrupt_record(value):
    data = json.dumps(value).encode()
    with pytest.raises(CorruptRecordError):
        record_from_json(data)


# covers: R-REC-4
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 8), st.binary(max_size=4)),
        min_size=1,
        max_size=4,
    )
)
def test_damaged_bytes_are_refused_or_read_into_a_writable_record(edits):
    data = bytearray(canonical(fixture_tree()))
    for position, cut, inserted in edits:
        position %= len(data) + 1
        data[position : position + cut] = inserted
    try:
        record = record_from_json(bytes(data))
    except CorruptRecordError:
        return
    # Whatever is accepted can be written again and reads back equal.
    assert record_from_json(record_to_json(record)) == record


# covers: R-REC-4
def test_record_types_defaults_need_no_json():
    # The record classes stay plain data: constructing one never touches the codec.
    value = ValueRecord(name="x")
    assert value.state is ValueState.READY and value.stream is None
    assert ScopeRecord(graph="g").nodes == {}
