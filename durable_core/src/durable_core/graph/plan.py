"""The frozen plan of a validated graph: its nodes' keys as index tables, consumers, aspect
chains and stream readers, and the dependency-cycle check (G-5).

:meth:`Graph.validate <durable_core.graph.Graph.validate>` builds one :class:`_Plan` per graph
(linear in its size); the scheduler runs from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from durable_core.errors import GraphError
from durable_core.graph.aspects import Aspect, Retry
from durable_core.graph.keys import Key
from durable_core.graph.nodes import In, Node, Out

if TYPE_CHECKING:
    from durable_core.graph.definition import Graph


class _Plan:
    """The validated, precomputed shape of a graph the scheduler runs (linear in its size)."""

    __slots__ = (
        "_chains",
        "_readers",
        "_roles",
        "consumers",
        "graph",
        "index",
        "nodes",
        "out_of",
        "prov_maps",
        "provides",
        "req_maps",
        "requires",
        "shapes",
        "stream_keys",
    )

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: list[Node] = list(graph._nodes.values())
        self.index = {node.id: i for i, node in enumerate(self.nodes)}
        self.requires: list[tuple[str, ...]] = [
            tuple(key.name for key in node.requires) for node in self.nodes
        ]
        self.provides: list[tuple[str, ...]] = [
            tuple(key.name for key in node.provides) for node in self.nodes
        ]
        self.req_maps: list[dict[str, Key[Any]]] = [
            {key.name: key for key in node.requires} for node in self.nodes
        ]
        self.prov_maps: list[dict[str, Key[Any]]] = [
            {key.name: key for key in node.provides} for node in self.nodes
        ]
        consumers: dict[str, list[int]] = {}
        for i, names in enumerate(self.requires):
            for name in names:
                consumers.setdefault(name, []).append(i)
        self.consumers = consumers
        self.stream_keys = frozenset(name for name, key in graph._keys.items() if key.stream)
        self.shapes: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None  # provided_names
        # Out bindings of Sub nodes by child key name, for publishing child streams upward.
        self.out_of: dict[int, dict[str, str]] = {}
        for i, node in enumerate(self.nodes):
            if node.child is not None:
                self.out_of[i] = {
                    b.child.name: b.parent.name for b in node.bindings if isinstance(b, Out)
                }
        self._readers: dict[str, tuple[str, ...]] = {}
        self._roles: dict[str, tuple[tuple[str, str, bool], ...]] = {}
        graph_chain = [(aspect, f"graph:{k}") for k, aspect in enumerate(graph._aspects)]
        self._chains: list[tuple[tuple[Aspect, str], ...]] = [
            (*graph_chain, *((aspect, f"node:{k}") for k, aspect in enumerate(node.aspects)))
            for node in self.nodes
        ]
        _check_acyclic(graph, self)

    def chain(self, i: int) -> tuple[tuple[Aspect, str], ...]:
        """The aspect chain of node ``i`` with each aspect's fixed position, outermost first."""
        return self._chains[i]

    def stream_readers(self, name: str) -> tuple[str, ...]:
        """Paths (relative to this graph) of every node reading stream ``name``, through Subs."""
        readers = self._readers.get(name)
        if readers is None:
            found: list[str] = []
            for i in self.consumers.get(name, ()):
                node = self.nodes[i]
                if node.child is None:
                    found.append(node.id)
                    continue
                child_plan = node.child._ensure_plan()
                for binding in node.bindings:
                    if isinstance(binding, In) and binding.parent.name == name:
                        found.extend(
                            f"{node.id}/{path}"
                            for path in child_plan.stream_readers(binding.child.name)
                        )
            readers = tuple(found)
            self._readers[name] = readers
        return readers

    def retries(self, i: int) -> bool:
        """Whether node ``i``'s aspect chain holds a Retry (it may run its inner chain again)."""
        return any(isinstance(aspect, Retry) for aspect, _ in self._chains[i])

    def stream_roles(self, name: str) -> tuple[tuple[str, str, bool], ...]:
        """``(path, anchor, retried)`` of every node reading stream ``name``, through Subs,
        in the order of :meth:`stream_readers` (S-2).

        ``anchor`` is the path (relative to this graph) of the outermost Sub node on the way to
        the reader whose aspect chain holds a Retry, ``""`` when there is none: while that Sub
        node can still start a new try, the reader may read the stream again as a new group,
        from its first element. ``retried``: the reading node's own chain holds a Retry, so a
        try of it may end with elements received but not acknowledged, which the next try gets.
        """
        roles = self._roles.get(name)
        if roles is None:
            found: list[tuple[str, str, bool]] = []
            for i in self.consumers.get(name, ()):
                node = self.nodes[i]
                if node.child is None:
                    found.append((node.id, "", self.retries(i)))
                    continue
                child_plan = node.child._ensure_plan()
                here = self.retries(i)
                for binding in node.bindings:
                    if isinstance(binding, In) and binding.parent.name == name:
                        for path, anchor, retried in child_plan.stream_roles(binding.child.name):
                            if here:
                                anchor = node.id
                            elif anchor:
                                anchor = f"{node.id}/{anchor}"
                            found.append((f"{node.id}/{path}", anchor, retried))
            roles = tuple(found)
            self._roles[name] = roles
        return roles


def _check_acyclic(graph: Graph, plan: _Plan) -> None:
    """Kahn's algorithm over node -> consumer edges; raise naming a cycle if one exists."""
    count = len(plan.nodes)
    indegree = [0] * count
    successors: list[list[int]] = [[] for _ in range(count)]
    for i, names in enumerate(plan.requires):
        for name in names:
            source = graph._sources.get(name)
            if source is not None:
                j = plan.index[source]
                successors[j].append(i)
                indegree[i] += 1
    queue = [i for i in range(count) if indegree[i] == 0]
    done = 0
    while queue:
        j = queue.pop()
        done += 1
        for i in successors[j]:
            indegree[i] -= 1
            if indegree[i] == 0:
                queue.append(i)
    if done == count:
        return
    # Walk backwards along unfinished predecessors until a node repeats: that is a cycle.
    start = next(i for i in range(count) if indegree[i] > 0)
    seen: dict[int, int] = {}
    path: list[int] = []
    current = start
    while current not in seen:
        seen[current] = len(path)
        path.append(current)
        current = next(
            plan.index[src]
            for name in plan.requires[current]
            if (src := graph._sources.get(name)) is not None and indegree[plan.index[src]] > 0
        )
    cycle = [plan.nodes[i].id for i in reversed(path[seen[current] :])]
    cycle.append(cycle[0])
    raise GraphError(
        f"graph {graph.name!r}: dependency cycle {' -> '.join(repr(c) for c in cycle)}; a node "
        "cannot (even indirectly) wait for its own outputs"
    )
