"""The resume plan: what a run starts from, worked out before any node runs.

A new run starts from nothing (:meth:`ResumePlan.fresh`). A resume loads the record and
:func:`plan_resume` checks it against the request (:func:`check_record`: format, run id,
version, definition and inputs; the whole record validated and every confirmed value decoded,
R-REC-1, R-REC-3, R-VAL-3), then works out what the record already holds: the restored outputs
of the confirmed nodes, the failures it implies (:func:`~durable_core.durable.recovery.
propagate_failures`), the streams to rebuild (:func:`~durable_core.durable.streamrecovery.
plan_streams`) and the processor nodes to adopt (:func:`~durable_core.durable.messages_recovery.
adopt_managed`). :func:`repair_streams` saves the stream repairs the plan lists in one CAS
(S-6) before the run goes on. The :class:`ResumePlan` is handed whole to the
:class:`~durable_core.durable.checkpointer.DurableCheckpointer`. Nothing is saved when a check
fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.durable.definition_diff import definition_mismatch
from durable_core.durable.events import EventKind, InputFingerprints
from durable_core.durable.ledger import Ledger
from durable_core.durable.messages_recovery import Adopted, adopt_managed
from durable_core.durable.preflight import RunRequest, input_parts
from durable_core.durable.recovery import Failures, decode_confirmed, propagate_failures
from durable_core.durable.streamrecovery import StreamPlan, plan_streams, repair
from durable_core.errors import (
    CodecError,
    CorruptRecordError,
    InputsMismatchError,
    VersionMismatchError,
)
from durable_core.graph import Graph
from durable_core.graph.checkpoint import NodeOutputs
from durable_core.history import HistoryTarget
from durable_core.plugins import DurablePluginManager, default_plugins
from durable_core.records import RECORD_FORMAT, RunRecord
from durable_core.records.integrity import validate_fresh
from durable_core.store import Store

__all__ = ["ResumePlan", "changed_inputs", "check_record", "plan_resume", "repair_streams"]


@attrs.frozen(eq=False)
class ResumePlan:
    """What a run starts from: built once before any node runs, then read only.

    Attributes:
        kind: ``RUN_STARTED`` for a new run, ``RUN_RESUMED`` for a resume (the first event).
        inputs: the fingerprints of the root inputs the record holds (for a resume: the way of
            counting the given inputs that matched it).
        restored: decoded outputs of confirmed nodes by ``(scope_id, node_id)``; their bodies
            do not run.
        failures: failures the record already implies; ``failures.terminal`` non-empty means
            the run failed for good and nothing runs.
        streams: what resume rebuilds for streams; None for a new run.
        managed: the committed state of processor nodes adopted from the record, by
            ``(scope_id, node_id)``.
    """

    kind: EventKind
    inputs: InputFingerprints
    restored: Mapping[tuple[str, str], NodeOutputs] = attrs.field(factory=dict)
    failures: Failures = attrs.field(factory=Failures)
    streams: StreamPlan | None = None
    managed: Mapping[tuple[str, str], Adopted] = attrs.field(factory=dict)

    @classmethod
    def fresh(cls, inputs: InputFingerprints) -> ResumePlan:
        """The plan of a new run: nothing restored, failed, adopted or to repair."""
        return cls(EventKind.RUN_STARTED, inputs)


def plan_resume(
    request: RunRequest,
    record: RunRecord,
    codecs: Codecs,
    store: Store,
    started: Graph | None,
    plugins: DurablePluginManager | None = None,
) -> ResumePlan:
    """Check ``record`` against ``request`` and work out what the resume starts from.

    Args: as :func:`check_record`.

    Returns:
        The :class:`ResumePlan` (``kind`` is ``RUN_RESUMED``).

    Raises:
        As :func:`check_record`; CorruptRecordError, CodecError: a stream or a processor's
            state in the record breaks a rule or no longer decodes.
    """
    graph = request.graph
    restored, given = check_record(request, record, codecs, store, started, plugins)
    streams = plan_streams(graph, record, codecs)
    failures = propagate_failures(record)
    managed = adopt_managed(graph, record, codecs, failures.propagated)
    return ResumePlan(
        EventKind.RUN_RESUMED,
        given,
        restored=restored,
        failures=failures,
        streams=streams,
        managed=managed,
    )


async def repair_streams(ledger: Ledger, plan: ResumePlan) -> ResumePlan:
    """Save the stream repairs ``plan`` lists, when it lists any; return the plan to run.

    One CAS converges every endpoint of each listed root and its failure (S-6); the failures
    are worked out again from the record it saved. A failed save raises
    (``CheckpointError``), and the next resume loads what was stored.
    """
    if plan.streams is None or not plan.streams.repairs:
        return plan
    repairs = plan.streams.repairs
    await asyncio.to_thread(ledger.commit, lambda p: repair(p, repairs))
    return attrs.evolve(plan, failures=propagate_failures(ledger.record))


def check_record(
    request: RunRequest,
    record: RunRecord,
    codecs: Codecs,
    store: Store,
    started: Graph | None,
    plugins: DurablePluginManager | None = None,
) -> tuple[dict[tuple[str, str], NodeOutputs], InputFingerprints]:
    """Check the loaded record against what resume was given (R-REC-1, R-REC-3).

    Args:
        request: the resume's arguments.
        record: the record loaded for ``request.run_id``.
        codecs: the runtime's registry (encodes the inputs, decodes the confirmed values).
        store: the run's store (its history names what changed in a refused resume).
        started: the graph this process last ran the run with, or None (it explains a
            definition change without a run log).
        plugins: the plugin manager asked for the parts of the run's saved definition and
            inputs (the run log keeps them); None: the process-wide one.

    Returns:
        The decoded outputs of the confirmed nodes by ``(scope_id, node_id)``, and the
        fingerprints of the inputs that matched.

    Raises:
        CorruptRecordError, VersionMismatchError, DefinitionMismatchError,
        InputsMismatchError, CodecError: as ``Runtime.resume`` documents.
    """
    graph, run_id, version = request.graph, request.run_id, request.version
    inputs, input_identity = request.inputs, request.input_identity
    if not 1 <= record.format <= RECORD_FORMAT:
        raise CorruptRecordError(
            f"run {run_id!r} has record format {record.format}; this version of Durable "
            f"reads formats 1 to {RECORD_FORMAT}. Use the Durable version that wrote it; "
            "nothing was saved.",
            path="$.Format",
            rule="R-REC-1",
        )
    if record.run_id != run_id:
        raise CorruptRecordError(
            f"the record loaded for run {run_id!r} names run {record.run_id!r}; nothing was "
            "saved. Check the store.",
            path="$.RunID",
            rule="R-STORE-3",
        )
    if record.version != version:
        raise VersionMismatchError(
            f"run {run_id!r} was started with version {record.version!r}, resume was given "
            f"{version!r}. Resume with the version it was started with, or start a new run "
            "id. Nothing was saved."
        )
    definition = graph.fingerprint()
    if record.definition != definition:
        raise definition_mismatch(graph, record, started, store=store, plugins=plugins)
    try:
        accepted = input_parts(graph, codecs, inputs, input_identity)
    except CodecError as exc:
        raise InputsMismatchError(
            f"resume of run {run_id!r}: {exc}; such an input cannot be the one the run was "
            "started with. Nothing was saved."
        ) from exc
    matched = [part for part in accepted if part.fingerprint == record.inputs]
    if not matched:
        paths = ""
        if input_identity:  # inputs that name a place: moving the project may be the cause
            paths = (
                " A { path = ... } input of a run configuration counts by its path relative "
                "to the configuration's folder; a run started before that rule counts it by "
                "its absolute path: resume such a run from its original folder, or fork it "
                "there."
            )
        changed = changed_inputs(store, record, accepted, plugins)
        if changed:
            names = ", ".join(repr(name) for name in changed)
            what = f"input {names} differs" if len(changed) == 1 else f"inputs {names} differ"
            raise InputsMismatchError(
                f"the inputs given to resume run {run_id!r} differ from those it was "
                f"started with: {what} (a value, or the codec id/version of its type, "
                f"changed). Resume needs the original inputs again.{paths} Nothing was "
                "saved.",
                changed=tuple(changed),
            )
        raise InputsMismatchError(
            f"the inputs given to resume run {run_id!r} differ from those it was started "
            "with (their fingerprints differ: a value, or the codec id/version of an input "
            f"type, changed). Resume needs the original inputs again.{paths} Nothing was "
            "saved."
        )
    validate_fresh(record, definition=graph.provided_names())
    return decode_confirmed(graph, record, codecs), matched[0]


def changed_inputs(
    store: Any,
    record: RunRecord,
    given: Iterable[InputFingerprints],
    plugins: DurablePluginManager | None = None,
) -> list[str]:
    """The names of the root inputs that differ from those ``record``'s run started with,
    judged by the per-input fingerprints its history keeps (the run log's ``inputs`` entry);
    empty when the history has none for the record's inputs. With several ways to count the
    given inputs (``input_identity``), the one with the fewest differences."""
    manager = plugins if plugins is not None else default_plugins()
    target = HistoryTarget(store, record.run_id, record.root_scope)
    saved = manager.saved_inputs(target, record.inputs)
    if saved is None:
        return []
    best: list[str] | None = None
    for part in given:
        names = sorted(
            name
            for name in saved.keys() | part.keys.keys()
            if saved.get(name) != part.keys.get(name)
        )
        if best is None or len(names) < len(best):
            best = names
    return best or []
