"""The persistent run record: plain data, no behaviour (seed 000 "数据模型"; SPEC R and S).

Every class here is an attrs class holding only serializable data. Attribute names are the seed's
field names in Python spelling; the JSON layout (:mod:`durable_core.records.fields`) spells them
exactly as the seed does (``RunID``, ``NodeID``, ``TypeID`` …). Maps are keyed by strings.

Identity conventions (R-REC-3): ``RunRecord.root_scope`` and every attempt id are 16 random bytes
in lowercase hex (32 characters). A child scope's id is the id of its parent node's deepest
current attempt (R-SCOPE-2), so ``RunRecord.scopes`` is keyed by scope id and
``RunRecord.attempts`` by attempt id.

The JSON layout is :mod:`durable_core.records.fields` (read and written by
:mod:`durable_core.records.jsonio`), the structural rules are
:mod:`durable_core.records.integrity`, and :func:`copy_record` (below) is a fast deep copy (the
runtime copies the first record of a run with it; later changes are proposals over the committed
record, see :mod:`durable_core.durable.proposal`). See ``docs/data-model.md``.
"""

from __future__ import annotations

import enum

import attrs

__all__ = [
    "RECORD_FORMAT",
    "AttemptRecord",
    "AttemptState",
    "ManagedRecord",
    "MessageAttemptRecord",
    "NodeReason",
    "NodeRecord",
    "PendingMessageRecord",
    "RunRecord",
    "ScopeRecord",
    "StreamDescriptorRecord",
    "StreamRecord",
    "StreamTerminal",
    "ValueRecord",
    "ValueState",
    "copy_record",
]

RECORD_FORMAT = 2
"""The record format this runtime writes (R-REC-1). Format 1 is read and upgraded on next save."""


class AttemptState(enum.StrEnum):
    """State of an attempt (R-ATT-1, R-ATT-4)."""

    ACTIVE = "active"
    FAILED = "failed"
    CONFIRMED = "confirmed"


class NodeReason(enum.StrEnum):
    """Why a node record exists (R-NODE-1): the node completed, or was skipped as a whole."""

    COMPLETED = "completed"
    SKIPPED = "skipped"


class ValueState(enum.StrEnum):
    """State of a stored output (R-VAL-1, R-VAL-4: pending is never stored)."""

    READY = "ready"
    SKIPPED = "skipped"


class StreamTerminal(enum.StrEnum):
    """Confirmed terminal state of a stream source or endpoint (S-1, S-5). ``OPEN``: none yet."""

    OPEN = ""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


@attrs.define(eq=True)
class StreamDescriptorRecord:
    """Descriptor of a stream output, stored instead of Data/Digest (S-1).

    Attributes:
        source_id: stable identity of the logical source (the producing node's stream).
        scope: id of the scope the source lives in.
        node_id: the producing node.
        key: the stream key's name.
        attempt: the real writer's root attempt id.
        capacity: the stream's buffer capacity (elements, > 0).
        terminal: the confirmed terminal state of the source.
    """

    source_id: str
    scope: str
    node_id: str
    key: str
    attempt: str
    capacity: int
    terminal: StreamTerminal = StreamTerminal.OPEN


@attrs.define(eq=True)
class ValueRecord:
    """One stored output of a node (R-VAL-1…4, S-1).

    Attributes:
        name: the output key's name.
        type_id: the codec id of the value's actual type (for a stream: of the element type).
        version: the codec version.
        state: ready or skipped; never derived from ``len(data)`` (R-VAL-2).
        digest: SHA-256 hex (64 lowercase characters) of ``data`` when ready; empty when skipped
            or when the value is a stream.
        data: the opaque encoded bytes; may be empty for a ready value.
        stream: the stream descriptor when the value is a stream (excludes data/digest).
    """

    name: str
    type_id: str = ""
    version: str = ""
    state: ValueState = ValueState.READY
    digest: str = ""
    data: bytes = b""
    stream: StreamDescriptorRecord | None = None


@attrs.define(eq=True)
class NodeRecord:
    """A confirmed complete node result (R-NODE-1).

    Attributes:
        node_id: the node in the scope's graph.
        attempt: the node's confirmed root attempt id.
        reason: completed or skipped.
        outputs: exactly one value record per provided key, in the node's declared order.
    """

    node_id: str
    attempt: str
    reason: NodeReason = NodeReason.COMPLETED
    outputs: list[ValueRecord] = attrs.Factory(list)


@attrs.define(eq=True)
class ScopeRecord:
    """One execution scope of a graph (R-SCOPE-1, R-SCOPE-2).

    Attributes:
        graph: the graph's name (its definition identity within the run's definition).
        path: the static mount position ("" for the root, ``"report"`` / ``"report/inner"`` for
            Subs); describes position only, never identity.
        inputs: SHA-256 fingerprint of the scope's actual inputs.
        nodes: confirmed node results keyed by node id.
        bindings: True when ``inputs`` comes from the stable In bindings and fixed values.
    """

    graph: str
    path: str = ""
    inputs: str = ""
    nodes: dict[str, NodeRecord] = attrs.Factory(dict)
    bindings: bool = False


@attrs.define(eq=True)
class AttemptRecord:
    """One attempt of a node: the root attempt or one Retry try (R-ATT-1…5).

    Attributes:
        parent: the scope id (root attempts) or the outer attempt id (Retry attempts).
        node_id: the node this attempt belongs to.
        boundary: "" for a root attempt; the Retry aspect's fixed position otherwise.
        index: 1-based index under (parent, node_id, boundary).
        limit: positive budget under (parent, node_id, boundary); ``index <= limit``.
        state: active, failed or confirmed.
    """

    parent: str
    node_id: str
    boundary: str = ""
    index: int = 1
    limit: int = 1
    state: AttemptState = AttemptState.ACTIVE


@attrs.define(eq=True)
class PendingMessageRecord:
    """A stream message not yet acknowledged by its group (S-2).

    Attributes:
        sequence: the message's sequence number (from 1) in its source.
        data: the encoded element bytes.
        digest: SHA-256 hex of ``data``.
    """

    sequence: int
    data: bytes = b""
    digest: str = ""


@attrs.define(eq=True)
class StreamRecord:
    """A logical stream source as read by one group, with its message log and ack front (S-2).

    Attributes:
        scope, node_id, key, group: identity of the reading endpoint.
        generation: raised once per resume; deliveries of an older generation cannot ack.
        source_id: identity of the logical source.
        resumable: whether the active source can restart from ``cursor`` (S-3).
        last_sequence: highest sequence sent.
        acked_through: every sequence up to this one is acknowledged; never past a gap.
        pending: unacknowledged messages in sequence order.
        cursor: the producer's last saved position (opaque bytes, ``writer.position()``).
        terminal: confirmed terminal state of this endpoint.
    """

    scope: str
    node_id: str
    key: str
    group: str
    generation: int = 1
    source_id: str = ""
    resumable: bool = False
    last_sequence: int = 0
    acked_through: int = 0
    pending: list[PendingMessageRecord] = attrs.Factory(list)
    cursor: bytes = b""
    terminal: StreamTerminal = StreamTerminal.OPEN


@attrs.define(eq=True)
class MessageAttemptRecord:
    """The durable failure budget and state of processing one input message (S-7).

    Attributes:
        stream: key of the input's ``StreamRecord`` in ``RunRecord.streams``.
        group: the reading group.
        sequence: the message's sequence number.
        parent: the processing node's attempt id.
        node_id: the processing node.
        index, limit: 1-based try index and its budget; restarts refill nothing.
        state: active, failed or confirmed.
    """

    stream: str
    group: str
    sequence: int
    parent: str
    node_id: str
    index: int = 1
    limit: int = 1
    state: AttemptState = AttemptState.ACTIVE


@attrs.define(eq=True)
class ManagedRecord:
    """Committed state of a message-processing node (S-7, S-9, S-10).

    Attributes:
        scope, parent, node_id: ownership; must match the confirmed message attempts.
        state: an explicit complete snapshot of the node's state (one value record).
        values: ordinary values that have arrived, one record per key.
    """

    scope: str
    parent: str
    node_id: str
    state: ValueRecord | None = None
    values: list[ValueRecord] = attrs.Factory(list)


@attrs.define(eq=True)
class RunRecord:
    """The whole persistent state of one run, saved by compare-and-swap (R-REC-2).

    Attributes:
        format: record format (1 or 2; new records are ``RECORD_FORMAT``).
        run_id: the business run identity; equals the session's run id.
        revision: CAS revision, 1 after the first save, never 0 in a stored record (uint64).
        version: the host's business version string.
        definition: SHA-256 hex fingerprint of the complete graph definition.
        inputs: SHA-256 hex fingerprint of the root inputs (not a copy of them).
        root_scope: id of the root scope (16 random bytes, hex).
        scopes: scope records keyed by scope id.
        attempts: attempt records keyed by attempt id.
        streams: stream records keyed by a stable stream id (format 2 only).
        messages: message attempts keyed by id (format 2 only).
        managed: managed containers keyed by id (format 2 only).
    """

    run_id: str
    format: int = RECORD_FORMAT
    revision: int = 0
    version: str = ""
    definition: str = ""
    inputs: str = ""
    root_scope: str = ""
    scopes: dict[str, ScopeRecord] = attrs.Factory(dict)
    attempts: dict[str, AttemptRecord] = attrs.Factory(dict)
    streams: dict[str, StreamRecord] = attrs.Factory(dict)
    messages: dict[str, MessageAttemptRecord] = attrs.Factory(dict)
    managed: dict[str, ManagedRecord] = attrs.Factory(dict)


# -- Copying ---------------------------------------------------------------------------------------
# Written out per class (no generic walk, no JSON), for speed. Strings and bytes are immutable
# and shared; every record object, list and dict is new. A field added to a class above must be
# added here too (the tests build every field with a non-default value and compare the copy).


def _copy_descriptor(d: StreamDescriptorRecord) -> StreamDescriptorRecord:
    return StreamDescriptorRecord(
        source_id=d.source_id,
        scope=d.scope,
        node_id=d.node_id,
        key=d.key,
        attempt=d.attempt,
        capacity=d.capacity,
        terminal=d.terminal,
    )


def _copy_value(v: ValueRecord) -> ValueRecord:
    return ValueRecord(
        name=v.name,
        type_id=v.type_id,
        version=v.version,
        state=v.state,
        digest=v.digest,
        data=v.data,
        stream=None if v.stream is None else _copy_descriptor(v.stream),
    )


def _copy_node(n: NodeRecord) -> NodeRecord:
    return NodeRecord(
        node_id=n.node_id,
        attempt=n.attempt,
        reason=n.reason,
        outputs=[_copy_value(v) for v in n.outputs],
    )


def _copy_scope(s: ScopeRecord) -> ScopeRecord:
    return ScopeRecord(
        graph=s.graph,
        path=s.path,
        inputs=s.inputs,
        nodes={k: _copy_node(n) for k, n in s.nodes.items()},
        bindings=s.bindings,
    )


def _copy_attempt(a: AttemptRecord) -> AttemptRecord:
    return AttemptRecord(
        parent=a.parent,
        node_id=a.node_id,
        boundary=a.boundary,
        index=a.index,
        limit=a.limit,
        state=a.state,
    )


def _copy_stream(s: StreamRecord) -> StreamRecord:
    return StreamRecord(
        scope=s.scope,
        node_id=s.node_id,
        key=s.key,
        group=s.group,
        generation=s.generation,
        source_id=s.source_id,
        resumable=s.resumable,
        last_sequence=s.last_sequence,
        acked_through=s.acked_through,
        pending=[PendingMessageRecord(p.sequence, p.data, p.digest) for p in s.pending],
        cursor=s.cursor,
        terminal=s.terminal,
    )


def _copy_message(m: MessageAttemptRecord) -> MessageAttemptRecord:
    return MessageAttemptRecord(
        stream=m.stream,
        group=m.group,
        sequence=m.sequence,
        parent=m.parent,
        node_id=m.node_id,
        index=m.index,
        limit=m.limit,
        state=m.state,
    )


def _copy_managed(m: ManagedRecord) -> ManagedRecord:
    return ManagedRecord(
        scope=m.scope,
        parent=m.parent,
        node_id=m.node_id,
        state=None if m.state is None else _copy_value(m.state),
        values=[_copy_value(v) for v in m.values],
    )


def copy_record(record: RunRecord) -> RunRecord:
    """Return a deep copy of ``record`` that shares no mutable object with it (R-RT-1).

    Much faster than a JSON round trip: no encoding, no base64, no checks (the copy is exactly
    as valid as the original).

    Args:
        record: the record to copy; it is not modified.

    Returns:
        An equal record whose record objects, lists and dicts are all new (strings and bytes,
        being immutable, are shared).
    """
    return RunRecord(
        run_id=record.run_id,
        format=record.format,
        revision=record.revision,
        version=record.version,
        definition=record.definition,
        inputs=record.inputs,
        root_scope=record.root_scope,
        scopes={k: _copy_scope(s) for k, s in record.scopes.items()},
        attempts={k: _copy_attempt(a) for k, a in record.attempts.items()},
        streams={k: _copy_stream(s) for k, s in record.streams.items()},
        messages={k: _copy_message(m) for k, m in record.messages.items()},
        managed={k: _copy_managed(m) for k, m in record.managed.items()},
    )
