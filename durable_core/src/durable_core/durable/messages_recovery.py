"""What ``resume`` adopts from the managed containers of processor nodes (S-7, S-9, S-10).

A processor node commits each message (or batch) in one save: the message attempts confirmed,
the input acknowledged, and its ``ManagedRecord`` (owned by scope, processing attempt and node)
holding the state snapshot and every ordinary value set so far. When a process stops after such
commits but before the node itself was confirmed, ``resume`` adopts that container:

- its ``Values`` become the node's root attempt's *staged* values
  (:attr:`~durable_core.graph.Attempt.staged`): they count as already set and are published only
  after the node commits; adoption raises no revision and reprocesses no acknowledged input;
- its ``State`` is the state the processor continues from.

:func:`adopt_managed` works this out from a validated record before anything runs, and refuses,
with a :class:`~durable_core.errors.CorruptRecordError` (or a
:class:`~durable_core.errors.CodecError` when a codec changed), a container that cannot be
adopted: one under a nested (Retry) attempt (nested attempts carry no values), one of a node
that is not a processor, a value that is a stream reference, a key the node does not provide,
a key stored twice, a value that is neither ready nor skipped (pending is never stored), a
value or state that does not decode to its declared type, and a container without its state
snapshot (every message commit saves one: going on from the initial state instead would lose
what the acknowledged messages committed, since they are never delivered again). Containers
under a failed attempt or a failed ancestor are void: they are checked like every other one,
and never adopted.

It also checks every message attempt against the stream entry it names (S-7, S-8):

- its processing attempt is the root attempt of a processor node, and the entry is that node's
  own input group: the group named by the node's path, of a source providing the node's input
  key when the source is in the node's own scope;
- a *confirmed* message of a processor that goes on (an active root attempt with no failed
  ancestor) was acknowledged in the save that confirmed it: its input element is no longer in
  the group's ``Pending`` and not past the group's ``AckedThrough`` (a processor acknowledges
  in order). Otherwise the element would be processed again on top of a state that holds it.

Messages under a failed attempt or ancestor keep only the structural checks: a later failure,
or a later generation of the input, never makes history corrupt.

The ownership rules themselves (every confirmed message attempt has its container and every
container a confirmed message) are checked by
:func:`~durable_core.records.integrity.validate_record`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.errors import CodecError, CorruptRecordError
from durable_core.graph import Graph
from durable_core.graph.checkpoint import Values
from durable_core.records import AttemptState, ManagedRecord, RunRecord, ValueRecord, ValueState
from durable_core.records.path import corrupt, path_of

__all__ = ["Adopted", "adopt_managed"]

_ADVICE = "Durable does not repair records: keep this one as evidence and find what wrote it."


@attrs.frozen
class Adopted:
    """What a processor node continues from after a restart (S-7, S-10).

    Attributes:
        attempt: the node's active root attempt that owns the container.
        staged: the ordinary values already set (ready and skipped), decoded.
        state: the decoded state snapshot the node continues from.
        container: the container's key in ``RunRecord.managed``.
    """

    attempt: str
    staged: Values
    state: Any
    container: str


def adopt_managed(
    graph: Graph, record: RunRecord, codecs: Codecs, failed: Iterable[str] = ()
) -> dict[tuple[str, str], Adopted]:
    """Decode every managed container and say which ones a resume adopts (S-10).

    Args:
        graph: the run's graph (its definition matches the record's).
        record: the loaded record, already validated (``validate_record``).
        codecs: the registry that decodes the values and states.
        failed: attempts that the record implies have failed although stored active
            (:attr:`~durable_core.durable.recovery.Failures.propagated`).

    Returns:
        The adoptions by ``(scope id, node id)``: one per container whose processing attempt is
        an active root attempt with no failed ancestor.

    Raises:
        CorruptRecordError: a container cannot be adopted, or a message attempt does not agree
            with its input stream (see the module documentation); the error names its JSON
            path and the rule.
        CodecError: a value's or the state's codec id/version changed, or it does not decode
            to its declared type.
    """
    graphs = graph.graphs()
    void = _Void(record, failed)
    adopted: dict[tuple[str, str], Adopted] = {}
    for key, container in record.managed.items():
        base = ("Managed", (key,))
        attempt = record.attempts[container.parent]
        if attempt.boundary:
            raise corrupt(
                path_of(*base, "Parent"),
                "S-10",
                f"a managed container belongs to its node's root attempt, found the nested "
                f"attempt {container.parent} (Retry boundary {attempt.boundary!r}); nested "
                "attempts carry no values",
                _ADVICE,
            )
        scope = record.scopes[container.scope]
        node = graphs[scope.graph].nodes.get(container.node_id)
        processor = None if node is None else node.processor
        if node is None or processor is None:
            raise corrupt(
                path_of(*base, "NodeID"),
                "S-10",
                f"node {container.node_id!r} of graph {scope.graph!r} is not a processor node; "
                "only processor nodes have managed containers",
                _ADVICE,
            )
        staged = _decode_values(codecs, node, container, base)
        if container.state is None:
            raise corrupt(
                path_of(*base, "State"),
                "S-7",
                f"the managed container of processor {container.node_id!r} (scope "
                f"{scope.path or '(root)'!r}) holds no state snapshot, but its confirmed "
                "messages were acknowledged: every message commit saves the state, and "
                "starting from the initial state would lose what those messages committed",
                _ADVICE,
            )
        state = _decode(
            codecs,
            processor.state,
            container.state,
            (*base, "State"),
            f"the state of processor {container.node_id!r}",
        )
        if attempt.state is not AttemptState.ACTIVE or void(container.parent):
            continue  # history: checked, never adopted
        adopted[(container.scope, container.node_id)] = Adopted(
            attempt=container.parent, staged=staged, state=state, container=key
        )
    _check_messages(graphs, record, void)
    return adopted


def _check_messages(graphs: Mapping[str, Graph], record: RunRecord, void: _Void) -> None:
    """Every message attempt names its processor's own input group; every confirmed message
    of a processor that goes on was acknowledged with it (see the module documentation)."""
    for mid, message in record.messages.items():
        base = ("Messages", (mid,))
        attempt = record.attempts[message.parent]  # validate_record: it exists
        if attempt.boundary:
            raise corrupt(
                path_of(*base, "Parent"),
                "S-7",
                f"a message attempt belongs to its processor's root attempt, found the nested "
                f"attempt {message.parent} (Retry boundary {attempt.boundary!r})",
                _ADVICE,
            )
        scope = record.scopes[attempt.parent]  # validate_record: a root attempt's scope
        node = graphs[scope.graph].nodes.get(message.node_id)
        processor = None if node is None else node.processor
        if node is None or processor is None:
            raise corrupt(
                path_of(*base, "NodeID"),
                "S-7",
                f"node {message.node_id!r} of graph {scope.graph!r} is not a processor node; "
                "only processor nodes have message attempts",
                _ADVICE,
            )
        path = f"{scope.path}/{node.id}" if scope.path else node.id
        entry = record.streams[message.stream]  # validate_record: it exists, same group
        if entry.group != path or (
            entry.scope == attempt.parent and entry.key != processor.input.name
        ):
            raise corrupt(
                path_of(*base, "Stream"),
                "S-7",
                f"a message attempt of processor {path!r} names the entry of stream "
                f"{entry.key!r} of node {entry.node_id!r} read by group {entry.group!r}; a "
                f"processor's messages come from its own input {processor.input.name!r}, read "
                f"as group {path!r}",
                _ADVICE,
            )
        if message.state is not AttemptState.CONFIRMED:
            continue
        if attempt.state is not AttemptState.ACTIVE or void(message.parent):
            continue  # history: its group may have moved on, it is never continued
        sequence = message.sequence
        if any(p.sequence == sequence for p in entry.pending):
            problem = "is still pending in that group"
        elif sequence > entry.acked_through:
            problem = f"is past the group's AckedThrough {entry.acked_through}"
        else:
            continue
        raise corrupt(
            path_of(*base, "Sequence"),
            "S-8",
            f"message {sequence} of processor {path!r} is confirmed, but its input element "
            f"{problem}: a message is acknowledged in the save that confirms it, so resuming "
            "would process it again on top of a state that already holds it",
            _ADVICE,
        )


def _decode_values(
    codecs: Codecs, node: Any, container: ManagedRecord, base: tuple[Any, ...]
) -> Values:
    provides = {key.name: key for key in node.provides}
    ready: dict[str, Any] = {}
    skipped: set[str] = set()
    for index, value in enumerate(container.values):
        where = (*base, "Values", index)
        key = provides.get(value.name)
        if key is None:
            raise corrupt(
                path_of(*where, "Name"),
                "S-10",
                f"value {value.name!r} is not provided by node {node.id!r} (it provides "
                f"{sorted(provides)})",
                _ADVICE,
            )
        if value.name in ready or value.name in skipped:
            raise corrupt(
                path_of(*where, "Name"), "S-10", f"value {value.name!r} is stored twice", _ADVICE
            )
        if key.stream or value.stream is not None:
            raise corrupt(
                path_of(*where, "Stream" if value.stream is not None else "Name"),
                "S-10",
                f"a managed container holds ordinary values only, found the stream "
                f"{value.name!r}; a processor's streams are not values it set",
                _ADVICE,
            )
        if value.state == ValueState.SKIPPED:
            skipped.add(value.name)
            continue
        if value.state != ValueState.READY:
            raise corrupt(
                path_of(*where, "State"),
                "S-10",
                f"a stored value is ready or skipped, found {value.state!r}; pending is never "
                "stored",
                _ADVICE,
            )
        ready[value.name] = _decode(codecs, key.type, value, where, f"value {value.name!r}")
    return Values(ready, frozenset(skipped))


def _decode(
    codecs: Codecs, declared: Any, value: ValueRecord, where: tuple[Any, ...], what: str
) -> Any:
    if value.stream is not None:
        raise corrupt(
            path_of(*where, "Stream"),
            "S-10",
            f"{what} is a stream reference; a managed container holds ordinary values only",
            _ADVICE,
        )
    if value.state != ValueState.READY:
        raise corrupt(
            path_of(*where, "State"),
            "S-10",
            f"{what} must be a ready value, found {value.state!r}",
            _ADVICE,
        )
    try:
        return codecs.decode_value(
            declared, value.type_id, value.version, value.data, value.digest, name=value.name
        )
    except CorruptRecordError as exc:
        raise corrupt(path_of(*where, "Digest"), exc.rule or "R-VAL-3", str(exc), _ADVICE) from exc
    except CodecError as exc:
        raise CodecError(
            f"{what} in the run record cannot be adopted: {exc}. Resume with the codecs the "
            "run was started with"
        ) from exc


class _Void:
    """Whether an attempt, or any attempt or scope above it, has failed (memoized)."""

    def __init__(self, record: RunRecord, failed: Iterable[str]) -> None:
        self.attempts = record.attempts
        self.root = record.root_scope
        self.memo: dict[str, bool] = {aid: True for aid in failed}

    def __call__(self, attempt_id: str) -> bool:
        trail: list[str] = []
        current = attempt_id
        result = False
        while True:
            known = self.memo.get(current)
            if known is not None:
                result = known
                break
            attempt = self.attempts.get(current)
            if attempt is None:  # the root scope: the chain ended without a failure
                break
            trail.append(current)
            if attempt.state is AttemptState.FAILED:
                result = True
                break
            current = attempt.parent  # an outer attempt, or a scope (named by its Sub attempt)
        for ident in trail:
            self.memo[ident] = result
        return result
