"""One view of a run's nodes, for ``durable inspect --nodes`` (E-2, X-HIST).

:func:`describe_nodes` joins what the record says of each node (confirmed, skipped, failed,
an active attempt, its Retry tries and message tries) with what the run's history says
(:mod:`durable_core.plugins.runlog`: when its attempt started, when its body started, how long
it ran and waited, its last error and where it failed). The record writes a running node's root
attempt only with the first change that needs it, so a node that runs or waits for its inputs
is known from the history: an attempt started (or adopted) with no confirmation or failure
after it.

It reads no business value and changes nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from durable_core.records import AttemptState, NodeReason, RunRecord

__all__ = ["NodeState", "NodeView", "describe_nodes"]


class NodeState:
    """The states a node is shown in."""

    CONFIRMED = "confirmed"
    """Its outputs are saved (by this process or an earlier one)."""
    RESTORED = "restored"
    """Confirmed earlier and restored from the record by the last process that ran the run."""
    SKIPPED = "skipped"
    """Confirmed as skipped (by its body, or because every input was skipped)."""
    FAILED = "failed"
    """Its root attempt failed for good."""
    RUNNING = "running"
    """Its body runs now (the run is running)."""
    WAITING = "waiting"
    """It began and waits for its inputs (or a slot); the run is running."""
    INTERRUPTED = "interrupted"
    """It began in a process that stopped before it ended; ``resume`` runs it again (or adopts
    its attempt)."""
    CANCELED = "canceled"
    """It began, and the run ended before it did (another node failed, or the run was
    canceled)."""
    NOT_STARTED = "not started"
    """Nothing of it is in the record or the history yet."""


@attrs.frozen
class NodeView:
    """One node (by path: ``"report/render"`` inside the Sub ``report``)."""

    path: str
    state: str
    retry_tries: int = 0
    """Retry tries begun (the record's, or the history's when it knows more)."""
    message_tries: int = 0
    """Tries of input messages in the record (a processor node)."""
    message_tries_failed: int = 0
    """Failed tries of input messages (the record's, or the history's when it knows more)."""
    started: str | None = None
    """When its current root attempt started (ISO 8601, UTC), from the history."""
    running_seconds: float | None = None
    """Its time running: from its body's start to its end (or to now, while it runs)."""
    waiting_seconds: float | None = None
    """Its time waiting for its inputs: from its start to its body's (or to now)."""
    last_error: str | None = None
    where: str | None = None
    """Where its last error was raised (``file:line in function``)."""
    last_error_time: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class _Seen:
    """What the history says of one node."""

    attempt: str = ""
    started: str | None = None
    running_at: str | None = None
    waited: float | None = None
    seconds: float | None = None
    waiting: float | None = None
    ended: str | None = None
    failed: bool = False
    canceled: bool = False
    restored: bool = False
    tries: set[str] = attrs.Factory(set)
    messages_failed: int = 0
    error: dict[str, Any] | None = None


def _is_root(entry: dict[str, Any]) -> bool:
    return "boundary" not in entry and entry.get("attempt", "1/1") == "1/1"


def _read(entries: Iterable[dict[str, Any]]) -> tuple[dict[str, _Seen], bool]:
    """Each node's :class:`_Seen`, and whether the last process's run has finished."""
    seen: dict[str, _Seen] = {}
    finished = False
    for entry in entries:
        event = entry.get("event")
        if event in ("run_started", "run_resumed"):
            finished = False
            for s in seen.values():
                s.restored = False
            continue
        if event == "run_finished":
            finished = True
            for s in seen.values():
                if s.attempt and s.ended is None:
                    s.canceled = True
            continue
        path = entry.get("node")
        if not isinstance(path, str):
            continue
        s = seen.setdefault(path, _Seen())
        when = entry.get("time") if isinstance(entry.get("time"), str) else None
        attempt = str(entry.get("attempt_id", ""))
        if event in ("attempt_started", "attempt_adopted"):
            if not _is_root(entry):
                s.tries.add(attempt)
            elif attempt != s.attempt or event == "attempt_adopted":
                started = s.started if attempt == s.attempt else when
                s.attempt, s.started, s.ended = attempt, started, None
                s.failed = s.canceled = False
                s.running_at = s.waited = s.seconds = s.waiting = None
        elif event == "node_running":
            s.running_at, s.waited = when, _number(entry.get("waiting"))
        elif event == "node_restored":
            s.restored = True
        elif event == "message_failed":
            s.messages_failed += 1
            s.error = entry
        elif event in ("node_confirmed", "attempt_failed"):
            if event == "attempt_failed":
                s.error = entry
            if event == "node_confirmed" or _is_root(entry):
                s.ended, s.failed = when, event == "attempt_failed"
                s.seconds = _number(entry.get("seconds"))
                s.waiting = _number(entry.get("waiting"))
    return seen, finished


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _graph_paths(graph: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    nodes = graph.nodes
    for node in nodes.values() if isinstance(nodes, Mapping) else nodes:
        path = prefix + node.id
        out.append(path)
        if getattr(node, "child", None) is not None:
            out.extend(_graph_paths(node.child, path + "/"))
    return out


def _since(iso: str | None, now: float) -> float | None:
    if iso is None:
        return None
    moment = datetime.datetime.fromisoformat(iso).timestamp()
    return round(max(now - moment, 0.0), 3)


def describe_nodes(
    record: RunRecord,
    graph: Any,
    entries: Sequence[dict[str, Any]],
    *,
    live: bool,
    now: float,
) -> list[NodeView]:
    """Every node of the run, by path (the graph's order when ``graph`` wrote the record,
    then the others the record or the history names, sorted).

    Args:
        record: the run's record.
        graph: the graph, when it wrote the record (same definition); else None.
        entries: the run's history (:func:`~durable_core.plugins.runlog.read_log`).
        live: whether the run may be running now (``inspect --peek``): a node begun and not
            ended is then running or waiting, else interrupted.
        now: the time (seconds since the epoch) a running node's times run to.
    """
    attempts = record.attempts

    def scope_of(attempt_id: str) -> str:
        # up a Retry chain to the scope of its root attempt (a child scope's id is the id of
        # the Sub node's attempt: the first scope met is the node's)
        seen: set[str] = set()
        current = attempts[attempt_id].parent
        while current not in record.scopes and current in attempts and current not in seen:
            seen.add(current)
            current = attempts[current].parent
        return current

    def void(scope_id: str) -> bool:
        seen: set[str] = set()
        current = scope_id
        while current in attempts and current not in seen:
            seen.add(current)
            if attempts[current].state is AttemptState.FAILED:
                return True
            current = attempts[current].parent
        return False

    def join(scope_path: str, node_id: str) -> str:
        return f"{scope_path}/{node_id}" if scope_path else node_id

    confirmed: dict[str, NodeReason] = {}
    for scope_id, scope in record.scopes.items():
        if void(scope_id):
            continue
        for node_id, node in scope.nodes.items():
            confirmed[join(scope.path, node_id)] = node.reason
    failed: set[str] = set()
    active: set[str] = set()
    tries: dict[str, int] = {}
    roots: dict[str, set[str]] = {}
    for attempt_id, a in attempts.items():
        scope_id = scope_of(attempt_id)
        scope = record.scopes.get(scope_id)
        if scope is None or void(scope_id):
            continue
        path = join(scope.path, a.node_id)
        if a.boundary:
            tries[path] = tries.get(path, 0) + 1
            continue
        roots.setdefault(attempt_id, set()).add(path)
        if a.state is AttemptState.FAILED:
            failed.add(path)
        elif a.state is AttemptState.ACTIVE:
            active.add(path)
    message_tries: dict[str, int] = {}
    message_failed: dict[str, int] = {}
    for m in record.messages.values():
        for path in roots.get(m.parent, ()):
            message_tries[path] = message_tries.get(path, 0) + 1
            if m.state is AttemptState.FAILED:
                message_failed[path] = message_failed.get(path, 0) + 1
    seen, finished = _read(entries)
    running_now = live and not finished

    order = _graph_paths(graph) if graph is not None else []
    known = set(order)
    others = (set(confirmed) | failed | active | set(tries) | set(seen)) - known
    views = []
    for path in [*order, *sorted(others)]:
        s = seen.get(path, _Seen())
        begun = s.attempt and s.ended is None
        reason = confirmed.get(path)
        if reason is not None:
            state = (
                NodeState.SKIPPED
                if reason == NodeReason.SKIPPED
                else NodeState.RESTORED
                if s.restored
                else NodeState.CONFIRMED
            )
        elif path in failed or (s.failed and path not in active):
            state = NodeState.FAILED
        elif begun and running_now:
            state = NodeState.RUNNING if s.running_at is not None else NodeState.WAITING
        elif begun and s.canceled:
            state = NodeState.CANCELED
        elif begun or path in active:
            state = NodeState.RUNNING if running_now else NodeState.INTERRUPTED
        else:
            state = NodeState.NOT_STARTED
        running, waiting = s.seconds, s.waiting
        if begun and state in (NodeState.RUNNING, NodeState.WAITING):
            if s.running_at is not None:
                running = _since(s.running_at, now)
                waiting = s.waited
            else:
                waiting = _since(s.started, now)
        error = s.error or {}
        views.append(
            NodeView(
                path=path,
                state=state,
                retry_tries=max(tries.get(path, 0), len(s.tries)),
                message_tries=message_tries.get(path, 0),
                message_tries_failed=max(message_failed.get(path, 0), s.messages_failed),
                started=s.started,
                running_seconds=running,
                waiting_seconds=waiting,
                last_error=error.get("error"),
                where=error.get("where"),
                last_error_time=error.get("time"),
            )
        )
    return views
