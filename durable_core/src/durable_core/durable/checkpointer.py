"""The durable checkpointer: the engine's checkpoint seam backed by the run record (G-12).

:class:`DurableCheckpointer` implements :class:`~durable_core.graph.Checkpointer` for one run.
It turns each seam call into a record mutation saved through the run's
:class:`~durable_core.durable.ledger.Ledger` (one commit path, group commit), and answers the
engine from what the record already holds:

- ``open_scope``: the root scope is the record's ``RootScope``; a Sub's child scope has the id of
  the Sub node's deepest current attempt (R-SCOPE-2). A scope already in the record is reused
  (its confirmed nodes are restored); a new one is added to the record with the first save that
  needs it, fingerprinted from the Sub's stable bindings (``Bindings: true``).
- ``begin_node``: a node with a NodeRecord in its scope is restored (body not run); an active
  root attempt is adopted (same id); a failed one means the node failed for good in an earlier
  process and the run fails again, naming it; otherwise a new root attempt is saved active
  before the node can start (R-ATT-2).
- ``begin_try``: the first try at a Retry boundary looks at the record: failed tries count as
  spent, an active try is adopted with its index, and a spent budget is reported as such
  (R-ATT-4: restarting never refills a budget). Every new try is saved active before it runs.
- ``fail_attempt``: the attempt is saved failed.
- ``commit_node``: the outputs are encoded (codec id, version, data, digest) and the root attempt
  is confirmed together with the complete NodeRecord in one save (R-ATT-2, R-NODE-1); the
  engine publishes the outputs only after that save succeeded.

Each successful save is reported to observers as a
:class:`~durable_core.durable.events.RecoveryEvent`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from durable_core.codecs import Codecs
from durable_core.durable import ledger as L
from durable_core.durable.events import EventKind, RecoveryEvent
from durable_core.durable.fingerprint import bindings_fingerprint
from durable_core.errors import CorruptRecordError, DurableError, NodeFailedError
from durable_core.graph import Checkpointer, Graph, In
from durable_core.graph.checkpoint import Attempt, NodeOutputs, Scope, Values
from durable_core.records import (
    AttemptRecord,
    AttemptState,
    NodeReason,
    RunRecord,
    ValueRecord,
    ValueState,
)

__all__ = ["DurableCheckpointer", "decode_outputs", "encode_value_record"]

log = logging.getLogger("durable_core.durable")

Emit = Callable[[RecoveryEvent], None]


def encode_value_record(codecs: Codecs, key: Any, ready: bool, value: Any = None) -> ValueRecord:
    """The ValueRecord of one slot: encoded with digest when ready, empty when skipped (R-VAL-1/2).

    Raises:
        CodecError: no codec can encode the value; the message names the key.
        DurableError: ``key`` is a stream key (stream outputs are not checkpointed by this
            version).
    """
    if getattr(key, "stream", False):
        raise DurableError(
            f"key {key.name!r} is a stream: stream outputs are not checkpointed by this version "
            "of the durable runtime; run the graph with execute() or use a value key"
        )
    if not ready:
        return ValueRecord(name=key.name, state=ValueState.SKIPPED)
    encoded = codecs.encode_value(key.type, value, name=key.name)
    return ValueRecord(
        name=key.name,
        type_id=encoded.codec_id,
        version=encoded.version,
        state=ValueState.READY,
        digest=encoded.digest,
        data=encoded.data,
    )


def decode_outputs(
    codecs: Codecs, provides: Iterable[Any], node_record: Any, where: str
) -> NodeOutputs:
    """Decode a NodeRecord's outputs for the engine (R-VAL-3).

    Raises:
        CorruptRecordError: a digest does not match, or the outputs do not cover the provides.
        CodecError: a codec id/version changed, or a value is not of the declared type.
    """
    by_name = {v.name: v for v in node_record.outputs}
    ready: dict[str, Any] = {}
    skipped: set[str] = set()
    for key in provides:
        value = by_name.get(key.name)
        if value is None:
            raise CorruptRecordError(
                f"{where}: NodeRecord {node_record.node_id!r} has no output {key.name!r} "
                "(R-NODE-1: outputs cover exactly the provides)"
            )
        if value.state is ValueState.SKIPPED:
            skipped.add(key.name)
            continue
        if value.stream is not None or getattr(key, "stream", False):
            raise DurableError(
                f"{where}: output {key.name!r} is a stream; stream outputs are not restored by "
                "this version of the durable runtime"
            )
        ready[key.name] = codecs.decode_value(
            key.type, value.type_id, value.version, value.data, value.digest, name=key.name
        )
    return NodeOutputs(reason=node_record.reason, ready=ready, skipped=frozenset(skipped))


class DurableCheckpointer(Checkpointer):
    """The checkpoint seam of one durable run (see the module documentation).

    Args:
        ledger: the run's committed record and commit path.
        codecs: encodes outputs and decodes restored values.
        restored: decoded outputs of confirmed nodes by ``(scope_id, node_id)`` (built before
            the run starts, so a corrupt value stops ``resume`` before any body runs).
        emit: called with each recovery event after the save it describes.
    """

    def __init__(
        self,
        ledger: L.Ledger,
        codecs: Codecs,
        restored: dict[tuple[str, str], NodeOutputs],
        emit: Emit,
    ) -> None:
        self._ledger = ledger
        self._codecs = codecs
        self._restored = restored
        self._emit = emit
        record = ledger.record
        self._run_id = record.run_id
        self._root_scope = record.root_scope
        self._known_scopes = dict(record.scopes)
        # Attempts the record held when this process started, by (parent, node, boundary).
        history: dict[tuple[str, str, str], list[tuple[str, AttemptRecord]]] = defaultdict(list)
        for attempt_id, attempt in record.attempts.items():
            history[(attempt.parent, attempt.node_id, attempt.boundary)].append(
                (attempt_id, attempt)
            )
        for tries in history.values():
            tries.sort(key=lambda item: item[1].index)
        self._history = history

    # -- helpers ---------------------------------------------------------------------------

    def _event(self, kind: EventKind, attempt: Attempt | None = None, **fields: Any) -> None:
        if attempt is not None:
            fields.setdefault("scope_path", attempt.scope.path)
            fields.setdefault("node_id", attempt.node_id)
            fields.setdefault("attempt_index", attempt.index)
            fields.setdefault("attempt_limit", attempt.limit)
        self._emit(
            RecoveryEvent(kind=kind, run_id=self._run_id, revision=self._ledger.revision, **fields)
        )

    # -- the seam --------------------------------------------------------------------------

    async def open_scope(
        self, graph: Graph, path: str, parent: Attempt | None, inputs: Values
    ) -> Scope:
        if parent is None:
            return Scope(id=self._root_scope, graph=graph, path=path, parent=None)
        scope_id = parent.id
        known = self._known_scopes.get(scope_id)
        if known is not None:
            if known.graph != graph.name or known.path != path:
                raise CorruptRecordError(
                    f"scope {scope_id} holds graph {known.graph!r} at path {known.path!r}, but "
                    f"the Sub node's attempt now runs graph {graph.name!r} at path {path!r} "
                    "(R-SCOPE-2)"
                )
            return Scope(id=scope_id, graph=graph, path=path, parent=parent)
        node = parent.node
        wiring = [
            ("in", b.parent.name, b.child.name)
            if isinstance(b, In)
            else ("out", b.parent.name, b.child.name)
            for b in node.bindings
        ]
        fingerprint = bindings_fingerprint(graph.name, wiring)

        def add_scope(record: RunRecord) -> None:
            L.open_scope(
                record, scope_id, graph=graph.name, path=path, inputs=fingerprint, bindings=True
            )

        self._ledger.defer(add_scope)
        return Scope(id=scope_id, graph=graph, path=path, parent=parent)

    async def begin_node(self, scope: Scope, node: Any) -> Attempt:
        outputs = self._restored.get((scope.id, node.id))
        if outputs is not None:
            node_record = self._known_scopes[scope.id].nodes[node.id]
            attempt = Attempt(id=node_record.attempt, scope=scope, node=node, restored=outputs)
            self._event(EventKind.NODE_RESTORED, attempt)
            return attempt
        for attempt_id, record in self._history.get((scope.id, node.id, ""), ()):
            if record.state is AttemptState.ACTIVE:
                attempt = Attempt(id=attempt_id, scope=scope, node=node)
                self._event(EventKind.ATTEMPT_ADOPTED, attempt)
                return attempt
            where = f"{scope.path}/{node.id}" if scope.path else node.id
            raise NodeFailedError(
                f"node {where!r} failed for good in an earlier process (root attempt "
                f"{attempt_id} is {record.state.value}); a failed attempt is never run again "
                "and no Retry budget is refilled (R-ATT-4). Start a new run id to run it again.",
                path=where,
            )
        attempt_id = L.new_id()
        await self._ledger.commit_async(
            lambda record: L.begin_attempt(record, attempt_id, parent=scope.id, node_id=node.id)
        )
        attempt = Attempt(id=attempt_id, scope=scope, node=node)
        self._event(EventKind.ATTEMPT_STARTED, attempt)
        return attempt

    async def begin_try(self, parent: Attempt, boundary: str, index: int, limit: int) -> Attempt:
        history = self._history.pop((parent.id, parent.node_id, boundary), None)
        if history:
            last_id, last = history[-1]
            limit = last.limit
            if last.state is AttemptState.ACTIVE:
                attempt = Attempt(
                    id=last_id,
                    scope=parent.scope,
                    node=parent.node,
                    parent=parent,
                    boundary=boundary,
                    index=last.index,
                    limit=limit,
                )
                self._event(EventKind.ATTEMPT_ADOPTED, attempt)
                return attempt
            index = max(index, last.index + 1)
            if index > limit:
                return Attempt(
                    id="",
                    scope=parent.scope,
                    node=parent.node,
                    parent=parent,
                    boundary=boundary,
                    index=index,
                    limit=limit,
                )
        attempt_id = L.new_id()
        node_id = parent.node_id

        def begin(record: RunRecord) -> None:
            L.begin_attempt(
                record,
                attempt_id,
                parent=parent.id,
                node_id=node_id,
                boundary=boundary,
                index=index,
                limit=limit,
            )

        await self._ledger.commit_async(begin)
        attempt = Attempt(
            id=attempt_id,
            scope=parent.scope,
            node=parent.node,
            parent=parent,
            boundary=boundary,
            index=index,
            limit=limit,
        )
        self._event(EventKind.ATTEMPT_STARTED, attempt)
        return attempt

    async def fail_attempt(self, attempt: Attempt, error: BaseException) -> None:
        stored = self._ledger.record.attempts.get(attempt.id) if attempt.id else None
        if stored is None or stored.state is not AttemptState.ACTIVE:
            return
        await self._ledger.commit_async(lambda record: L.fail_attempt(record, attempt.id))
        self._event(EventKind.ATTEMPT_FAILED, attempt)

    async def commit_node(self, attempt: Attempt, outputs: NodeOutputs) -> None:
        values = [
            encode_value_record(
                self._codecs,
                key,
                key.name in outputs.ready,
                outputs.ready.get(key.name),
            )
            for key in attempt.node.provides
        ]
        reason = NodeReason(outputs.reason)
        scope_id = attempt.scope.id

        def confirm(record: RunRecord) -> None:
            L.confirm_node(
                record,
                scope_id,
                node_id=attempt.node_id,
                attempt_id=attempt.id,
                reason=reason,
                outputs=values,
            )

        await self._ledger.commit_async(confirm)
        self._event(EventKind.NODE_CONFIRMED, attempt)
