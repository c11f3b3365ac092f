"""What changed between the definition a run was started with and the graph given to resume.

The record keeps one fingerprint of the whole definition (``Definition``, R-REC-2); its format
does not change, so it cannot say *what* changed. The parts' fingerprints are kept outside the
record instead: :class:`DefinitionFingerprints` rides on the ``run_started`` and ``run_resumed``
recovery events, the run log plugin writes them to the run's log (a ``definition`` line, see
:mod:`durable_core.plugins.runlog`) and gives them back on the ``durable_saved_definition``
hook (asked through the plugin manager: this module never reads a plugin's files), and the
runtime remembers the graphs it ran.

On a mismatch, :func:`definition_mismatch` compares the saved parts (when the run log or the
runtime still has them) with the current graph's and names the nodes added, removed and changed,
the keys and graph inputs that changed, and the graphs whose graph-wide aspects changed. Without
them, it names what the record itself shows (nodes confirmed or attempted in the record that the
graph no longer has, confirmed nodes whose outputs no longer match) and says that the rest is
not known.

The parts, each a short SHA-256 over its canonical description (the one the whole fingerprint
hashes, :meth:`Graph.describe`), are named by kind and path; a path is the node's or key's
mount position (``"report/render"`` inside the Sub ``report``):

- ``node:PATH``: the node's id, requires, provides, aspects, processor and, for a Sub node, its
  bindings and its child graph's name (the child graph's own parts are listed under its path);
- ``key:PATH``: the key's name, type and kind (stream capacity);
- ``input:PATH``: a graph input (its presence);
- ``graph:PATH``: a graph's name, its graph-wide aspects and the description's format
  (``graph:`` is the root graph).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from durable_core.errors import DefinitionMismatchError
from durable_core.graph import Graph
from durable_core.history import HistoryTarget
from durable_core.plugins.manager import DurablePluginManager, default_plugins
from durable_core.records import AttemptState, RunRecord

__all__ = [
    "LIST_LIMIT",
    "PART_DIGITS",
    "DefinitionFingerprints",
    "RecentGraphs",
    "definition_mismatch",
    "definition_parts",
    "describe_changes",
    "mismatch_changes",
]

PART_DIGITS = 16
"""Hex digits kept of each part's SHA-256 (64 bits: enough to tell a change, small in a log)."""

LIST_LIMIT = 10
"""A message names at most this many items of a list, then says how many more there are."""


def _join(mount: str, name: str) -> str:
    return f"{mount}/{name}" if mount else name


_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode


def _short(payload: object) -> str:
    return hashlib.sha256(_ENCODE(payload).encode("ascii")).hexdigest()[:PART_DIGITS]


def _walk(description: Mapping[str, Any], mount: str, parts: dict[str, str]) -> None:
    parts[f"graph:{mount}"] = _short(
        [description["format"], description["name"], description["aspects"]]
    )
    for name in description["inputs"]:
        parts[f"input:{_join(mount, name)}"] = _short(name)
    for key in description["keys"]:
        parts[f"key:{_join(mount, key['name'])}"] = _short(key)
    for node in description["nodes"]:
        path = _join(mount, node["id"])
        own = dict(node)
        child = own.pop("graph", None)
        if child is not None:
            own["graph"] = child["name"]
            _walk(child, path, parts)
        parts[f"node:{path}"] = _short(own)


def definition_parts(graph: Graph) -> dict[str, str]:
    """The fingerprints of ``graph``'s parts, by name (see the module documentation).

    Raises:
        GraphError: the graph is not valid.
    """
    parts: dict[str, str] = {}
    _walk(graph.describe(), "", parts)
    return parts


class DefinitionFingerprints:
    """A graph's whole definition fingerprint and, computed on first use, its parts'.

    Carried by the ``run_started`` and ``run_resumed`` recovery events so that a plugin (the
    run log) can keep the parts; nothing pays for them unless it asks.

    Args:
        graph: the graph being run (valid and frozen).
    """

    __slots__ = ("_graph", "_parts")

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._parts: dict[str, str] | None = None

    @property
    def fingerprint(self) -> str:
        """The whole definition's SHA-256 hex (the record's ``Definition``)."""
        return self._graph.fingerprint()

    def parts(self) -> dict[str, str]:
        """The parts' fingerprints by name (a copy; see :func:`definition_parts`)."""
        if self._parts is None:
            self._parts = definition_parts(self._graph)
        return dict(self._parts)

    def __repr__(self) -> str:
        return f"DefinitionFingerprints({self.fingerprint[:12]}…)"


class RecentGraphs:
    """The graphs a runtime last ran each run id with (at most ``limit`` run ids; thread-safe).

    Lets the runtime name what changed when a run it ran is resumed with another definition,
    even without a run log.
    """

    def __init__(self, limit: int = 256) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._graphs: dict[str, Graph] = {}

    def remember(self, run_id: str, graph: Graph) -> None:
        """Keep ``graph`` as the one ``run_id`` ran with (forgetting the oldest over the limit)."""
        with self._lock:
            self._graphs.pop(run_id, None)
            self._graphs[run_id] = graph
            while len(self._graphs) > self._limit:
                del self._graphs[next(iter(self._graphs))]

    def get(self, run_id: str) -> tuple[Graph, ...]:
        """The graph ``run_id`` last ran with here, as a tuple of zero or one graph."""
        with self._lock:
            graph = self._graphs.get(run_id)
        return () if graph is None else (graph,)


# -- the comparison ----------------------------------------------------------------------------


def _by_kind(parts: Mapping[str, str], kind: str) -> dict[str, str]:
    prefix = kind + ":"
    return {name[len(prefix) :]: fp for name, fp in parts.items() if name.startswith(prefix)}


def _compare(
    saved: Mapping[str, str], current: Mapping[str, str], kind: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    old, new = _by_kind(saved, kind), _by_kind(current, kind)
    added = tuple(sorted(set(new) - set(old)))
    removed = tuple(sorted(set(old) - set(new)))
    changed = tuple(sorted(p for p in set(old) & set(new) if old[p] != new[p]))
    return added, removed, changed


def _graph_paths(graph: Graph) -> dict[str, Graph]:
    """Every graph of the definition by mount path (``""`` for the root)."""
    mounts: dict[str, Graph] = {}
    pending = [("", graph)]
    while pending:
        mount, current = pending.pop()
        mounts[mount] = current
        for node in current.nodes.values():
            if node.child is not None:
                pending.append((_join(mount, node.id), node.child))
    return mounts


def _from_record(record: RunRecord, graph: Graph) -> dict[str, tuple[str, ...]]:
    """What the record alone shows: nodes it holds that the graph no longer has, confirmed
    nodes whose outputs no longer match the node's provides, scopes whose graph is renamed."""
    mounts = _graph_paths(graph)
    removed: set[str] = set()
    changed: set[str] = set()
    graphs: set[str] = set()

    def check(mount: str, node_id: str) -> Any:
        where = mounts.get(mount)
        node = where.nodes.get(node_id) if where is not None else None
        if node is None:
            removed.add(_join(mount, node_id))
        return node

    for scope in record.scopes.values():
        current = mounts.get(scope.path)
        if current is not None and current.name != scope.graph:
            graphs.add(scope.path)
        for node_id, node_record in scope.nodes.items():
            node = check(scope.path, node_id)
            if node is None:
                continue
            provided = sorted(key.name for key in node.provides)
            if sorted(v.name for v in node_record.outputs) != provided:
                changed.add(_join(scope.path, node_id))
    for attempt in record.attempts.values():
        scope = record.scopes.get(attempt.parent)
        if scope is not None and attempt.state is not AttemptState.CONFIRMED:
            check(scope.path, attempt.node_id)  # a root attempt of a node not confirmed yet
    return {
        "removed": tuple(sorted(removed)),
        "changed": tuple(sorted(changed)),
        "graphs": tuple(sorted(graphs)),
    }


# -- the message -------------------------------------------------------------------------------


def _names(items: Iterable[str], limit: int = LIST_LIMIT) -> str:
    items = list(items)
    shown = ", ".join(repr(item) for item in items[:limit])
    if len(items) > limit:
        shown += f" and {len(items) - limit} more"
    return shown


def _graph_label(mount: str) -> str:
    return "the root graph" if mount == "" else f"the graph of Sub {mount!r}"


def _describe(changes: Mapping[str, tuple[str, ...]], from_record: bool = False) -> list[str]:
    lines = []
    if changes.get("added"):
        lines.append(f"nodes added: {_names(changes['added'])}")
    if changes.get("removed"):
        label = "nodes it holds that the graph no longer has" if from_record else "nodes removed"
        lines.append(f"{label}: {_names(changes['removed'])}")
    if changes.get("changed"):
        label = (
            "confirmed nodes whose outputs differ from the node's provides"
            if from_record
            else "nodes changed (requires, provides, aspects or bindings)"
        )
        lines.append(f"{label}: {_names(changes['changed'])}")
    if changes.get("keys"):
        lines.append(f"keys added, removed or changed (type or kind): {_names(changes['keys'])}")
    if changes.get("inputs"):
        lines.append(f"graph inputs added or removed: {_names(changes['inputs'])}")
    if changes.get("graphs"):
        labels = [_graph_label(m) for m in changes["graphs"]]
        shown = ", ".join(labels[:LIST_LIMIT])
        if len(labels) > LIST_LIMIT:
            shown += f" and {len(labels) - LIST_LIMIT} more"
        lines.append(f"graph name or graph-wide aspects changed: {shown}")
    return lines


def _saved_parts(
    record: RunRecord,
    known: Iterable[Graph],
    store: Any = None,
    plugins: DurablePluginManager | None = None,
) -> dict[str, str] | None:
    for graph in known:
        if graph.fingerprint() == record.definition:
            return definition_parts(graph)
    if store is None:
        return None
    manager = plugins if plugins is not None else default_plugins()
    target = HistoryTarget(store, record.run_id, record.root_scope)
    return manager.saved_definition(target, record.definition)


def mismatch_changes(
    graph: Graph,
    record: RunRecord,
    known: Iterable[Graph] = (),
    store: Any = None,
    plugins: DurablePluginManager | None = None,
) -> tuple[dict[str, tuple[str, ...]], bool]:
    """What changed between the definition ``record`` was started with and ``graph``.

    The saved definition's parts are looked up first among ``known`` (graphs the runtime ran
    this run with), then through the ``durable_saved_definition`` hook for the history of that
    very run in ``store`` (the run log keeps them); each must have the record's whole
    fingerprint.

    Args:
        graph: the current graph.
        record: the run's record (never changed).
        known: graphs that ran this run earlier in this process, if any.
        store: the run's store; None: the hook is not asked.
        plugins: the plugin manager to ask; None: the process-wide one
            (:func:`~durable_core.plugins.default_plugins`).

    Returns:
        ``(changes, complete)``: ``changes`` maps ``"added"``, ``"removed"``, ``"changed"``
        (node paths), ``"keys"`` (key paths), ``"inputs"`` (graph input paths) and
        ``"graphs"`` (mount paths, ``""`` for the root graph) to sorted tuples; ``complete``
        is True when the saved parts were known, so every change is listed, and False when
        only the record could be compared (nodes it holds that the graph no longer has,
        confirmed nodes whose outputs changed, renamed graphs).
    """
    saved = _saved_parts(record, known, store, plugins)
    if saved is None:
        return _from_record(record, graph), False
    now = definition_parts(graph)
    added, removed, changed = _compare(saved, now, "node")
    keys = sorted({p for group in _compare(saved, now, "key") for p in group})
    inputs = sorted({p for group in _compare(saved, now, "input") for p in group})
    graphs = _compare(saved, now, "graph")[2]  # a new or lost graph is a node's change
    changes = {
        "added": added,
        "removed": removed,
        "changed": changed,
        "keys": tuple(keys),
        "inputs": tuple(inputs),
        "graphs": graphs,
    }
    return changes, True


def describe_changes(changes: Mapping[str, tuple[str, ...]], complete: bool) -> list[str]:
    """One line per kind of change of :func:`mismatch_changes` (at most :data:`LIST_LIMIT`
    names each), for an operator; an empty list when it names nothing."""
    return _describe(changes, from_record=not complete)


def definition_mismatch(
    graph: Graph,
    record: RunRecord,
    known: Iterable[Graph] = (),
    store: Any = None,
    plugins: DurablePluginManager | None = None,
) -> DefinitionMismatchError:
    """The error for a record whose ``Definition`` is not ``graph``'s fingerprint.

    What changed is worked out by :func:`mismatch_changes` (same arguments).

    Args:
        graph: the graph given to resume.
        record: the loaded record (never changed).
        known: graphs that ran this run earlier in this process, if any.

    Returns:
        A :class:`~durable_core.errors.DefinitionMismatchError` naming what changed where it
        can (at most :data:`LIST_LIMIT` names per list in the message, all in the attributes),
        and how to go on: revert the code, or fork the run under the new definition.
    """
    run_id = record.run_id
    current = graph.fingerprint()
    head = (
        f"run {run_id!r} was started with another definition of graph {graph.name!r} "
        f"(stored fingerprint {record.definition[:12]}…, current {current[:12]}…)"
    )
    changes, complete = mismatch_changes(graph, record, known, store, plugins)
    lines = describe_changes(changes, complete)
    if complete:
        what = (
            "; ".join(lines)
            if lines
            else "no node, key, input or graph-wide aspect differs (the description's format "
            "changed)"
        )
        detail = f"What changed since it started: {what}."
    else:
        unknown = (
            "the definition it was started with is not known (the run's history in its store "
            "keeps it when the plugin 'runlog' is on)"
        )
        if lines:
            detail = (
                f"What the record shows: {'; '.join(lines)}. Other changes are not known: "
                f"{unknown}."
            )
        else:
            detail = f"What changed is not known: {unknown}."
    advice = (
        "Nothing was saved. To continue this run, restore the code it was started with and "
        "resume again; to continue under the new definition, fork it into a new run: "
        f"durable fork CONFIG {shlex.quote(run_id)} --new-run-id NEW (from Python: "
        "durable_core.durable.fork_run), which keeps its confirmed nodes that are still valid."
    )
    return DefinitionMismatchError(
        f"{head}. {detail} {advice}",
        complete=complete,
        **changes,
    )
