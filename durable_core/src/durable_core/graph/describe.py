"""The canonical text of a graph's description, which its fingerprint hashes (R-REC-2).

:func:`canonical_text` writes exactly ``json.dumps(graph.describe(), sort_keys=True,
separators=(",", ":"), ensure_ascii=True)`` without building the usual node's and key's
description first: a resume in a new process fingerprints the whole graph to compare it with
the record's ``Definition``, and for a graph of many nodes building and encoding one dict per
node and key was most of that cost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from durable_core.graph.processor import Processor

if TYPE_CHECKING:
    from durable_core.graph.definition import Graph

__all__ = ["canonical_text"]

FINGERPRINT_FORMAT = 1
"""The version of the description's layout (its ``format`` field)."""

_ASCII: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
"""A string as ``json.dumps(..., ensure_ascii=True)`` writes it (the C encoder's own)."""
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode
"""``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)``."""


def canonical_text(graph: Graph) -> str:
    """The canonical JSON text of ``graph.describe()`` (``graph`` already validated).

    The usual node (no aspect, processor or child graph) and the usual key (not a stream) are
    written straight into the text, their fields in sorted order; anything else is described
    and encoded as ``json.dumps`` would. Each plain class is named once.
    """
    names: dict[type, str] = {}
    text = _ASCII
    keys = []
    quoted: dict[str, str] = {}  # each key's name as JSON text, written once
    for name in sorted(graph._keys):
        key = graph._keys[name]
        quoted[name] = text(name)
        if key.stream:
            keys.append(_canonical(key.describe(names)))
        else:
            tp = key.type
            named = names.get(tp) if type(tp) is type else None
            if named is None:
                named = key.describe(names)["type"]
            keys.append('{"name":' + quoted[name] + ',"type":' + text(named) + "}")
    nodes = []
    graph_nodes = graph._nodes
    for node_id in sorted(graph_nodes):  # a node's id is its key in ``_nodes``
        node = graph_nodes[node_id]
        if node.aspects or node.child is not None or isinstance(node.body, Processor):
            nodes.append(_canonical(graph._describe_node(node)))
            continue
        # A key a node names is a key of its graph (validated): its text is in ``quoted``.
        requires, provides = node.requires, node.provides
        if len(requires) == 1:
            requires = quoted[requires[0].name]
        else:
            requires = ",".join([quoted[n] for n in sorted([k.name for k in requires])])
        if len(provides) == 1:
            provides = quoted[provides[0].name]
        else:
            provides = ",".join([quoted[n] for n in sorted([k.name for k in provides])])
        nodes.append(
            f'{{"aspects":[],"id":{text(node_id)},"provides":[{provides}],"requires":[{requires}]}}'
        )
    inputs = ",".join([text(n) for n in sorted([k.name for k in graph._inputs])])
    return (
        '{"aspects":'
        + _canonical([aspect.describe() for aspect in graph._aspects])
        + ',"format":'
        + _canonical(FINGERPRINT_FORMAT)
        + ',"inputs":['
        + inputs
        + '],"keys":['
        + ",".join(keys)
        + '],"name":'
        + text(graph._name)
        + ',"nodes":['
        + ",".join(nodes)
        + "]}"
    )
