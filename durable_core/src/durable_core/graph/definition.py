"""Graph definitions: assembling a :class:`Graph` from nodes and Sub nodes, its static checks
and its fingerprint.

A :class:`Graph` has a name, root inputs (seeds) and nodes. Each node has an explicit id, the keys
it ``requires`` and ``provides``, a body (``def`` or ``async def``) or a child graph (a Sub
node), and an ordered list of aspects (G-2, G-8, G-9).

Checks happen at two moments, always before any body runs (G-5):

* when a node is added: its id (non-empty, no ``/``, unique), its keys (no key both required and
  provided, no key listed twice, one key per name in a graph, one source per key), its aspects,
  its body, and for a Sub node the direction and types of its bindings;
* at :meth:`Graph.validate` (``execute`` calls it): every required key has a source, there is no
  dependency cycle, every child graph is valid, and every ``Out`` binding reads a key the child
  graph really produces. ``validate`` then freezes the graph (and its child graphs): nodes can no
  longer be added, so its fingerprint cannot drift.

Every problem raises :class:`~durable_core.errors.GraphError` naming the graph, the node and the
key.

The declarations themselves (:class:`Node`, :class:`In`, :class:`Out`) are in
:mod:`durable_core.graph.nodes`; the frozen plan ``validate`` builds is in
:mod:`durable_core.graph.plan`. Both are importable from here.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from durable_core._nogc import nogc
from durable_core.errors import GraphError
from durable_core.graph.aspects import Aspect, Retry
from durable_core.graph.describe import FINGERPRINT_FORMAT, canonical_text
from durable_core.graph.function import analyse_function
from durable_core.graph.inbox import add_intakes
from durable_core.graph.keys import Key
from durable_core.graph.nodes import In, Node, Out
from durable_core.graph.plan import _Plan
from durable_core.graph.processor import Processor
from durable_core.graph.waits import add_timer

__all__ = ["FINGERPRINT_FORMAT", "Graph", "In", "Node", "Out", "count_nodes"]


"""Version of the canonical description hashed by :meth:`Graph.fingerprint`."""

F = TypeVar("F", bound=Callable[..., Any])


class Graph:
    """A graph definition (G-2, G-5, G-8, G-9).

    Args:
        name: the graph's name (non-empty); it names the graph's scopes in run records and
            must be unique among the graphs of one definition (a graph and its Sub children).
        inputs: the root inputs (seeds): keys given by the caller of ``execute`` (or, for a
            child graph, fed by the parent's ``In`` bindings).
        aspects: graph-wide aspects, wrapped around every node of this graph, outside the
            node's own aspects.

    Raises:
        GraphError: an empty name, a duplicate input, or an aspect that is not an
            :class:`~durable_core.graph.Aspect`.

    Example:
        >>> TEXT, WORDS = Key("text", str), Key("words", list[str])
        >>> g = Graph("wordcount", inputs=[TEXT])
        >>> @g.node("split", requires=[TEXT], provides=[WORDS])
        ... def split(rc):
        ...     rc.set(WORDS, rc.get(TEXT).split())
    """

    def __init__(
        self, name: str, inputs: Iterable[Key[Any]] = (), aspects: Iterable[Aspect] = ()
    ) -> None:
        if not isinstance(name, str) or not name:
            raise GraphError(f"a graph name must be a non-empty string, got {name!r}")
        self._name = name
        self._keys: dict[str, Key[Any]] = {}
        self._sources: dict[str, str | None] = {}  # key name -> node id; None for an input
        self._nodes: dict[str, Node] = {}
        self._aspects = _check_aspects(aspects, f"graph {name!r}")
        self._plan: Any = None
        self._fingerprint: str | None = None
        self._frozen = False
        inputs = tuple(inputs)
        for key in inputs:
            self._register_key(key, f"input of graph {name!r}")
            if key.name in self._sources:
                raise GraphError(f"graph {name!r}: input {key.name!r} is listed twice")
            self._sources[key.name] = None
        self._inputs = inputs

    # -- read-only views -------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The graph's name."""
        return self._name

    @property
    def inputs(self) -> tuple[Key[Any], ...]:
        """The root inputs (seeds), in declared order."""
        return self._inputs

    @property
    def aspects(self) -> tuple[Aspect, ...]:
        """The graph-wide aspects, first = outermost."""
        return self._aspects

    @property
    def nodes(self) -> Mapping[str, Node]:
        """The nodes by id, in the order they were added (read-only)."""
        return MappingProxyType(self._nodes)

    @property
    def keys(self) -> Mapping[str, Key[Any]]:
        """Every key of the graph (inputs, requires, provides) by name (read-only)."""
        return MappingProxyType(self._keys)

    @property
    def frozen(self) -> bool:
        """True once :meth:`validate` succeeded; a frozen graph takes no more nodes."""
        return self._frozen

    def source_of(self, key: Key[Any] | str) -> str | None:
        """The id of the node that provides ``key``, or None when it is a graph input.

        Raises:
            GraphError: the key has no source in this graph.
        """
        name = key if isinstance(key, str) else key.name
        if name not in self._sources:
            raise GraphError(f"graph {self._name!r}: key {name!r} has no source")
        return self._sources[name]

    def __repr__(self) -> str:
        return f"<Graph {self._name!r}: {len(self._nodes)} nodes>"

    # -- assembly ---------------------------------------------------------------------------

    def node(
        self,
        id: str,
        *,
        requires: Iterable[Key[Any]] = (),
        provides: Iterable[Key[Any]] = (),
        aspects: Iterable[Aspect] = (),
        executor: str | None = None,
    ) -> Callable[[F], F]:
        """Decorator adding the decorated function as a node; returns the function unchanged.

        Args:
            id: the node's id: non-empty, no ``/``, unique in this graph. Never generated:
                checkpoint identity must not drift when code is refactored.
            requires: keys the node waits for (AND gate).
            provides: keys the node produces; each key has exactly one source in a graph.
            aspects: the node's aspects, first = outermost.
            executor: None (default): the body takes the run context, ``body(rc)``.
                ``"default"`` or ``"local"``: the function form, see :meth:`add_node`.

        Raises:
            GraphError: see :meth:`add_node`.

        Example:
            >>> PATH, SIZE = Key("path", str), Key("size", int)
            >>> g = Graph("sizes", inputs=[PATH])
            >>> @g.node("measure", requires=[PATH], provides=[SIZE], executor="default")
            ... def measure(path: str) -> int:
            ...     return len(path)
        """

        def decorate(body: F) -> F:
            self.add_node(
                id, body, requires=requires, provides=provides, aspects=aspects, executor=executor
            )
            return body

        return decorate

    def add_node(
        self,
        id: str,
        body: Callable[..., Any],
        *,
        requires: Iterable[Key[Any]] = (),
        provides: Iterable[Key[Any]] = (),
        aspects: Iterable[Aspect] = (),
        executor: str | None = None,
    ) -> Node:
        """Add a node running ``body(rc)``, or a function-form body (G-2).

        Args:
            id: the node's id (see :meth:`node`).
            body: a plain function (run in a worker thread) or an ``async def`` function (run
                on the event loop), called with one argument, the run context. With
                ``executor`` given: a plain function called with the value of each required
                key, positionally in ``requires`` order, returning the provided value (one
                key), a tuple of them (several keys, in ``provides`` order) or None (no key);
                ``SKIP`` in place of a value skips that key.
            requires: keys the node waits for.
            provides: keys the node produces.
            aspects: the node's aspects, first = outermost.
            executor: None: the run-context form above. ``"default"``: the function form, run
                by the run's executor (``thread`` unless the run is given another: a process
                pool or a Dask cluster, where body and values travel pickled). ``"local"``:
                the function form, always in the owner's worker threads. Where a body runs is
                not part of the graph's fingerprint.

        Returns:
            The new node.

        Raises:
            GraphError: the graph is frozen; the id is empty, contains ``/`` or is taken; a key
                is listed twice, both required and provided, already provided by another
                source, or clashes by name with a different key of the graph; an aspect is not
                an Aspect; the body is not callable or is a generator function; a
                function-form body is ``async``, uses a stream key, or does not take one
                positional argument per required key; ``executor`` is not a known choice.
        """
        self._check_open(id)
        if not callable(body):
            raise GraphError(
                f"graph {self._name!r}, node {id!r}: expected a function as the body, got {body!r}"
            )
        if inspect.isasyncgenfunction(body) or inspect.isgeneratorfunction(body):
            raise GraphError(
                f"graph {self._name!r}, node {id!r}: the body is a generator function; write "
                "a plain function or an async function that sets its outputs on the context"
            )
        requires, provides = tuple(requires), tuple(provides)
        defaults: tuple[Any, ...] = ()
        if executor is not None:
            defaults = analyse_function(
                f"graph {self._name!r}, node {id!r}", body, executor, requires, provides
            )
        node = Node(
            id=id,
            requires=requires,
            provides=provides,
            aspects=_check_aspects(aspects, f"graph {self._name!r}, node {id!r}"),
            body=body,
            is_async=executor is None
            and (inspect.iscoroutinefunction(body) or _is_async_callable(body)),
            executor=executor,
            defaults=defaults,
        )
        self._add(node)
        return node

    def timer(
        self,
        id: str,
        *,
        provides: Key[Any],
        seconds: float | None = None,
        seconds_from: Key[Any] | None = None,
        requires: Iterable[Key[Any]] = (),
    ) -> Node:
        """Add a durable timer: a node that sets ``provides`` (a ``float`` key) to the deadline
        *now + seconds* once (X-TIMER). See :func:`durable_core.graph.waits.add_timer`.

        Raises:
            GraphError: see :func:`~durable_core.graph.waits.add_timer` and :meth:`add_node`.
        """
        return add_timer(
            self,
            id,
            provides=provides,
            seconds=seconds,
            seconds_from=seconds_from,
            requires=tuple(requires),
        )

    def processor(
        self,
        id: str,
        *,
        input: Key[Any],
        state: Any,
        initial: Any,
        requires: Iterable[Key[Any]] = (),
        provides: Iterable[Key[Any]] = (),
        retry: Retry | None = None,
        commit_every: int = 1,
        max_delay: float = 0.05,
        aspects: Iterable[Aspect] = (),
    ) -> Callable[[Callable[..., Any]], Processor[Any]]:
        """Decorator adding a processor node: one transaction per message of ``input`` (S-7).

        The decorated ``handler(rc, state, message) -> new_state`` (plain or ``async def``)
        runs once per message of the input stream, in order. Its new state, the values it sets
        and the elements it sends commit together, or not at all; see
        :mod:`durable_core.graph.processor`. The decorator returns the
        :class:`~durable_core.graph.Processor`, whose ``finish`` decorator registers
        ``finish(rc, state)``, run after the input ended (or ``rc.stop()``).

        Args:
            id: the node's id (see :meth:`node`).
            input: the stream key read message by message; the node requires it.
            state: the state's type (a codec must serve it for durable runs).
            initial: the state before the first message (an instance of ``state``).
            requires: further keys the node waits for (value keys: ``rc.get``).
            provides: keys it produces: value keys (``rc.set``, once per run of the node) and
                stream keys (``rc.writer(KEY).send``, committed with each message).
            retry: the per-message budget, ``Retry(attempts, delay=seconds)``; None: one try.
                A message whose budget is spent fails the node.
            commit_every: messages committed together at most (a batch; >= 1).
            max_delay: seconds the first message of a batch may wait for the batch to fill
                before it commits (>= 0).
            aspects: the node's aspects (a ``Timeout`` bounds the whole processing); a Retry
                aspect is refused: per-message retries are ``retry=``.

        Raises:
            GraphError: as :meth:`add_node`; also an input that is not a stream key, another
                stream in ``requires``, an initial state that is not a ``state``, a Retry
                aspect, or a parameter out of range.
        """
        requires = tuple(requires)
        aspects = tuple(aspects)
        where = f"graph {self._name!r}, processor {id!r}"
        for key in requires:
            if isinstance(key, Key) and key.stream:
                raise GraphError(
                    f"{where}: requires lists stream {key.name!r}; a processor reads one "
                    "stream, its input"
                )
        if any(isinstance(aspect, Retry) for aspect in aspects):
            raise GraphError(
                f"{where}: a Retry aspect cannot wrap a processor (its committed messages "
                "cannot be taken back); give the per-message budget as retry=Retry(n)"
            )

        def decorate(handler: Callable[..., Any]) -> Processor[Any]:
            self._check_open(id)
            processor = Processor(
                id,
                handler,
                input=input,
                state=state,
                initial=initial,
                retry=retry,
                commit_every=commit_every,
                max_delay=max_delay,
            )
            self.add_node(
                id,
                processor,
                requires=(input, *requires),
                provides=provides,
                aspects=aspects,
            )
            return processor

        return decorate

    def sub(
        self,
        id: str,
        child: Graph,
        *,
        bindings: Iterable[In | Out],
        aspects: Iterable[Aspect] = (),
    ) -> Node:
        """Add a Sub node running ``child`` as one node (G-9).

        The node requires the parent keys of its ``In`` bindings and provides the parent keys
        of its ``Out`` bindings. Every input of the child graph must be fed by exactly one
        ``In``; skipped inputs enter the child as skipped.

        Args:
            id: the node's id (see :meth:`node`).
            child: the child graph (validated with this graph).
            bindings: ``In(parent_key, child_input)`` and ``Out(child_key, parent_key)``.
            aspects: the node's aspects; they wrap the whole child run (a Retry re-runs the
                child from scratch in a fresh scope).

        Returns:
            The new node.

        Raises:
            GraphError: as :meth:`add_node`; also a binding of the wrong direction (an ``In``
                whose child key is not a child input), types or kinds that differ between the
                two keys of a binding, a child input bound twice or not at all, or a child graph
                that is this graph.
        """
        self._check_open(id)
        where = f"graph {self._name!r}, Sub node {id!r}"
        if not isinstance(child, Graph):
            raise GraphError(f"{where}: expected a Graph as the child, got {child!r}")
        if child is self:
            raise GraphError(f"{where}: a graph cannot contain itself")
        bindings = tuple(bindings)
        child_inputs = {key.name: key for key in child.inputs}
        fed: dict[str, In] = {}
        requires: list[Key[Any]] = []
        provides: list[Key[Any]] = []
        for binding in bindings:
            if isinstance(binding, In):
                if binding.child.name not in child_inputs:
                    direction = (
                        " (it is produced inside the child: use Out(child_key, parent_key) to "
                        "publish it)"
                        if binding.child.name in child._sources
                        else ""
                    )
                    raise GraphError(
                        f"{where}: In({binding.parent.name!r}, {binding.child.name!r}) binds "
                        f"a key that is not an input of child graph {child.name!r}{direction}"
                    )
                _check_same_type(where, binding.parent, child_inputs[binding.child.name])
                if binding.child.name in fed:
                    raise GraphError(
                        f"{where}: child input {binding.child.name!r} is bound by two In bindings"
                    )
                fed[binding.child.name] = binding
                if binding.parent not in requires:
                    requires.append(binding.parent)
            elif isinstance(binding, Out):
                child_key = child._keys.get(binding.child.name)
                if child_key is not None:
                    _check_same_type(where, child_key, binding.child)
                _check_same_type(where, binding.child, binding.parent)
                if binding.parent in provides:
                    raise GraphError(
                        f"{where}: parent key {binding.parent.name!r} is the target of two Out "
                        "bindings"
                    )
                provides.append(binding.parent)
            else:
                raise GraphError(
                    f"{where}: expected In(parent_key, child_key) or Out(child_key, "
                    f"parent_key) bindings, got {binding!r}"
                )
        unbound = [name for name in child_inputs if name not in fed]
        if unbound:
            raise GraphError(
                f"{where}: input {unbound[0]!r} of child graph {child.name!r} is not bound; "
                "add In(parent_key, child_key) for it"
            )
        node = Node(
            id=id,
            requires=tuple(requires),
            provides=tuple(provides),
            aspects=_check_aspects(aspects, where),
            child=child,
            bindings=bindings,
            is_async=True,
        )
        self._add(node)
        return node

    def _check_open(self, id: object) -> None:
        if self._frozen:
            raise GraphError(
                f"graph {self._name!r} is frozen (it was validated or run); build a new Graph "
                f"to add node {id!r}"
            )
        if not isinstance(id, str) or not id:
            raise GraphError(
                f"graph {self._name!r}: a node id must be a non-empty string, got {id!r}"
            )
        if "/" in id:
            raise GraphError(
                f"graph {self._name!r}, node {id!r}: a node id may not contain '/' (it "
                "separates Sub levels in paths)"
            )
        if id in self._nodes:
            raise GraphError(f"graph {self._name!r}: node id {id!r} is used twice")

    def _register_key(self, key: object, where: str) -> None:
        if not isinstance(key, Key):
            raise GraphError(f"{where}: expected a Key, got {key!r}")
        known = self._keys.get(key.name)
        if known is None:
            self._keys[key.name] = key
        elif known != key or known.capacity != key.capacity:
            raise GraphError(
                f"{where}: key {key!r} clashes with {known!r} of graph {self._name!r}: one "
                "name, one key (same type, kind and capacity)"
            )

    def _add(self, node: Node) -> None:
        where = f"graph {self._name!r}, node {node.id!r}"
        for label, keys in (("requires", node.requires), ("provides", node.provides)):
            seen: set[str] = set()
            for key in keys:
                self._register_key(key, where)
                if key.name in seen:
                    raise GraphError(f"{where}: {label} lists key {key.name!r} twice")
                seen.add(key.name)
        for key in node.requires:
            if key in node.provides:
                raise GraphError(
                    f"{where}: key {key.name!r} is both required and provided; a node cannot "
                    "feed itself"
                )
        for key in node.provides:
            if key.name in self._sources:
                source = self._sources[key.name]
                other = "an input of the graph" if source is None else f"node {source!r}"
                raise GraphError(
                    f"{where}: key {key.name!r} already has a source ({other}); every key has "
                    "exactly one source"
                )
        for key in node.provides:
            self._sources[key.name] = node.id
        self._nodes[node.id] = node

    # -- validation -------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the whole definition and freeze it (G-5, G-9).

        Raises:
            GraphError: a required key has no source; a dependency cycle; an ``Out`` binding
                reads a key its child graph does not produce; two different graphs of the
                definition share a name; a graph contains itself; any check of a child graph.
        """
        self._validate({}, [])

    def _validate(self, names: dict[str, Graph], stack: list[Graph]) -> None:
        if any(graph is self for graph in stack):
            chain = " -> ".join(graph.name for graph in [*stack, self])
            raise GraphError(f"graph {self._name!r} contains itself through Sub nodes: {chain}")
        known = names.get(self._name)
        if known is not None and known is not self:
            raise GraphError(
                f"two different graphs are named {self._name!r} in one definition; graph "
                "names identify scopes in run records, so give each graph its own name"
            )
        names[self._name] = self
        if self._plan is not None:  # already valid and frozen: only check names across graphs
            for node in self._nodes.values():
                if node.child is not None:
                    node.child._validate(names, [*stack, self])
            return
        add_intakes(self)  # a built-in intake node for each inbox key without a source
        for node in self._nodes.values():
            if node.processor is not None and any(isinstance(a, Retry) for a in self._aspects):
                raise GraphError(
                    f"graph {self._name!r}: its graph-wide Retry aspect would wrap processor "
                    f"{node.id!r}, whose committed messages cannot be taken back; put the Retry "
                    "on the other nodes' own aspects and give the processor retry=Retry(n)"
                )
            for key in node.requires:
                if key.name not in self._sources:
                    raise GraphError(
                        f"graph {self._name!r}, node {node.id!r}: required key {key.name!r} "
                        "has no source; add a node that provides it or declare it in the "
                        "graph's inputs"
                    )
            if node.child is not None:
                child = node.child
                child._validate(names, [*stack, self])
                for binding in node.bindings:
                    if not isinstance(binding, Out):
                        continue
                    if binding.child.name not in child._sources:
                        raise GraphError(
                            f"graph {self._name!r}, Sub node {node.id!r}: Out("
                            f"{binding.child.name!r}, {binding.parent.name!r}) reads a key "
                            f"that child graph {child.name!r} does not produce"
                        )
                    _check_same_type(
                        f"graph {self._name!r}, Sub node {node.id!r}",
                        child._keys[binding.child.name],
                        binding.child,
                    )
        plan = _Plan(self)
        self._plan = plan
        self._frozen = True

    def _ensure_plan(self) -> _Plan:
        if self._plan is None:
            self.validate()
        return self._plan

    # -- fingerprints -----------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The canonical JSON-ready description hashed by :meth:`fingerprint`.

        It holds the graph's name, inputs, keys (name, type name, kind, capacity), graph-wide
        aspects with their parameters in order, and every node (sorted by id) with its required
        and provided key names, its aspects in order, and for a Sub node its bindings and its
        child graph's description (recursively). Bodies are not part of it: changing what a
        body does is a business version change, not a definition change.

        Raises:
            GraphError: the graph is not valid (it is validated first).
        """
        self._ensure_plan()
        names: dict[type, str] = {}  # each plain class named once
        nodes = []
        for node in sorted(self._nodes.values(), key=lambda n: n.id):
            nodes.append(self._describe_node(node))
        return {
            "format": FINGERPRINT_FORMAT,
            "name": self._name,
            "inputs": sorted(key.name for key in self._inputs),
            "keys": [self._keys[name].describe(names) for name in sorted(self._keys)],
            "aspects": [aspect.describe() for aspect in self._aspects],
            "nodes": nodes,
        }

    @staticmethod
    def _describe_node(node: Node) -> dict[str, Any]:
        """One node's entry in :meth:`describe`."""
        entry: dict[str, Any] = {
            "id": node.id,
            "requires": sorted([key.name for key in node.requires]),
            "provides": sorted([key.name for key in node.provides]),
            "aspects": [aspect.describe() for aspect in node.aspects],
        }
        if node.processor is not None:
            entry["processor"] = node.processor.describe()
        if node.child is not None:
            entry["graph"] = node.child.describe()
            entry["bindings"] = sorted(
                ["in", b.parent.name, b.child.name]
                if isinstance(b, In)
                else ["out", b.child.name, b.parent.name]
                for b in node.bindings
            )
        return entry

    def fingerprint(self) -> str:
        """SHA-256 hex of the canonical description (the record's ``Definition``, R-REC-2).

        Stable across processes, platforms and hash seeds; changes when any id, key (name,
        type, kind, capacity), aspect (kind, parameters, order), binding or child graph
        changes. The graph is validated (and frozen) first.

        Raises:
            GraphError: the graph is not valid.
        """
        if self._fingerprint is None:
            self._fingerprint = self._digest()
        return self._fingerprint

    @nogc
    def _digest(self) -> str:
        """The fingerprint itself; the cyclic garbage collector is paused meanwhile (the
        description's objects are in no cycle)."""
        return hashlib.sha256(self.describe_text().encode("ascii")).hexdigest()

    def describe_text(self) -> str:
        """The canonical JSON text of :meth:`describe`, the bytes :meth:`fingerprint` hashes:
        exactly ``json.dumps(self.describe(), sort_keys=True, separators=(",", ":"),
        ensure_ascii=True)``, written by :func:`durable_core.graph.describe.canonical_text`.

        Raises:
            GraphError: the graph is not valid.
        """
        self._ensure_plan()
        return canonical_text(self)

    def describe_provides(self) -> dict[str, dict[str, list[str]]]:
        """For this graph and every child graph: each node's provided key names.

        Returns:
            ``{graph_name: {node_id: [provided key names in declared order]}}``, the shape the
            record integrity checker takes (R-NODE-1: outputs cover exactly the provides).

        Raises:
            GraphError: the graph is not valid.
        """
        self._ensure_plan()
        result: dict[str, dict[str, list[str]]] = {}
        pending = [self]
        while pending:
            graph = pending.pop()
            if graph._name in result:
                continue
            result[graph._name] = {
                node.id: [key.name for key in node.provides] for node in graph._nodes.values()
            }
            pending.extend(n.child for n in graph._nodes.values() if n.child is not None)
        return result

    def provided_names(self) -> Mapping[str, Mapping[str, tuple[str, ...]]]:
        """:meth:`describe_provides` as read-only mappings of tuples, built once per graph.

        A validated graph is frozen, so the answer never changes; ``resume`` checks every
        record against it without building it again.

        Raises:
            GraphError: the graph is not valid.
        """
        plan = self._ensure_plan()
        if plan.shapes is None:
            shapes: dict[str, Mapping[str, tuple[str, ...]]] = {}
            for name, graph in self.graphs().items():
                each = graph._ensure_plan()
                ids = (node.id for node in each.nodes)
                shapes[name] = MappingProxyType(dict(zip(ids, each.provides, strict=True)))
            plan.shapes = MappingProxyType(shapes)
        return plan.shapes

    def graphs(self) -> dict[str, Graph]:
        """This graph and every child graph, by name.

        Raises:
            GraphError: the graph is not valid.
        """
        self._ensure_plan()
        result: dict[str, Graph] = {}
        pending = [self]
        while pending:
            graph = pending.pop()
            if graph._name not in result:
                result[graph._name] = graph
                pending.extend(n.child for n in graph._nodes.values() if n.child is not None)
        return result


def count_nodes(graph: Graph) -> int:
    """Nodes of ``graph`` plus, for each Sub node, the nodes of its child graph (recursively)."""
    total = 0
    for node in graph.nodes.values():
        total += 1
        if node.child is not None:
            total += count_nodes(node.child)
    return total


def _is_async_callable(body: object) -> bool:
    call = getattr(body, "__call__", None)  # noqa: B004 - instances with async __call__
    func = getattr(body, "func", None)  # functools.partial
    return inspect.iscoroutinefunction(call) or (
        func is not None and inspect.iscoroutinefunction(func)
    )


def _check_aspects(aspects: Iterable[Aspect], where: str) -> tuple[Aspect, ...]:
    aspects = tuple(aspects)
    for aspect in aspects:
        if not isinstance(aspect, Aspect):
            raise GraphError(
                f"{where}: expected Aspect instances such as Retry(3) or Timeout(30), "
                f"got {aspect!r}"
            )
    return aspects


def _check_same_type(where: str, a: Key[Any], b: Key[Any]) -> None:
    if a.type != b.type or a.stream != b.stream:
        raise GraphError(
            f"{where}: binding connects key {a!r} with key {b!r}; both keys of a binding must "
            "have the same type and kind"
        )
