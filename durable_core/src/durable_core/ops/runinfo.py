"""Metadata of a stored run, for ``durable inspect`` and ``durable list`` (SPEC E-2).

:func:`describe_record` reads a :class:`~durable_core.records.RunRecord` and returns counts,
identities and states only: it never decodes or shows a business value (no ``Data``, no
``Digest``, no cursor bytes), and it never changes the record.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs

from durable_core.durable.definition_diff import mismatch_changes
from durable_core.graph.definition import count_nodes
from durable_core.records import AttemptState, NodeReason, RunRecord
from durable_core.records.check import check_record, definition_matches

if TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = [
    "AttemptInfo",
    "RunInfo",
    "RunStatus",
    "ScopeInfo",
    "StreamInfo",
    "check_record",
    "definition_matches",
    "describe_record",
    "run_status",
]


class RunStatus(enum.StrEnum):
    """The status of a stored run, derived from its record (and the graph, when known).

    - ``completed``: every node of the root graph is confirmed (needs the graph).
    - ``failed``: a node of the root graph failed for good (its root attempt is failed).
    - ``incomplete``: neither: ``durable resume`` continues it. Without the graph, a run is
      ``incomplete`` when a node of the root graph has an active attempt.
    - ``settled``: without the graph, no node of the root graph is active or failed: the run
      completed, or stopped between two nodes; give the graph (a config) to tell which.
    - ``running``: reported by ``durable list`` when another process owns the run.
    """

    COMPLETED = "completed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    SETTLED = "settled"
    RUNNING = "running"


@attrs.frozen
class ScopeInfo:
    """One scope: where it is mounted and which nodes it has confirmed."""

    id: str
    path: str
    graph: str
    parent_attempt: str
    confirmed: tuple[str, ...]
    skipped: tuple[str, ...]
    void: bool
    """True when an attempt above this scope failed: its results are never reused (R-ATT-4)."""


@attrs.frozen
class AttemptInfo:
    """One attempt that is not confirmed (active or failed), for the operator to see."""

    id: str
    scope_path: str
    node_id: str
    boundary: str
    index: int
    limit: int
    state: str


@attrs.frozen
class StreamInfo:
    """One stream endpoint's bookkeeping: positions and counts, never message bytes."""

    id: str
    scope_path: str
    node_id: str
    key: str
    group: str
    generation: int
    last_sequence: int
    acked_through: int
    pending: int
    terminal: str


@attrs.frozen
class RunInfo:
    """What ``durable inspect`` shows about one run (E-2): metadata only."""

    run_id: str
    format: int
    revision: int
    version: str
    definition: str
    inputs: str
    status: str
    definition_matches: bool | None
    """Whether the record's definition is the given graph's fingerprint (None: no graph)."""
    root_nodes_confirmed: int
    root_nodes_total: int | None
    nodes_confirmed: int
    """Nodes confirmed in the record's valid scopes: the root graph's and the Sub graphs'
    (a Sub node's failed tries do not count), as ``durable run`` counts nodes."""
    nodes_total: int | None
    """Nodes of the graph and of its Sub graphs (recursively), when the graph wrote the run;
    else None."""
    attempts: dict[str, int]
    """Attempt counts by state (active, failed, confirmed)."""
    retries: int
    """Retry tries after a first try: Retry attempts with index > 1, and a processor's
    message tries with index > 1."""
    scopes: tuple[ScopeInfo, ...]
    open_attempts: tuple[AttemptInfo, ...]
    streams: tuple[StreamInfo, ...]
    messages: dict[str, int]
    managed: int
    definition_changes: dict[str, Any] | None = None
    """When asked for and the definition differs from the graph: what changed, as lists of
    paths under ``added``, ``removed``, ``changed`` (nodes), ``keys``, ``inputs`` and
    ``graphs`` (mount paths, ``""`` the root graph), and ``complete`` (False when the
    definition the run started with is not in the run's history, so only what the record
    shows is listed). ``None`` otherwise."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return attrs.asdict(self, recurse=True)


def _root_node_ids(graph: Any) -> list[str] | None:
    if graph is None:
        return None
    nodes = graph.nodes
    if isinstance(nodes, dict):
        return [str(n) for n in nodes]
    return [getattr(n, "id", n) for n in nodes]


def run_status(record: RunRecord, graph_node_ids: Iterable[str] | None = None) -> str:
    """Derive a run's status (see :class:`RunStatus`) from its record.

    Args:
        record: the stored record.
        graph_node_ids: the ids of the root graph's nodes, when the graph is known.

    Returns:
        One of the :class:`RunStatus` values except ``running``.
    """
    root = record.scopes.get(record.root_scope)
    confirmed = set(root.nodes) if root is not None else set()
    root_attempts = [
        a
        for a in record.attempts.values()
        if a.parent == record.root_scope and a.boundary == "" and a.node_id not in confirmed
    ]
    if any(a.state == AttemptState.FAILED for a in root_attempts):
        return RunStatus.FAILED
    if graph_node_ids is not None:
        return RunStatus.COMPLETED if set(graph_node_ids) <= confirmed else RunStatus.INCOMPLETE
    if any(a.state == AttemptState.ACTIVE for a in root_attempts):
        return RunStatus.INCOMPLETE
    return RunStatus.SETTLED


def describe_record(
    record: RunRecord,
    graph: Any = None,
    *,
    explain_mismatch: bool = False,
    store: Any = None,
    plugins: DurablePluginManager | None = None,
) -> RunInfo:
    """Summarize a record for an operator, without any business value (E-2).

    Args:
        record: the record, as loaded through an exclusive session.
        graph: the configuration's graph when known; used for the status and the root node
            total only when it wrote the record (same definition fingerprint). A run of another
            graph, or of another version of it, is judged from its own record.
        explain_mismatch: when ``graph`` did not write the record, work out what changed
            (``RunInfo.definition_changes``; reads the run's history in ``store``).
        store: the run's store (its history of the run may keep the started definition).
        plugins: the plugin manager asked for the started definition (``explain_mismatch``);
            ``None`` for the process's default.

    Returns:
        The run's metadata.
    """
    matches = definition_matches(record, graph)
    node_ids = _root_node_ids(graph) if matches else None
    attempts = record.attempts
    scope_of_attempt: dict[str, str] = {}

    def scope_for(attempt_id: str) -> str:
        # walk Retry chains up to the scope that holds the root attempt (a child scope's id
        # is its Sub node's attempt id: the first scope met is the attempt's own)
        seen: set[str] = set()
        current = attempts[attempt_id].parent
        while current not in record.scopes and current in attempts and current not in seen:
            seen.add(current)
            current = attempts[current].parent
        return current

    for attempt_id in attempts:
        scope_of_attempt[attempt_id] = scope_for(attempt_id)

    def void(scope_id: str) -> bool:
        seen: set[str] = set()
        current = scope_id
        while current in attempts and current not in seen:  # a child scope id is an attempt id
            seen.add(current)
            if attempts[current].state == AttemptState.FAILED:
                return True
            current = attempts[current].parent
        return False

    def path_of(scope_id: str) -> str:
        scope = record.scopes.get(scope_id)
        return scope.path if scope is not None else "?"

    scopes = tuple(
        ScopeInfo(
            id=scope_id,
            path=scope.path,
            graph=scope.graph,
            parent_attempt="" if scope_id == record.root_scope else scope_id,
            confirmed=tuple(
                sorted(n for n, r in scope.nodes.items() if r.reason == NodeReason.COMPLETED)
            ),
            skipped=tuple(
                sorted(n for n, r in scope.nodes.items() if r.reason == NodeReason.SKIPPED)
            ),
            void=void(scope_id),
        )
        for scope_id, scope in sorted(record.scopes.items(), key=lambda kv: (kv[1].path, kv[0]))
    )
    states = collections.Counter(str(a.state) for a in attempts.values())
    open_attempts = tuple(
        AttemptInfo(
            id=attempt_id,
            scope_path=path_of(scope_of_attempt[attempt_id]),
            node_id=a.node_id,
            boundary=a.boundary,
            index=a.index,
            limit=a.limit,
            state=str(a.state),
        )
        for attempt_id, a in sorted(
            attempts.items(),
            key=lambda kv: (
                path_of(scope_of_attempt[kv[0]]),
                kv[1].node_id,
                kv[1].boundary,
                kv[1].index,
            ),
        )
        if a.state != AttemptState.CONFIRMED
    )
    streams = tuple(
        StreamInfo(
            id=stream_id,
            scope_path=path_of(s.scope),
            node_id=s.node_id,
            key=s.key,
            group=s.group,
            generation=s.generation,
            last_sequence=s.last_sequence,
            acked_through=s.acked_through,
            pending=len(s.pending),
            terminal=str(s.terminal) or "open",
        )
        for stream_id, s in sorted(record.streams.items())
    )
    root = record.scopes.get(record.root_scope)
    root_confirmed = len(root.nodes) if root is not None else 0
    changes: dict[str, Any] | None = None
    if explain_mismatch and matches is False:
        found, complete = mismatch_changes(graph, record, store=store, plugins=plugins)
        changes = {kind: list(paths) for kind, paths in found.items()}
        changes["complete"] = complete
    return RunInfo(
        run_id=record.run_id,
        format=record.format,
        revision=record.revision,
        version=record.version,
        definition=record.definition,
        inputs=record.inputs,
        status=str(run_status(record, node_ids)),
        definition_matches=matches,
        root_nodes_confirmed=root_confirmed,
        root_nodes_total=len(node_ids) if node_ids is not None else None,
        nodes_confirmed=sum(len(s.confirmed) for s in scopes if not s.void),
        nodes_total=_count_nodes(graph) if node_ids is not None else None,
        attempts={state.value: states.get(state.value, 0) for state in AttemptState},
        retries=sum(1 for a in attempts.values() if a.boundary != "" and a.index > 1)
        + sum(1 for m in record.messages.values() if m.index > 1),
        scopes=scopes,
        open_attempts=open_attempts,
        streams=streams,
        messages={
            state.value: sum(1 for m in record.messages.values() if m.state == state)
            for state in AttemptState
        },
        managed=len(record.managed),
        definition_changes=changes,
    )


def _count_nodes(graph: Any) -> int:
    return count_nodes(graph)
