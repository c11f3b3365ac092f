"""Reading a confirmed node's stored outputs back as values (``durable show``).

A stored ready value names the codec that wrote it (``TypeID`` and ``Version``); it is decoded
with that codec from the registry, after its bytes are checked against their digest. Nothing is
saved, and no graph is needed: the record alone says how each value was encoded.
"""

from __future__ import annotations

from typing import Any

import attrs

from durable_core.codecs import Codecs, digest_of
from durable_core.errors import CodecError, CorruptRecordError, NotFoundError
from durable_core.records import AttemptState, RunRecord, ValueRecord, ValueState

__all__ = ["StoredOutput", "decode_output", "find_node", "node_outputs"]


@attrs.frozen
class StoredOutput:
    """One output of a confirmed node, decoded.

    Attributes:
        name: the output key's name.
        state: ``"ready"``, ``"skipped"`` or ``"stream"`` (a stream's messages are not values
            of the node record; only its descriptor is stored there).
        codec: ``"<codec id>@<version>"`` of a ready value, else ``""``.
        value: the decoded value (``None`` unless ready).
    """

    name: str
    state: str
    codec: str
    value: Any


def find_node(record: RunRecord, node: str) -> tuple[str, Any]:
    """The scope id and the :class:`~durable_core.records.NodeRecord` of ``node``.

    Args:
        record: the run's record.
        node: a root graph's node id (``"merge"``), or a Sub scope's path and the node id in
            it (``"merge/render"``).

    Raises:
        NotFoundError: no scope has that path, or the node is not confirmed in it; the message
            lists the confirmed nodes.
    """
    path, _, node_id = node.rpartition("/")
    matches = [
        (scope_id, scope)
        for scope_id, scope in record.scopes.items()
        if scope.path == path and node_id in scope.nodes
    ]
    if matches:
        # a Sub mounted again after a failed attempt has several scopes at one path: take the
        # one whose parent attempt is confirmed, else the last written
        for scope_id, scope in matches:
            parent = record.attempts.get(scope_id)
            if scope_id == record.root_scope or (
                parent is not None and parent.state == AttemptState.CONFIRMED
            ):
                return scope_id, scope.nodes[node_id]
        scope_id, scope = matches[-1]
        return scope_id, scope.nodes[node_id]
    confirmed = sorted(
        (f"{scope.path}/{n}" if scope.path else n)
        for scope in record.scopes.values()
        for n in scope.nodes
    )
    raise NotFoundError(
        f"run {record.run_id!r} has no confirmed node {node!r}; confirmed nodes: "
        f"{', '.join(confirmed) or 'none'} (a node inside a Sub graph is written "
        "'<sub path>/<node id>')"
    )


def node_outputs(record: RunRecord, node: str) -> tuple[str, list[ValueRecord]]:
    """The node's reason (``completed``/``skipped``) and its stored outputs (see
    :func:`find_node`)."""
    _, node_record = find_node(record, node)
    return str(node_record.reason), list(node_record.outputs)


def decode_output(value: ValueRecord, codecs: Codecs) -> StoredOutput:
    """Decode one stored output with the codec it names.

    Raises:
        CorruptRecordError: the bytes do not match their digest.
        CodecError: no registered codec has the stored id, its version differs, or the bytes
            do not decode; the message names the codec.
    """
    if value.stream is not None:
        return StoredOutput(value.name, "stream", f"{value.type_id}@{value.version}", None)
    if value.state == ValueState.SKIPPED:
        return StoredOutput(value.name, "skipped", "", None)
    label = f"{value.type_id}@{value.version}"
    if digest_of(bytes(value.data)) != value.digest:
        raise CorruptRecordError(
            f"output {value.name!r}: the stored bytes do not match their digest; the value was "
            "damaged. Keep the record as evidence",
            rule="R-VAL-3",
        )
    try:
        codec = codecs.by_stored_id(value.type_id)
    except CodecError as exc:
        raise CodecError(
            f"output {value.name!r} was written by codec {label}, which is not registered: "
            f"install the plugin that provides it, or give the run's CONFIG when the graph's "
            f"module registers it ({exc})"
        ) from exc
    if codec.version != value.version:
        raise CodecError(
            f"output {value.name!r} was written by codec {label}; the registered codec "
            f"{codec.id} has version {codec.version}: install the codec version that wrote it"
        )
    try:
        decoded = codec.decode(bytes(value.data))
    except Exception as exc:
        raise CodecError(
            f"output {value.name!r}: codec {label} cannot decode the stored "
            f"{len(value.data)} bytes: {type(exc).__name__}: {exc}"
        ) from exc
    return StoredOutput(value.name, "ready", label, decoded)
