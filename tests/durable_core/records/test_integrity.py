"""Whole-record integrity: each structural rule of the data model, and the path of its violation."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_core import (
    AttemptRecord,
    AttemptState,
    CorruptRecordError,
    ManagedRecord,
    NodeReason,
    NodeRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    ValueRecord,
    ValueState,
    copy_record,
    validate_record,
)
from durable_core.records import path as paths
from tests.durable_core.records.samples import (
    CLEANUP,
    COUNT,
    DEFINITION1,
    DEFINITION2,
    FETCH,
    MANAGED,
    MSG1_CONFIRMED,
    MSG1_FAILED,
    MSG2_CONFIRMED,
    RENDER1,
    RENDER2,
    REPORT,
    REPORT1,
    REPORT2,
    ROOT,
    SPLIT,
    SPLIT1,
    SPLIT2,
    STREAM,
    TICKS,
    load_format1,
    load_format2,
    records,
)

NEW = "00112233445566778899aabbccddeeff"  # an id the fixture does not use
OTHER = "ffeeddccbbaa99887766554433221100"


def key_path(*segments: Any) -> str:
    return paths.render_path(paths.path_of(*segments))


def root_nodes(r: RunRecord) -> dict[str, NodeRecord]:
    return r.scopes[ROOT].nodes


def out(r: RunRecord, node: str = "fetch", index: int = 0) -> ValueRecord:
    return r.scopes[ROOT].nodes[node].outputs[index]


def desc(r: RunRecord) -> StreamDescriptorRecord:
    stream = out(r, "ticks").stream
    assert stream is not None
    return stream


def managed(r: RunRecord) -> ManagedRecord:
    return r.managed[MANAGED]


def nodes_path(node: str, *rest: Any) -> str:
    return key_path("Scopes", (ROOT,), "Nodes", (node,), *rest)


def out_path(node: str = "fetch", index: int = 0, *rest: Any) -> str:
    return nodes_path(node, "Outputs", index, *rest)


def att_path(aid: str, *rest: Any) -> str:
    return key_path("Attempts", (aid,), *rest)


def msg_path(mid: str, *rest: Any) -> str:
    return key_path("Messages", (mid,), *rest)


def mg_path(*rest: Any) -> str:
    return key_path("Managed", (MANAGED,), *rest)


def stream_path(*rest: Any) -> str:
    return key_path("Streams", (STREAM,), *rest)


def fixture_valid() -> None:
    validate_record(load_format2(), DEFINITION2)


# -- Valid records ---------------------------------------------------------------------------------


# covers: R-REC-1, R-SCOPE-1, R-SCOPE-2, R-ATT-1, R-ATT-2, R-ATT-3, R-ATT-5, R-NODE-1, R-VAL-1,
#         R-VAL-2, R-VAL-3, S-1, S-2, S-7, S-9
def test_fixtures_are_valid_with_and_without_definition():
    validate_record(load_format2())
    validate_record(load_format2(), DEFINITION2)
    validate_record(load_format1())
    validate_record(load_format1(), DEFINITION1)


# covers: R-ATT-4, R-ATT-5, R-SCOPE-2
def test_a_failed_ancestor_is_not_corruption():
    record = load_format2()
    # The fixture already keeps a confirmed node under a failed Retry attempt (REPORT1); fail
    # the whole chain, root attempt included: history stays valid.
    for aid in (REPORT, REPORT2, RENDER2):
        record.attempts[aid].state = AttemptState.FAILED
    validate_record(record, DEFINITION2)


# covers: R-ATT-5, R-VAL-3
def test_old_scopes_under_failed_attempts_are_still_checked():
    record = load_format2()
    assert record.attempts[REPORT1].state is AttemptState.FAILED
    record.scopes[REPORT1].nodes["render"].outputs[0].data = b"damaged"
    with pytest.raises(CorruptRecordError) as info:
        validate_record(record)
    error = info.value
    assert error.rule == "R-VAL-3"
    assert error.path == key_path(
        "Scopes", (REPORT1,), "Nodes", ("render",), "Outputs", 0, "Digest"
    )


# covers: R-ATT-2, R-ATT-3, S-7
def test_a_last_attempt_may_be_active_failed_or_confirmed():
    for state in AttemptState:
        record = load_format2()
        record.attempts[SPLIT2].state = state  # last of its group, under a confirmed root
        validate_record(record)
        record = load_format2()
        record.messages[MSG2_CONFIRMED].state = state
        if state is not AttemptState.CONFIRMED:  # MSG1 still confirms the container
            validate_record(record)


# covers: R-VAL-2
def test_ready_values_may_have_empty_data():
    record = load_format2()
    value = out(record)
    value.data = b""
    value.digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    validate_record(record)


# covers: S-9
def test_an_empty_container_is_still_a_container():
    record = load_format2()
    managed(record).state = None
    managed(record).values = []
    validate_record(record)


# -- Each rule, broken once ------------------------------------------------------------------------


def add_attempt(r: RunRecord, aid: str, **fields: Any) -> None:
    r.attempts[aid] = AttemptRecord(**fields)


def chain_cycle(r: RunRecord) -> None:
    add_attempt(r, NEW, parent=OTHER, node_id="split", boundary="0", limit=2)
    add_attempt(r, OTHER, parent=NEW, node_id="split", boundary="1", limit=2)


def scope_cycle(r: RunRecord) -> None:
    # Scope NEW is named by attempt NEW, a root attempt in scope OTHER, and the other way round.
    add_attempt(r, NEW, parent=OTHER, node_id="report")
    add_attempt(r, OTHER, parent=NEW, node_id="render")
    r.scopes[NEW] = ScopeRecord(graph="report", path="report", inputs="0" * 64)
    r.scopes[OTHER] = ScopeRecord(graph="report", path="report/render", inputs="0" * 64)


def without(definition: dict[str, Any], graph: str, node: str | None = None) -> dict[str, Any]:
    changed = copy.deepcopy(definition)
    if node is None:
        del changed[graph]
    else:
        del changed[graph][node]
    return changed


def set_(obj_getter: Any, **fields: Any) -> Any:
    def mutate(r: RunRecord) -> None:
        obj = obj_getter(r)
        for name, value in fields.items():
            setattr(obj, name, value)

    return mutate


RULES: list[tuple[str, Any, str, str, dict[str, Any] | None]] = [
    # (id, mutation, expected path, expected rule, definition (default DEFINITION2))
    # R-REC-4 shape: types, ranges, valid Unicode of every metadata string and key
    ("surrogate-run-id", set_(lambda r: r, run_id="run\ud800"), "$.RunID", "R-REC-4", None),
    (
        "surrogate-scope-key",
        lambda r: r.scopes.update({"\udc80": r.scopes[REPORT2]}),
        key_path("Scopes", ("\udc80",)),
        "R-REC-4",
        None,
    ),
    (
        "surrogate-output-name",
        set_(out, name="x\udfff"),
        out_path("fetch", 0, "Name"),
        "R-REC-4",
        None,
    ),
    (
        "surrogate-managed-value",
        set_(lambda r: managed(r).values[0], type_id="\ud800"),
        mg_path("Values", 0, "TypeID"),
        "R-REC-4",
        None,
    ),
    (
        "bool-index",
        set_(lambda r: r.attempts[SPLIT1], index=True),
        att_path(SPLIT1, "Index"),
        "R-REC-4",
        None,
    ),
    ("revision-zero", set_(lambda r: r, revision=0), "$.Revision", "R-REC-2", None),
    # R-REC-1 format
    ("format-zero", set_(lambda r: r, format=0), "$.Format", "R-REC-1", None),
    ("format-newer", set_(lambda r: r, format=3), "$.Format", "R-REC-1", None),
    ("format1-with-streams", set_(lambda r: r, format=1), "$.Streams", "R-REC-1", None),
    (
        "format1-with-messages",
        set_(lambda r: r, format=1, streams={}),
        "$.Messages",
        "R-REC-1",
        None,
    ),
    (
        "format1-with-managed",
        set_(lambda r: r, format=1, streams={}, messages={}),
        "$.Managed",
        "R-REC-1",
        None,
    ),
    (
        "format1-with-stream-value",
        set_(lambda r: r, format=1, streams={}, messages={}, managed={}),
        out_path("ticks", 0, "Stream"),
        "R-REC-1",
        None,
    ),
    # R-REC-2 identity fields
    ("empty-run-id", set_(lambda r: r, run_id=""), "$.RunID", "R-REC-2", None),
    ("definition-not-sha", set_(lambda r: r, definition="abc"), "$.Definition", "R-REC-2", None),
    (
        "inputs-uppercase",
        lambda r: setattr(r, "inputs", r.inputs.upper()),
        "$.Inputs",
        "R-REC-2",
        None,
    ),
    # R-REC-3 ids
    ("root-scope-not-hex", set_(lambda r: r, root_scope="root"), "$.RootScope", "R-REC-3", None),
    (
        "attempt-id-uppercase",
        lambda r: r.attempts.update({FETCH.upper(): r.attempts.pop(FETCH)}),
        att_path(FETCH.upper()),
        "R-REC-3",
        None,
    ),
    (
        "attempt-id-short",
        lambda r: r.attempts.update({FETCH[:30]: r.attempts.pop(FETCH)}),
        att_path(FETCH[:30]),
        "R-REC-3",
        None,
    ),
    # R-SCOPE-1 root scope and scopes
    ("root-scope-missing", lambda r: r.scopes.pop(ROOT), "$.RootScope", "R-SCOPE-1", None),
    (
        "root-inputs-differ",
        set_(lambda r: r.scopes[ROOT], inputs="0" * 64),
        key_path("Scopes", (ROOT,), "Inputs"),
        "R-SCOPE-1",
        None,
    ),
    (
        "scope-graph-empty",
        set_(lambda r: r.scopes[REPORT1], graph=""),
        key_path("Scopes", (REPORT1,), "Graph"),
        "R-SCOPE-1",
        None,
    ),
    (
        "scope-graph-not-defined",
        lambda r: None,
        key_path("Scopes", (REPORT2,), "Graph"),  # the first "report" scope in record order
        "R-SCOPE-1",
        without(DEFINITION2, "report"),
    ),
    (
        "scope-inputs-not-sha",
        set_(lambda r: r.scopes[REPORT2], inputs=""),
        key_path("Scopes", (REPORT2,), "Inputs"),
        "R-SCOPE-1",
        None,
    ),
    # R-SCOPE-2 child scopes
    (
        "root-path-not-empty",
        set_(lambda r: r.scopes[ROOT], path="orders"),
        key_path("Scopes", (ROOT,), "Path"),
        "R-SCOPE-2",
        None,
    ),
    (
        "child-path-wrong",
        set_(lambda r: r.scopes[REPORT1], path="reports"),
        key_path("Scopes", (REPORT1,), "Path"),
        "R-SCOPE-2",
        None,
    ),
    (
        "scope-without-attempt",
        lambda r: r.scopes.update({NEW: ScopeRecord(graph="report", path="x", inputs="0" * 64)}),
        key_path("Scopes", (NEW,)),
        "R-SCOPE-2",
        None,
    ),
    (
        "root-scope-is-an-attempt",
        lambda r: add_attempt(r, ROOT, parent=ROOT, node_id="fetch2"),
        att_path(ROOT),
        "R-SCOPE-2",
        None,
    ),
    # R-ATT-1 attempt fields
    (
        "limit-zero",
        set_(lambda r: r.attempts[SPLIT1], limit=0),
        att_path(SPLIT1, "Limit"),
        "R-ATT-1",
        None,
    ),
    (
        "index-zero",
        set_(lambda r: r.attempts[SPLIT1], index=0),
        att_path(SPLIT1, "Index"),
        "R-ATT-1",
        None,
    ),
    (
        "index-past-limit",
        set_(lambda r: r.attempts[SPLIT2], index=4),
        att_path(SPLIT2, "Index"),
        "R-ATT-1",
        None,
    ),
    (
        "node-id-empty",
        set_(lambda r: r.attempts[FETCH], node_id=""),
        att_path(FETCH, "NodeID"),
        "R-ATT-1",
        None,
    ),
    (
        "node-id-slash",
        set_(lambda r: r.attempts[FETCH], node_id="a/b"),
        att_path(FETCH, "NodeID"),
        "R-ATT-1",
        None,
    ),
    # R-ATT-2 root attempts and confirmation
    (
        "root-limit-two",
        set_(lambda r: r.attempts[FETCH], limit=2),
        att_path(FETCH, "Limit"),
        "R-ATT-2",
        None,
    ),
    (
        "retry-confirmed-alone",
        set_(lambda r: r.attempts[REPORT2], state=AttemptState.CONFIRMED),
        att_path(REPORT2, "State"),
        "R-ATT-2",
        None,
    ),
    # R-ATT-3 groups under (Parent, NodeID, Boundary)
    (
        "limits-differ",
        set_(lambda r: r.attempts[SPLIT2], limit=4),
        att_path(SPLIT2, "Limit"),
        "R-ATT-3",
        None,
    ),
    (
        "index-gap",
        set_(lambda r: r.attempts[SPLIT2], index=3),
        att_path(SPLIT2, "Index"),
        "R-ATT-3",
        None,
    ),
    (
        "index-twice",
        set_(lambda r: r.attempts[SPLIT2], index=1),
        att_path(SPLIT2, "Index"),
        "R-ATT-3",
        None,
    ),
    (
        "earlier-not-failed",
        set_(lambda r: r.attempts[SPLIT1], state=AttemptState.ACTIVE),
        att_path(SPLIT1, "State"),
        "R-ATT-3",
        None,
    ),
    (
        "two-root-attempts",
        lambda r: add_attempt(r, NEW, parent=ROOT, node_id="fetch"),
        att_path(NEW, "Index"),
        "R-ATT-3",
        None,
    ),
    (
        "retry-nested-in-itself",
        lambda r: add_attempt(r, NEW, parent=SPLIT2, node_id="split", boundary="0", limit=3),
        att_path(NEW, "Boundary"),
        "R-ATT-3",
        None,
    ),
    # R-ATT-5 parent chains
    (
        "root-attempt-parent-missing",
        set_(lambda r: r.attempts[CLEANUP], parent=NEW),
        att_path(CLEANUP, "Parent"),
        "R-ATT-5",
        None,
    ),
    (
        "retry-parent-missing",
        set_(lambda r: r.attempts[SPLIT1], parent=NEW),
        att_path(SPLIT1, "Parent"),
        "R-ATT-5",
        None,
    ),
    (
        "retry-parent-is-a-scope",
        set_(lambda r: r.attempts[SPLIT1], parent=ROOT),
        att_path(SPLIT1, "Parent"),
        "R-ATT-5",
        None,
    ),
    (
        "retry-parent-wrong-node",
        set_(lambda r: r.attempts[SPLIT2], parent=FETCH),
        att_path(SPLIT2, "Parent"),
        "R-ATT-5",
        None,
    ),
    ("attempt-cycle", chain_cycle, att_path(NEW, "Parent"), "R-ATT-5", None),
    ("scope-cycle", scope_cycle, att_path(NEW, "Parent"), "R-ATT-5", None),
    (
        "attempt-node-not-in-graph",
        set_(lambda r: r.attempts[RENDER2], node_id="ghost"),
        att_path(RENDER2, "NodeID"),
        "R-ATT-5",
        None,
    ),
    # R-NODE-1 node records
    (
        "node-key-differs",
        set_(lambda r: root_nodes(r)["fetch"], node_id="fetch2"),
        nodes_path("fetch", "NodeID"),
        "R-NODE-1",
        None,
    ),
    (
        "node-attempt-missing",
        set_(lambda r: root_nodes(r)["fetch"], attempt=NEW),
        nodes_path("fetch", "Attempt"),
        "R-NODE-1",
        None,
    ),
    (
        "node-attempt-is-retry",
        set_(lambda r: root_nodes(r)["split"], attempt=SPLIT2),
        nodes_path("split", "Attempt"),
        "R-NODE-1",
        None,
    ),
    (
        "node-attempt-other-node",
        set_(lambda r: root_nodes(r)["fetch"], attempt=CLEANUP),
        nodes_path("fetch", "Attempt"),
        "R-NODE-1",
        None,
    ),
    (
        "node-attempt-not-confirmed",
        set_(lambda r: r.attempts[FETCH], state=AttemptState.ACTIVE),
        nodes_path("fetch", "Attempt"),
        "R-NODE-1",
        None,
    ),
    (
        "node-attempt-other-scope",
        lambda r: r.scopes[REPORT2].nodes.update(render=r.scopes[REPORT1].nodes["render"]),
        key_path("Scopes", (REPORT2,), "Nodes", ("render",), "Attempt"),
        "R-NODE-1",
        None,
    ),
    (
        "confirmed-attempt-without-node",
        lambda r: root_nodes(r).pop("cleanup"),
        att_path(CLEANUP, "State"),
        "R-NODE-1",
        None,
    ),
    (
        "output-twice",
        lambda r: root_nodes(r)["fetch"].outputs.append(
            copy_record(r).scopes[ROOT].nodes["fetch"].outputs[0]
        ),
        out_path("fetch", 1, "Name"),
        "R-NODE-1",
        None,
    ),
    (
        "output-missing",
        lambda r: root_nodes(r)["split"].outputs.pop(),
        nodes_path("split", "Outputs"),
        "R-NODE-1",
        None,
    ),
    ("output-not-provided", set_(out, name="row"), out_path("fetch", 0, "Name"), "R-NODE-1", None),
    (
        "node-not-in-definition",
        lambda r: None,
        nodes_path("cleanup"),
        "R-NODE-1",
        without(DEFINITION2, "orders", "cleanup"),
    ),
    (
        "skipped-node-with-ready-output",
        set_(lambda r: root_nodes(r)["fetch"], reason=NodeReason.SKIPPED),
        out_path("fetch", 0, "State"),
        "R-NODE-1",
        None,
    ),
    # R-VAL-1..3 values
    ("value-name-empty", set_(out, name=""), out_path("fetch", 0, "Name"), "R-VAL-1", None),
    ("ready-type-id-empty", set_(out, type_id=""), out_path("fetch", 0, "TypeID"), "R-VAL-1", None),
    (
        "ready-version-empty",
        set_(out, version=""),
        out_path("fetch", 0, "Version"),
        "R-VAL-1",
        None,
    ),
    (
        "ready-digest-uppercase",
        lambda r: setattr(out(r), "digest", out(r).digest.upper()),
        out_path("fetch", 0, "Digest"),
        "R-VAL-1",
        None,
    ),
    ("ready-digest-empty", set_(out, digest=""), out_path("fetch", 0, "Digest"), "R-VAL-1", None),
    (
        "skipped-with-data",
        set_(lambda r: out(r, "split", 1), data=b"x"),
        out_path("split", 1, "Data"),
        "R-VAL-2",
        None,
    ),
    (
        "skipped-with-digest",
        set_(lambda r: out(r, "split", 1), digest="0" * 64),
        out_path("split", 1, "Digest"),
        "R-VAL-2",
        None,
    ),
    ("digest-mismatch", set_(out, data=b"[]"), out_path("fetch", 0, "Digest"), "R-VAL-3", None),
    # S-1 stream descriptors
    (
        "stream-with-data",
        set_(lambda r: out(r, "ticks"), data=b"x"),
        out_path("ticks", 0, "Data"),
        "S-1",
        None,
    ),
    (
        "stream-with-digest",
        set_(lambda r: out(r, "ticks"), digest="0" * 64),
        out_path("ticks", 0, "Digest"),
        "S-1",
        None,
    ),
    (
        "stream-skipped",
        set_(lambda r: out(r, "ticks"), state=ValueState.SKIPPED),
        out_path("ticks", 0, "State"),
        "S-1",
        None,
    ),
    (
        "stream-element-type-empty",
        set_(lambda r: out(r, "ticks"), type_id=""),
        out_path("ticks", 0, "TypeID"),
        "S-1",
        None,
    ),
    (
        "descriptor-source-empty",
        set_(desc, source_id=""),
        out_path("ticks", 0, "Stream", "SourceID"),
        "S-1",
        None,
    ),
    (
        "descriptor-capacity-zero",
        set_(desc, capacity=0),
        out_path("ticks", 0, "Stream", "Capacity"),
        "S-1",
        None,
    ),
    (
        "descriptor-scope-missing",
        set_(desc, scope=NEW),
        out_path("ticks", 0, "Stream", "Scope"),
        "S-1",
        None,
    ),
    (
        "descriptor-forged-attempt",
        set_(desc, attempt=FETCH),
        out_path("ticks", 0, "Stream", "Attempt"),
        "S-1",
        None,
    ),
    # S-2 stream records
    (
        "stream-scope-missing",
        set_(lambda r: r.streams[STREAM], scope=NEW),
        stream_path("Scope"),
        "S-2",
        None,
    ),
    (
        "stream-key-empty",
        set_(lambda r: r.streams[STREAM], key=""),
        stream_path("Key"),
        "S-2",
        None,
    ),
    (
        "stream-node-not-in-graph",
        set_(lambda r: r.streams[STREAM], node_id="ghost"),
        stream_path("NodeID"),
        "S-2",
        None,
    ),
    (
        "generation-zero",
        set_(lambda r: r.streams[STREAM], generation=0),
        stream_path("Generation"),
        "S-2",
        None,
    ),
    (
        "acked-past-last",
        set_(lambda r: r.streams[STREAM], acked_through=6),
        stream_path("AckedThrough"),
        "S-2",
        None,
    ),
    (
        "pending-not-increasing",
        lambda r: r.streams[STREAM].pending.reverse(),
        stream_path("Pending", 1, "Sequence"),
        "S-2",
        None,
    ),
    (
        "pending-already-acked",
        set_(lambda r: r.streams[STREAM].pending[0], sequence=2),
        stream_path("Pending", 0, "Sequence"),
        "S-2",
        None,
    ),
    (
        "pending-past-last",
        set_(lambda r: r.streams[STREAM], last_sequence=4),
        stream_path("Pending", 1, "Sequence"),
        "S-2",
        None,
    ),
    (
        "pending-digest-mismatch",
        set_(lambda r: r.streams[STREAM].pending[0], data=b"4"),
        stream_path("Pending", 0, "Digest"),
        "S-2",
        None,
    ),
    # S-7 message attempts
    (
        "message-stream-missing",
        set_(lambda r: r.messages[MSG1_FAILED], stream="nope"),
        msg_path(MSG1_FAILED, "Stream"),
        "S-7",
        None,
    ),
    (
        "message-group-differs",
        set_(lambda r: r.messages[MSG1_FAILED], group="other"),
        msg_path(MSG1_FAILED, "Group"),
        "S-7",
        None,
    ),
    (
        "message-sequence-zero",
        set_(lambda r: r.messages[MSG1_FAILED], sequence=0),
        msg_path(MSG1_FAILED, "Sequence"),
        "S-7",
        None,
    ),
    (
        "message-sequence-unsent",
        set_(lambda r: r.messages[MSG1_FAILED], sequence=6),
        msg_path(MSG1_FAILED, "Sequence"),
        "S-7",
        None,
    ),
    (
        "message-parent-missing",
        set_(lambda r: r.messages[MSG1_FAILED], parent=NEW),
        msg_path(MSG1_FAILED, "Parent"),
        "S-7",
        None,
    ),
    (
        "message-node-differs",
        set_(lambda r: r.messages[MSG1_FAILED], node_id="fetch"),
        msg_path(MSG1_FAILED, "NodeID"),
        "S-7",
        None,
    ),
    (
        "message-limit-zero",
        set_(lambda r: r.messages[MSG1_FAILED], limit=0),
        msg_path(MSG1_FAILED, "Limit"),
        "S-7",
        None,
    ),
    (
        "message-index-past-limit",
        set_(lambda r: r.messages[MSG1_FAILED], index=4),
        msg_path(MSG1_FAILED, "Index"),
        "S-7",
        None,
    ),
    (
        "message-limits-differ",
        set_(lambda r: r.messages[MSG1_CONFIRMED], limit=4),
        msg_path(MSG1_CONFIRMED, "Limit"),
        "S-7",
        None,
    ),
    (
        "message-earlier-not-failed",
        set_(lambda r: r.messages[MSG1_FAILED], state=AttemptState.ACTIVE),
        msg_path(MSG1_FAILED, "State"),
        "S-7",
        None,
    ),
    # S-9 managed containers
    (
        "confirmed-message-without-container",
        lambda r: r.managed.clear(),
        msg_path(MSG2_CONFIRMED),  # the first confirmed message in record order
        "S-9",
        None,
    ),
    (
        "container-without-confirmed-message",
        lambda r: [
            setattr(r.messages[MSG1_CONFIRMED], "state", AttemptState.FAILED),
            setattr(r.messages[MSG2_CONFIRMED], "state", AttemptState.ACTIVE),
        ],
        mg_path(),
        "S-9",
        None,
    ),
    ("container-wrong-parent", set_(managed, parent=FETCH), mg_path("NodeID"), "S-9", None),
    ("container-wrong-node", set_(managed, node_id="fetch"), mg_path("NodeID"), "S-9", None),
    ("container-wrong-scope", set_(managed, scope=REPORT1), mg_path("Scope"), "S-9", None),
    ("container-scope-missing", set_(managed, scope=NEW), mg_path("Scope"), "S-9", None),
    ("container-parent-missing", set_(managed, parent=NEW), mg_path("Parent"), "S-9", None),
    (
        "container-twice",
        lambda r: r.managed.update(twin=copy_record(r).managed[MANAGED]),
        key_path("Managed", ("twin",)),
        "S-9",
        None,
    ),
    # S-10 adoption: ordinary values only, each once
    (
        "container-value-is-stream",
        lambda r: setattr(managed(r).values[0], "stream", desc(r)),
        mg_path("Values", 0, "Stream"),
        "S-10",
        None,
    ),
    (
        "container-state-is-stream",
        lambda r: setattr(managed(r).state, "stream", desc(r)),
        mg_path("State", "Stream"),
        "S-10",
        None,
    ),
    (
        "container-value-twice",
        lambda r: managed(r).values.append(copy_record(r).managed[MANAGED].values[0]),
        mg_path("Values", 1, "Name"),
        "S-10",
        None,
    ),
    (
        "container-value-digest-mismatch",
        set_(lambda r: managed(r).values[0], data=b"4"),
        mg_path("Values", 0, "Digest"),
        "R-VAL-3",
        None,
    ),
]


# covers: R-REC-1, R-REC-2, R-REC-3, R-REC-4, R-SCOPE-1, R-SCOPE-2, R-ATT-1, R-ATT-2, R-ATT-3,
#         R-ATT-5, R-NODE-1, R-VAL-1, R-VAL-2, R-VAL-3, S-1, S-2, S-7, S-9, S-10, B-FILE-5
@pytest.mark.parametrize(
    ("mutate", "path", "rule", "definition"),
    [case[1:] for case in RULES],
    ids=[case[0] for case in RULES],
)
def test_each_broken_rule_is_refused_naming_path_and_rule(mutate, path, rule, definition):
    record = load_format2()
    mutate(record)
    before = copy_record(record)
    with pytest.raises(CorruptRecordError) as info:
        validate_record(record, DEFINITION2 if definition is None else definition)
    error = info.value
    assert (error.path, error.rule) == (path, rule), str(error)
    assert f"at {path}:" in str(error) and rule not in str(error)  # the rule is an attribute
    assert record == before  # validation never repairs


def test_rule_cases_have_unique_ids():
    ids = [case[0] for case in RULES]
    assert len(ids) == len(set(ids))


# covers: S-9, R-REC-1
def test_active_and_failed_messages_need_no_container_and_format1_has_none():
    record = load_format2()
    for mid in (MSG1_CONFIRMED, MSG2_CONFIRMED):
        record.messages[mid].state = AttemptState.FAILED
    record.managed.clear()
    validate_record(record)
    validate_record(load_format1())


# -- Size and shape ----------------------------------------------------------------------------


# covers: R-ATT-3, R-ATT-5
def test_deep_retry_chains_are_followed_without_recursion():
    record = load_format2()
    parent = FETCH
    record.attempts[FETCH].state = AttemptState.ACTIVE
    del record.scopes[ROOT].nodes["fetch"]
    for depth in range(5000):
        aid = f"{depth:032x}"
        record.attempts[aid] = AttemptRecord(
            parent=parent, node_id="fetch", boundary=str(depth), index=1, limit=1
        )
        parent = aid
    # 5000 levels: a recursive walk would raise RecursionError (the limit is 1000)
    validate_record(record, DEFINITION2)


# -- Fuzz: only CorruptRecordError, never a crash --------------------------------------------


# covers: R-REC-4, R-ATT-5
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_arbitrary_shapes_raise_only_corrupt_record(record):
    with contextlib.suppress(CorruptRecordError):
        validate_record(record)


def _fields(record: RunRecord) -> list[tuple[Any, str]]:
    """Every (record object, attribute) pair of the fixture, for targeted damage."""
    import attrs

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


_ID_POOL = [
    ROOT,
    FETCH,
    SPLIT,
    SPLIT1,
    SPLIT2,
    REPORT,
    REPORT1,
    REPORT2,
    RENDER1,
    COUNT,
    TICKS,
    NEW,
]
_REPLACEMENTS = st.one_of(
    st.sampled_from(_ID_POOL),
    st.sampled_from(["", "fetch", "split", "report", "render", "count", "0", STREAM, "count/x"]),
    st.integers(0, 6),
    st.sampled_from(list(AttemptState) + list(ValueState) + list(NodeReason)),
    st.booleans(),
    st.none(),
    st.binary(max_size=3),
)


# covers: R-ATT-5, R-NODE-1, S-9
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10_000), _REPLACEMENTS), min_size=1, max_size=3))
def test_targeted_damage_raises_only_corrupt_record(changes):
    record = load_format2()
    for position, replacement in changes:
        fields = _fields(record)
        target, name = fields[position % len(fields)]
        setattr(target, name, replacement)
    for definition in (None, DEFINITION2):
        with contextlib.suppress(CorruptRecordError):
            validate_record(record, definition)
