"""Observer events of a run (G-11).

An :class:`Observer` hears when a graph (the root graph or a Sub's child graph) starts and
finishes, and when each node starts waiting for its inputs, starts running its body, and
finishes. Every event is reported at most once per node per graph run: a node retried by a
Retry reports ``node_running`` once, for its first try. A Sub node retried by a Retry runs its
child graph again in a fresh scope, and that child graph run reports its own series of events.

Observers are called on the event loop's thread, synchronously, in the order the events happen;
they should be quick (hand work to a queue if it is slow). An observer that raises is logged
(logger ``durable_core.graph``) and never fails a node or the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Scope

__all__ = ["GraphEvent", "NodeEvent", "Observer"]


@attrs.frozen
class GraphEvent:
    """A graph run started or finished.

    Attributes:
        graph: the graph's name.
        path: where the graph runs: ``""`` for the root graph, the Sub node's path otherwise.
        scope: the scope the graph runs in (its ``id`` comes from the checkpointer).
        status: at ``graph_finished``: ``"completed"``, ``"failed"`` or ``"canceled"``;
            None at ``graph_started``.
        error: at ``graph_finished`` of a failed graph: its error.
    """

    graph: str
    path: str
    scope: Scope
    status: str | None = None
    error: BaseException | None = None


@attrs.frozen
class NodeEvent:
    """A node is waiting, running, or finished.

    Attributes:
        node_id: the node's id in its graph.
        path: the node's path from the root graph (``"report/count"``).
        scope: the scope the node runs in.
        outcome: at ``node_finished``: ``"completed"``, ``"skipped"``, ``"failed"`` or
            ``"canceled"``; None otherwise.
        restored: at ``node_finished``: True when the outputs came from the checkpoint and the
            body did not run.
        error: at ``node_finished`` of a failed node: the node's error.
    """

    node_id: str
    path: str
    scope: Scope
    outcome: str | None = None
    restored: bool = False
    error: BaseException | None = None


class Observer:
    """Base class of run observers; override the events you need (G-11).

    Every method does nothing by default. Methods are called on the event loop thread; an
    exception raised by one is logged and ignored.
    """

    def graph_started(self, event: GraphEvent) -> None:
        """A graph run started (before any node of it waits)."""

    def graph_finished(self, event: GraphEvent) -> None:
        """A graph run finished; ``event.status`` says how."""

    def node_waiting(self, event: NodeEvent) -> None:
        """A node started waiting for its inputs."""

    def node_running(self, event: NodeEvent) -> None:
        """A node's body started (a Sub node: its child graph started), first try only."""

    def node_finished(self, event: NodeEvent) -> None:
        """A node finished; ``event.outcome`` and ``event.restored`` say how."""
