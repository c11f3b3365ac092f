"""Shared samples for the record tests: the fixture files, their ids, and hypothesis strategies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from hypothesis import strategies as st

from durable_core import (
    AttemptRecord,
    AttemptState,
    ManagedRecord,
    MessageAttemptRecord,
    NodeReason,
    NodeRecord,
    PendingMessageRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    record_from_json,
)
from durable_core.records import fields

INT_MAX, UINT64_MAX = fields.INT_MAX, fields.UINT64_MAX

FIXTURES = Path(__file__).parent / "fixtures"
FORMAT2 = FIXTURES / "record_format2.json"
FORMAT1 = FIXTURES / "record_format1.json"

# Ids used in record_format2.json.
ROOT = "3f9c1a6be2d84f07a5c1e0b9d7f26a41"
FETCH = "8d2e4f1a0b3c4d5e6f708192a3b4c5d6"
SPLIT = "1b7f3e9a2c4d6e8f0a1b2c3d4e5f6071"
SPLIT1 = "c4e1a9f07b2d4e6c8a0b1d3f5e7092a4"
SPLIT2 = "e7a3c5b91d0f4e2a6c8b0d1f3a5c7e92"
CLEANUP = "2a4c6e8f0b1d3f5a7c9e1b3d5f7a9c0e"
REPORT = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
REPORT1 = "5f1e2d3c4b5a69788796a5b4c3d2e1f0"
REPORT2 = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
RENDER1 = "6c5b4a39281706f5e4d3c2b1a0f9e8d7"
RENDER2 = "d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6"
TICKS = "47b2e9d1c3a5f7e0b2d4f6a8c0e2b4d6"
COUNT = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
STREAM = "ticks:count"
MSG1_FAILED = "7a6b5c4d3e2f10ab9c8d7e6f5a4b3c2d"
MSG1_CONFIRMED = "b8c9dae0f1a2b3c4d5e6f708192a3b4c"
MSG2_CONFIRMED = "2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"
MSG3_ACTIVE = "d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4"
MANAGED = "count/" + COUNT

DEFINITION2 = {
    "orders": {
        "fetch": ["rows"],
        "split": ["lines", "errors"],
        "cleanup": ["removed"],
        "report": ["summary"],
        "ticks": ["ticks"],
        "count": ["total"],
    },
    "report": {"render": ["page"]},
}
DEFINITION1 = {"nightly": {"load": ["count", "note"], "publish": ["url"]}}


def load_format2() -> RunRecord:
    return record_from_json(FORMAT2.read_bytes())


def load_format1() -> RunRecord:
    return record_from_json(FORMAT1.read_bytes())


def fixture_tree(path: Path = FORMAT2) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def canonical(tree: Any) -> bytes:
    """The canonical encoding of a JSON tree (what record_to_json must produce)."""
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


# -- Hypothesis: records of any valid shape (not necessarily valid history) -----------------------


def _builds(cls: type, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``st.builds`` that must name every attribute, so a new field cannot go untested."""
    names = {a.name for a in attrs.fields(cls)}
    assert set(fields) == names, f"{cls.__name__}: strategy misses {names - set(fields)}"
    return st.builds(cls, **fields)


text = st.text(max_size=10)  # any Unicode except lone surrogates
keys = st.text(max_size=6)
ints = st.one_of(st.integers(0, 5), st.integers(0, INT_MAX))
blobs = st.binary(max_size=24)

descriptors = _builds(
    StreamDescriptorRecord,
    source_id=text,
    scope=text,
    node_id=text,
    key=text,
    attempt=text,
    capacity=ints,
    terminal=st.sampled_from(StreamTerminal),
)
values = _builds(
    ValueRecord,
    name=text,
    type_id=text,
    version=text,
    state=st.sampled_from(ValueState),
    digest=text,
    data=blobs,
    stream=st.none() | descriptors,
)
nodes = _builds(
    NodeRecord,
    node_id=text,
    attempt=text,
    reason=st.sampled_from(NodeReason),
    outputs=st.lists(values, max_size=3),
)
scopes = _builds(
    ScopeRecord,
    graph=text,
    path=text,
    inputs=text,
    nodes=st.dictionaries(keys, nodes, max_size=3),
    bindings=st.booleans(),
)
attempts = _builds(
    AttemptRecord,
    parent=text,
    node_id=text,
    boundary=text,
    index=ints,
    limit=ints,
    state=st.sampled_from(AttemptState),
)
pendings = _builds(PendingMessageRecord, sequence=ints, data=blobs, digest=text)
streams = _builds(
    StreamRecord,
    scope=text,
    node_id=text,
    key=text,
    group=text,
    generation=ints,
    source_id=text,
    resumable=st.booleans(),
    last_sequence=ints,
    acked_through=ints,
    pending=st.lists(pendings, max_size=3),
    cursor=blobs,
    terminal=st.sampled_from(StreamTerminal),
)
messages = _builds(
    MessageAttemptRecord,
    stream=text,
    group=text,
    sequence=ints,
    parent=text,
    node_id=text,
    index=ints,
    limit=ints,
    state=st.sampled_from(AttemptState),
)
managed = _builds(
    ManagedRecord,
    scope=text,
    parent=text,
    node_id=text,
    state=st.none() | values,
    values=st.lists(values, max_size=3),
)
records = _builds(
    RunRecord,
    run_id=text,
    format=st.integers(1, 2),
    revision=st.one_of(st.integers(1, 9), st.integers(1, UINT64_MAX)),
    version=text,
    definition=text,
    inputs=text,
    root_scope=text,
    scopes=st.dictionaries(keys, scopes, max_size=3),
    attempts=st.dictionaries(keys, attempts, max_size=3),
    streams=st.dictionaries(keys, streams, max_size=2),
    messages=st.dictionaries(keys, messages, max_size=2),
    managed=st.dictionaries(keys, managed, max_size=2),
)


def walk_mutable(obj: Any) -> list[Any]:
    """Every record object, list and dict reachable from ``obj`` (for sharing checks)."""
    found: list[Any] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if attrs.has(type(item)):
            found.append(item)
            stack.extend(getattr(item, a.name) for a in attrs.fields(type(item)))
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
        elif isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
    return found
