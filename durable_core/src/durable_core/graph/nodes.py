"""Node declarations: a graph's :class:`Node` and the bindings of a Sub node (:class:`In`,
:class:`Out`) (G-2, G-9).

These are the plain, frozen values a :class:`~durable_core.graph.Graph` is assembled from;
:mod:`durable_core.graph.definition` builds and checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from durable_core.graph.aspects import Aspect
from durable_core.graph.keys import Key
from durable_core.graph.processor import Processor

if TYPE_CHECKING:
    from durable_core.graph.definition import Graph

__all__ = ["In", "Node", "Out"]


@attrs.frozen
class In:
    """Feed a parent slot into a child graph's input (G-9).

    Args:
        parent: a key of the parent graph; the Sub node requires it.
        child: an input (seed) of the child graph, of the same type and kind.
    """

    parent: Key[Any]
    child: Key[Any]


@attrs.frozen
class Out:
    """Publish a child graph's result into the parent graph (G-9).

    Args:
        child: a key the child graph produces (a node's provides, or one of its inputs to pass
            through), of the same type and kind as ``parent``.
        parent: a key of the parent graph; the Sub node provides it.
    """

    child: Key[Any]
    parent: Key[Any]


@attrs.frozen(eq=False, repr=False)
class Node:
    """One node of a graph (G-2); built by :meth:`Graph.node`, :meth:`Graph.add_node` or
    :meth:`Graph.sub`.

    Attributes:
        id: the node's id, unique in its graph.
        requires: the keys it waits for, in declared order.
        provides: the keys it produces, in declared order.
        aspects: its own aspects, first = outermost (graph-wide aspects sit outside these).
        body: the function run with a :class:`~durable_core.graph.RunContext`; None for a Sub.
        child: the child graph of a Sub node; None for a plain node.
        bindings: the ``In``/``Out`` bindings of a Sub node.
        is_async: True when the body is an ``async def`` (runs on the event loop); plain
            bodies run in worker threads.
        executor: None for a body taking the run context; ``"default"`` (the run's executor)
            or ``"local"`` (the owner's worker threads) for a function-form body, which takes
            the required values as arguments and returns the provided ones (see
            :mod:`durable_core.graph.function`).
        defaults: for a function-form body, each input parameter's default value
            (``inspect.Parameter.empty`` where there is none), in ``requires`` order.
    """

    id: str
    requires: tuple[Key[Any], ...]
    provides: tuple[Key[Any], ...]
    aspects: tuple[Aspect, ...]
    body: Callable[..., Any] | None = None
    child: Graph | None = None
    bindings: tuple[In | Out, ...] = ()
    is_async: bool = False
    executor: str | None = None
    defaults: tuple[Any, ...] = ()

    @property
    def processor(self) -> Processor[Any] | None:
        """The :class:`~durable_core.graph.Processor` of a processor node, else None."""
        return self.body if isinstance(self.body, Processor) else None

    @property
    def is_sub(self) -> bool:
        """True for a Sub node."""
        return self.child is not None

    def __repr__(self) -> str:
        kind = f"Sub of {self.child.name!r}" if self.child is not None else "node"
        return f"<{kind} {self.id!r} requires={list(self.requires)} provides={list(self.provides)}>"
