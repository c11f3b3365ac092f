"""Fork: a new run that starts from an existing run's confirmed work (``durable fork``).

A run that failed for good, or that ``resume`` refuses because the graph's definition changed,
cannot continue under its own run id: its record is evidence of what happened and is never
rewritten. A fork copies into a **new** run id every confirmed node of the old run that is
still valid under the current graph, and the new run executes the rest.

Which nodes are copied (root graph only): a node confirmed in the old run's root scope that

- still exists in the current graph, provides the same key names, is a plain node (not a
  Sub graph) and has no stream output;
- is not named in ``rerun``, and no node upstream of it (in the current graph) is rerun or
  otherwise not copied: a node downstream of new work runs again.

Every other node runs in the new run. The new record gets the current definition fingerprint,
fresh attempt ids and the same inputs (their fingerprint must equal the old run's: a fork
changes the code, not the data). Before it is saved, the new record is validated and every
copied value decoded with the current codecs and checked against its key's type; a value that
no longer decodes refuses the fork (name the node in ``rerun`` to run it again instead).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from durable_core.durable.ledger import new_id
from durable_core.durable.preflight import input_parts
from durable_core.durable.recovery import decode_confirmed
from durable_core.durable.resume import changed_inputs
from durable_core.errors import (
    BusyError,
    CodecError,
    ConfigError,
    CorruptRecordError,
    InputsMismatchError,
)
from durable_core.graph import CancelToken, Graph, Key
from durable_core.records import (
    RECORD_FORMAT,
    AttemptRecord,
    AttemptState,
    NodeRecord,
    RunRecord,
    ScopeRecord,
    ValueRecord,
)
from durable_core.records.check import check_record
from durable_core.records.integrity import validate_record

__all__ = ["ForkPlan", "create_fork", "fork_run"]


@attrs.frozen
class ForkPlan:
    """What a fork copied and what the new run executes.

    Attributes:
        run_id: the old run.
        new_run_id: the new run.
        copied: root node ids copied from the old run, sorted.
        rerun: root node ids the new run executes, sorted.
    """

    run_id: str
    new_run_id: str
    copied: tuple[str, ...]
    rerun: tuple[str, ...]


def create_fork(
    runtime: Any,
    graph: Graph,
    *,
    run_id: str,
    new_run_id: str,
    version: str,
    inputs: Mapping[Key[Any], Any],
    rerun: Iterable[str] = (),
    input_identity: Mapping[Key[Any], Any] | None = None,
) -> ForkPlan:
    """Save the first record of ``new_run_id``, holding the old run's still-valid nodes.

    The old run is read through an exclusive session and never changed.

    Args:
        runtime: the :class:`~durable_core.durable.Runtime` whose store and codecs are used.
        graph: the current graph.
        run_id: the run to fork.
        new_run_id: the new run's id; it must have no record yet.
        version: the new run's business version.
        inputs: the root inputs; their fingerprint must equal the old run's.
        rerun: root node ids to run again (with everything downstream of them).
        input_identity: stand-ins for inputs in the fingerprint, as for
            :meth:`~durable_core.durable.Runtime.run`; the new record stores the fingerprint
            with them, so forking a run started before path inputs were fingerprinted relative
            to the configuration's folder gives a run that resumes from a moved folder.

    Returns:
        The :class:`ForkPlan`.

    Raises:
        ConfigError: ``new_run_id`` equals ``run_id`` or is empty, or ``rerun`` names a node
            the graph does not have.
        NotFoundError: the old run has no record.
        BusyError: the old or the new run is owned by another session.
        ConflictError: the new run id already has a record (inside a ``CheckpointError``-free
            refusal: nothing was saved).
        InputsMismatchError: the inputs differ from the old run's.
        CorruptRecordError: the old record is corrupt, or the new one would break a rule.
        CodecError: a value to copy no longer decodes to its key's type.
    """
    rerun = tuple(rerun)
    if not new_run_id:
        raise ConfigError("the new run id must not be empty")
    if new_run_id == run_id:
        raise ConfigError(
            f"a fork needs a new run id: {run_id!r} is the run being forked, and its record is "
            "never rewritten"
        )
    unknown = sorted(set(rerun) - set(graph.nodes))
    if unknown:
        raise ConfigError(
            f"cannot rerun {', '.join(map(repr, unknown))}: graph {graph.name!r} has no such "
            f"node; its nodes: {', '.join(sorted(graph.nodes))}"
        )
    store, codecs = runtime.store, runtime.codecs
    try:
        source = store.acquire(run_id)
    except BusyError as exc:  # name the run to fork, not the new one
        raise BusyError(str(exc), owner=exc.owner, run_id=run_id) from exc
    with source as session:
        old = session.load()
    _check_source(old, run_id)
    accepted = runtime.input_fingerprints(graph, inputs, input_identity)
    fingerprint = accepted[0]
    if old.inputs not in accepted:
        given = input_parts(graph, codecs, inputs, input_identity)
        changed = changed_inputs(store, old, given)
        names = ", ".join(repr(name) for name in changed)
        what = (
            ""
            if not changed
            else f" (input {names} differs)"
            if len(changed) == 1
            else f" (inputs {names} differ)"
        )
        raise InputsMismatchError(
            f"the inputs differ from those run {run_id!r} was started with{what}: a fork keeps "
            "the inputs (copied nodes were computed from them). Give the original inputs, or "
            "start a new run. Nothing was saved.",
            changed=tuple(changed),
        )
    copied = _copyable(graph, old, set(rerun))
    root = new_id()
    attempts: dict[str, AttemptRecord] = {}
    nodes: dict[str, NodeRecord] = {}
    old_root = old.scopes[old.root_scope]
    for node_id in sorted(copied):
        attempt = new_id()
        attempts[attempt] = AttemptRecord(root, node_id, state=AttemptState.CONFIRMED)
        stored = old_root.nodes[node_id]
        nodes[node_id] = NodeRecord(
            node_id,
            attempt,
            reason=stored.reason,
            outputs=[attrs.evolve(v) for v in stored.outputs],
        )
    record = RunRecord(
        run_id=new_run_id,
        format=RECORD_FORMAT,
        revision=1,
        version=version,
        definition=graph.fingerprint(),
        inputs=fingerprint,
        root_scope=root,
        scopes={
            root: ScopeRecord(
                graph=graph.name, path="", inputs=fingerprint, nodes=nodes, bindings=False
            )
        },
        attempts=attempts,
    )
    try:
        validate_record(record, definition=graph.provided_names())
        decode_confirmed(graph, record, codecs)
    except (CorruptRecordError, CodecError) as exc:
        raise type(exc)(
            f"fork of run {run_id!r} refused: a copied node would not be valid in the new run "
            f"({exc}). Name that node with --rerun (rerun=) to run it again; nothing was saved"
        ) from exc
    try:
        new_session = store.acquire(new_run_id)
    except BusyError as exc:
        raise BusyError(str(exc), owner=exc.owner, run_id=new_run_id) from exc
    with new_session:
        new_session.save(record, 0)
    everything = set(graph.nodes)
    return ForkPlan(run_id, new_run_id, tuple(sorted(copied)), tuple(sorted(everything - copied)))


def fork_run(
    runtime: Any,
    graph: Graph,
    *,
    run_id: str,
    new_run_id: str,
    version: str,
    inputs: Mapping[Key[Any], Any],
    rerun: Iterable[str] = (),
    max_running: int | None = None,
    cancel: CancelToken | None = None,
    input_identity: Mapping[Key[Any], Any] | None = None,
) -> Any:
    """Fork ``run_id`` into ``new_run_id`` (:func:`create_fork`) and execute the new run.

    Returns:
        The new run's :class:`~durable_core.durable.DurableResult` (as ``resume`` returns it:
        ``restored`` counts the copied nodes).

    Raises:
        As :func:`create_fork`, then as :meth:`~durable_core.durable.Runtime.resume`.
    """
    create_fork(
        runtime,
        graph,
        run_id=run_id,
        new_run_id=new_run_id,
        version=version,
        inputs=inputs,
        rerun=rerun,
        input_identity=input_identity,
    )
    return runtime.resume(
        graph,
        run_id=new_run_id,
        version=version,
        inputs=inputs,
        max_running=max_running,
        cancel=cancel,
        input_identity=input_identity,
    )


def _check_source(record: RunRecord, run_id: str) -> None:
    try:
        check_record(record, run_id)
    except CorruptRecordError as exc:
        raise CorruptRecordError(
            f"run {run_id!r} cannot be forked: its record is corrupt ({exc}); nothing was saved",
            path=exc.path,
            rule=exc.rule,
        ) from exc


def _copyable(graph: Graph, old: RunRecord, rerun: set[str]) -> set[str]:
    """The root nodes to copy: confirmed, still the same shape, and nothing upstream reruns."""
    root = old.scopes[old.root_scope]
    provider = {key.name: node.id for node in graph.nodes.values() for key in node.provides}
    candidates: set[str] = set()
    for node_id, stored in root.nodes.items():
        node = graph.nodes.get(node_id)
        if node is None or node.child is not None or node_id in rerun:
            continue
        if [v.name for v in stored.outputs] != [k.name for k in node.provides]:
            continue
        if any(_is_stream(v) for v in stored.outputs):
            continue
        candidates.add(node_id)
    # a node copies only when every node upstream of it (in this graph) copies too
    copied: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node_id in sorted(candidates - copied):
            upstream = {
                provider[key.name] for key in graph.nodes[node_id].requires if key.name in provider
            }
            if upstream <= copied:
                copied.add(node_id)
                changed = True
    return copied


def _is_stream(value: ValueRecord) -> bool:
    return value.stream is not None
