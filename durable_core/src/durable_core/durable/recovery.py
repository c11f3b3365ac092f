"""What ``resume`` checks and works out from a loaded record before any node runs.

:func:`check_definition` checks what the record says about scopes and streams against the graph
(a child scope must be the scope of a Sub node of the definition, fingerprinted from its stable
bindings; a stream must name a stream key of its scope's graph). :func:`decode_confirmed` runs it,
then decodes every confirmed value of every scope (R-VAL-3) and checks that every confirmed
node's upstream nodes are confirmed too (R-NODE-2; a stream's producer need only be reliably
open, S-3), so that a damaged record stops ``resume``
before any body runs. :func:`propagate_failures` works out which active
attempts have really failed already and which nodes of the root graph failed for good.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from durable_core._nogc import nogc
from durable_core._quickinit import quick_init
from durable_core.codecs import Codecs
from durable_core.durable.copies import ATOMS
from durable_core.durable.fingerprint import sub_scope_fingerprint
from durable_core.errors import CodecError, CorruptRecordError
from durable_core.graph import Graph
from durable_core.graph.checkpoint import NodeOutputs
from durable_core.records import AttemptState, RunRecord, ValueState

__all__ = [
    "Failures",
    "check_definition",
    "decode_confirmed",
    "decode_outputs",
    "propagate_failures",
]

_ADVICE = "Durable does not repair records: keep this one as evidence and find what wrote it."

_NOT_DECODED = object()  # a stored value its codec's decode raised for

# ``NodeOutputs(reason, ready, skipped, checked, as_is)``, built once per confirmed node of a
# resume; ``as_is`` when the one value is an atom (what DurableCheckpointer.share hands on).
_checked_outputs = quick_init(NodeOutputs, "reason", "ready", "skipped", "checked", "as_is")


def decode_outputs(
    codecs: Codecs, provides: Iterable[Any], node_record: Any, where: str
) -> NodeOutputs:
    """Decode a NodeRecord's outputs for the engine (R-VAL-3).

    Args:
        codecs: the registry that decodes the values.
        provides: the node's provided keys.
        node_record: the stored NodeRecord.
        where: the run, scope and node, for messages.

    Returns:
        The outputs: every ready value decoded, every skipped key listed; ``checked`` (each
        value is an instance of its key's declared type) unless an output is a stream.

    Raises:
        CorruptRecordError: a digest does not match, or the outputs do not cover the provides.
        CodecError: a codec id/version changed, or a value is not of the declared type.

    A stream output's value is its :class:`~durable_core.records.StreamDescriptorRecord`; the
    durable checkpointer turns it into a stream (S-1).
    """

    def decode(key: Any, value: Any) -> Any:
        return codecs.decode_value(
            key.type, value.type_id, value.version, value.data, value.digest, name=key.name
        )

    return _decode_outputs(decode, provides, node_record, lambda: where)


def _decode_outputs(
    decode: Callable[[Any, Any], Any],
    provides: Iterable[Any],
    node_record: Any,
    where: Callable[[], str],
) -> NodeOutputs:
    """Decode ``node_record``'s outputs; ``where()`` names the node in a message (built only
    when one is raised)."""
    outputs = node_record.outputs
    if len(outputs) == 1 and type(provides) is tuple and len(provides) == 1:
        # One plain output where one is provided (the usual node): the same checks as below,
        # without the map by name.
        key, value = provides[0], outputs[0]
        if (
            value.name == key.name
            and value.state is ValueState.READY
            and value.stream is None
            and not key.stream
        ):
            try:
                decoded = decode(key, value)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"{where()}: {exc}", path=exc.path, rule=exc.rule or "R-VAL-3"
                ) from exc
            except CodecError as exc:
                raise CodecError(f"{where()}: {exc}") from exc
            return NodeOutputs(
                reason=node_record.reason,
                ready={key.name: decoded},
                skipped=frozenset(),
                checked=True,  # the decoder checked the declared type
            )
    by_name = {v.name: v for v in outputs}
    ready: dict[str, Any] = {}
    skipped: set[str] = set()
    streams = False
    for key in provides:
        value = by_name.get(key.name)
        if value is None:
            raise CorruptRecordError(
                f"{where()}: the NodeRecord has no output {key.name!r} (the outputs "
                "cover exactly the node's provides)",
                rule="R-NODE-1",
            )
        if value.state is ValueState.SKIPPED:
            skipped.add(key.name)
            continue
        if value.stream is not None or key.stream:
            if value.stream is None or not key.stream:
                raise CorruptRecordError(
                    f"{where()}: output {key.name!r} is "
                    + (
                        "a stream key without a stream descriptor"
                        if value.stream is None
                        else "a value key holding a stream descriptor"
                    ),
                    rule="S-1",
                )
            # The checkpointer rebuilds the stream from the descriptor (S-1).
            ready[key.name] = value.stream
            streams = True
            continue
        try:
            ready[key.name] = decode(key, value)
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"{where()}: {exc}", path=exc.path, rule=exc.rule or "R-VAL-3"
            ) from exc
        except CodecError as exc:
            raise CodecError(f"{where()}: {exc}") from exc
    # Values decoded here were checked against their declared types; a stream descriptor is
    # not a value yet, and the stream built from it is checked where it is published.
    return NodeOutputs(
        reason=node_record.reason, ready=ready, skipped=frozenset(skipped), checked=not streams
    )


class _StoredDecoders:
    """One :class:`~durable_core.codecs.registry.StoredDecoder` per declared type and codec:
    a record of 10,000 ``int`` outputs looks its codec up once."""

    def __init__(self, codecs: Codecs) -> None:
        self._codecs = codecs
        self._decoders: dict[tuple[Any, str, str], Any] = {}
        self._last: tuple[Any, str, str, Any] | None = None  # the decoder used last, and for what

    def __call__(self, key: Any, value: Any) -> Any:
        last = self._last
        if (
            last is not None
            and last[0] is key.type
            and last[1] == value.type_id
            and last[2] == value.version
        ):
            decoder = last[3]  # the usual record: many values of one type in a row
        else:
            decoder = self._decoder(key, value)
        try:
            decoded = decoder.decode(value.data)
        except Exception:
            # Decode again on the checked path: it raises the error it names.
            return decoder(value.data, key.name)
        if type(decoded) is decoder.declared:
            return decoded
        return decoder.checked(decoded, key.name)

    def _decoder(self, key: Any, value: Any) -> Any:
        try:
            cache_key = (key.type, value.type_id, value.version)
            decoder = self._decoders.get(cache_key)
        except TypeError:  # a type form that cannot be hashed: look it up each time
            cache_key, decoder = None, None
        if decoder is None:
            decoder = self._codecs.stored_decoder(
                key.type, value.type_id, value.version, name=key.name
            )
            if cache_key is not None:
                self._decoders[cache_key] = decoder
                self._last = (key.type, value.type_id, value.version, decoder)
        elif cache_key is not None:
            self._last = (key.type, value.type_id, value.version, decoder)
        return decoder


def check_definition(graph: Graph, record: RunRecord) -> None:
    """Check the record's scopes and streams against the run's graph (R-SCOPE-1, R-SCOPE-2, S-2).

    - The root scope's ``Bindings`` is false: its ``Inputs`` is the record's input fingerprint.
    - A child scope is the scope of a Sub node: its id is an attempt of a Sub node of its
      parent scope's graph whose child graph is the scope's ``Graph``; its ``Bindings`` is true
      and its ``Inputs`` is the fingerprint of that Sub node's bindings (this runtime writes
      every child scope so; a child scope holding a fingerprint of input values was not written
      by it and cannot be checked).
    - A ``Streams`` entry names a stream key of its scope's graph (a graph without stream keys
      has no ``Streams`` entries).

    Args:
        graph: the run's graph (its definition matches the record's).
        record: the loaded record, already validated (``validate_record``).

    Raises:
        CorruptRecordError: at the first scope or stream that breaks a rule; nothing is changed.
    """
    graphs = graph.graphs()
    scopes, attempts = record.scopes, record.attempts
    for scope_id, scope in scopes.items():
        where = f"run {record.run_id!r}: Scopes[{scope_id!r}]"
        scope_graph = graphs.get(scope.graph)
        if scope_graph is None:
            raise CorruptRecordError(
                f"{where} names graph {scope.graph!r}, which is not part of the definition. "
                + _ADVICE,
                rule="R-SCOPE-1",
            )
        if scope_id == record.root_scope:
            if scope.bindings:
                raise CorruptRecordError(
                    f"{where} is the root scope but says Bindings: true; the root scope's "
                    "Inputs is the fingerprint of the run's input values. " + _ADVICE,
                    rule="R-SCOPE-1",
                )
            continue
        owner = attempts[scope_id]  # validate_record: every child scope is an attempt
        root_attempt = owner
        while root_attempt.boundary:
            root_attempt = attempts[root_attempt.parent]
        parent_graph = graphs[scopes[root_attempt.parent].graph]
        sub = parent_graph.nodes.get(owner.node_id)
        if sub is None or sub.child is None or sub.child.name != scope.graph:
            found = (
                "no such node"
                if sub is None
                else "a plain node"
                if sub.child is None
                else f"a Sub node of graph {sub.child.name!r}"
            )
            raise CorruptRecordError(
                f"{where} of graph {scope.graph!r} is named by an attempt of node "
                f"{owner.node_id!r} of graph {parent_graph.name!r}, which is {found}; a child "
                "scope belongs to a Sub node of that graph. " + _ADVICE,
                rule="R-SCOPE-2",
            )
        if not scope.bindings:
            raise CorruptRecordError(
                f"{where} (the child scope of Sub node {owner.node_id!r}) says Bindings: false, "
                "a fingerprint of input values; this runtime fingerprints every child scope "
                "from the Sub node's stable bindings (Bindings: true) and cannot check this one. "
                + _ADVICE,
                rule="R-SCOPE-1",
            )
        if scope.inputs != sub_scope_fingerprint(sub):
            raise CorruptRecordError(
                f"{where} (the child scope of Sub node {owner.node_id!r}) has Inputs "
                f"{scope.inputs}, which is not the fingerprint of that Sub node's bindings. "
                + _ADVICE,
                rule="R-SCOPE-1",
            )
    for stream_id, stream in record.streams.items():
        scope_graph = graphs[scopes[stream.scope].graph]  # validate_record: the scope exists
        key = scope_graph.keys.get(stream.key)
        if key is None or not key.stream:
            stream_keys = sorted(name for name, k in scope_graph.keys.items() if k.stream)
            raise CorruptRecordError(
                f"run {record.run_id!r}: Streams[{stream_id!r}] names key {stream.key!r}, which "
                f"is not a stream key of graph {scope_graph.name!r} (its stream keys: "
                f"{stream_keys or 'none'}). " + _ADVICE,
                rule="S-2",
            )


@nogc
def decode_confirmed(
    graph: Graph, record: RunRecord, codecs: Codecs
) -> dict[tuple[str, str], NodeOutputs]:
    """Decode every confirmed node of every scope and check dependency closure.

    Scopes under failed attempts are decoded and checked too: their results are void, but a
    record whose old values no longer decode is damaged all the same (R-ATT-5). The scopes and
    streams are checked against the graph first (:func:`check_definition`). Each value's
    digest is not checked again: ``validate_record`` checked every one against the same bytes.

    Args:
        graph: the run's graph (its definition matches the record's).
        record: the loaded record, already validated (``validate_record``, which checks every
            value's digest) and not changed since.
        codecs: the registry that decodes the values.

    Returns:
        The decoded outputs by ``(scope id, node id)``, ``checked`` as in
        :func:`decode_outputs`.

    Raises:
        CorruptRecordError: a scope names a graph or node the definition does not have, a
            confirmed node's upstream node in its scope is not confirmed (R-NODE-2), or
            :func:`check_definition` refuses the record.
        CodecError: a value's codec id/version changed or it does not decode to its type.
    """
    check_definition(graph, record)
    graphs = graph.graphs()
    decode = _StoredDecoders(codecs)
    restored: dict[tuple[str, str], NodeOutputs] = {}
    ready_state, no_skips = ValueState.READY, frozenset()
    for scope_id, scope in record.scopes.items():
        scope_graph = graphs.get(scope.graph)
        if scope_graph is None:
            raise CorruptRecordError(
                f"scope {scope_id} of run {record.run_id!r} names graph {scope.graph!r}, which "
                "is not part of the definition",
                rule="R-SCOPE-1",
            )
        label = scope.path or "(root)"
        graph_nodes = scope_graph.nodes
        scope_nodes = scope.nodes
        sources, source_of = scope_graph._sources, scope_graph.source_of
        for node_id, node_record in scope_nodes.items():
            node = graph_nodes.get(node_id)
            if node is None:
                raise CorruptRecordError(
                    f"scope {scope_id} holds node {node_id!r}, which graph {scope.graph!r} "
                    "does not have",
                    rule="R-NODE-1",
                )
            for key in node.requires:
                # source_of without a call per key; it raises for a key with no source
                source = sources[key.name] if key.name in sources else source_of(key)
                if source is not None and source not in scope_nodes:
                    if key.stream and _reliably_open(record, scope_id, source, key.name):
                        continue  # a stream reader may be confirmed before its producer
                    raise CorruptRecordError(
                        f"run {record.run_id!r}, scope {label!r}: node {node_id!r} is confirmed "
                        f"but its upstream node {source!r} (source of {key.name!r}) is not; a "
                        "node is confirmed only after everything it read was. "
                        "Durable does not repair records: keep this one as evidence.",
                        rule="R-NODE-2",
                    )
            provides, outputs = node.provides, node_record.outputs
            if len(provides) == 1 and len(outputs) == 1:
                # The usual node, inline: what _decode_outputs does for it, without a call or
                # a message builder per node. Anything unusual, and any error, takes the full
                # path below, which names the node.
                key, value = provides[0], outputs[0]
                if (
                    value.name == key.name
                    and value.state is ready_state
                    and value.stream is None
                    and not key.stream
                ):
                    last = decode._last
                    if (
                        last is not None
                        and last[0] is key.type
                        and last[1] == value.type_id
                        and last[2] == value.version
                    ):
                        # The decoder of the value before: decode here, without a call of
                        # _StoredDecoders per node; anything but a value of exactly the
                        # declared type goes through it below (which names the error).
                        decoder = last[3]
                        try:
                            decoded = decoder.decode(value.data)
                        except Exception:
                            decoded = _NOT_DECODED
                        if decoded is not _NOT_DECODED and type(decoded) is decoder.declared:
                            restored[(scope_id, node_id)] = _checked_outputs(
                                node_record.reason,
                                {key.name: decoded},
                                no_skips,
                                True,
                                decoder.declared in ATOMS,
                            )
                            continue
                    try:
                        decoded = decode(key, value)
                    except (CorruptRecordError, CodecError):
                        pass
                    else:
                        restored[(scope_id, node_id)] = _checked_outputs(
                            node_record.reason,
                            {key.name: decoded},
                            no_skips,
                            True,
                            type(decoded) in ATOMS,
                        )
                        continue
            restored[(scope_id, node_id)] = _decode_outputs(
                decode,
                provides,
                node_record,
                lambda label=label, node_id=node_id: (
                    f"run {record.run_id!r}, scope {label!r}, node {node_id!r}"
                ),
            )
    return restored


def _reliably_open(record: RunRecord, scope_id: str, node_id: str, key: str) -> bool:
    """Whether stream ``key`` of node ``node_id`` in ``scope_id`` was reliably opened: its writer
    entry is saved (for a Sub node passing a child's stream out: the Sub has a child scope) and
    the producing node has a root attempt that is not confirmed: still active, or failed after
    the reader was confirmed (the run then failed for good; S-3, S-5)."""
    root = next(
        (
            a
            for a in record.attempts.values()
            if a.parent == scope_id and a.node_id == node_id and not a.boundary
        ),
        None,
    )
    if root is None or root.state is AttemptState.CONFIRMED:
        return False  # no writer, or a confirmed one without its NodeRecord
    return any(
        e.scope == scope_id and e.node_id == node_id and e.key == key
        for e in record.streams.values()
    ) or _is_sub_alias(record, scope_id, node_id)


def _is_sub_alias(record: RunRecord, scope_id: str, node_id: str) -> bool:
    scope = record.scopes.get(scope_id)
    return scope is not None and any(
        s.path == (f"{scope.path}/{node_id}" if scope.path else node_id)
        for s in record.scopes.values()
    )


@attrs.frozen
class Failures:
    """Failures that a loaded record already implies.

    Attributes:
        propagated: active attempts that really failed: each owns (is the id of) a child
            scope in which a node's root attempt failed, so the Sub node's try or root
            attempt failed with it, and the process stopped before saving that. The runtime
            saves them failed with its next save; a Retry then goes on from the next try.
        terminal: ``(node id, attempt id)`` of the root graph's nodes whose root attempt is
            failed (stored, or propagated): the run failed for good.
    """

    propagated: tuple[str, ...] = ()
    terminal: tuple[tuple[str, str], ...] = ()


def propagate_failures(record: RunRecord) -> Failures:
    """Work out the failures that ``record`` implies (R-ATT-4, R-SCOPE-2).

    When a node fails inside a Sub node's child scope, the engine saves the node's failure,
    then the failure of the Sub node's attempt (a Retry try, or its root attempt). A process
    that dies between the two saves leaves the Sub's attempt active over a failed child. That
    attempt failed all the same (a child failure is the Sub node's failure, G-9), so it is
    treated as failed, up the chain of root attempts, until a Retry try or the root scope.

    Args:
        record: a validated record.

    Returns:
        The :class:`Failures`.
    """
    attempts = record.attempts
    root = record.root_scope
    failed = {aid for aid, a in attempts.items() if a.state is AttemptState.FAILED}
    work = [aid for aid in failed if not attempts[aid].boundary]
    propagated: list[str] = []
    while work:
        scope_id = attempts[work.pop()].parent
        if scope_id == root or scope_id in failed:
            continue
        owner = attempts.get(scope_id)
        if owner is None or owner.state is not AttemptState.ACTIVE:
            continue
        failed.add(scope_id)
        propagated.append(scope_id)
        if not owner.boundary:
            work.append(scope_id)
    terminal = sorted(
        (attempts[aid].node_id, aid)
        for aid in failed
        if not attempts[aid].boundary and attempts[aid].parent == root
    )
    return Failures(propagated=tuple(sorted(propagated)), terminal=tuple(terminal))
