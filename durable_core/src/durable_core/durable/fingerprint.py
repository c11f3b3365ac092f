"""Fingerprints of inputs (R-REC-2 ``Inputs``, R-SCOPE-1): SHA-256 over encoded values.

A fingerprint is not a copy of the inputs: it only lets ``resume`` check that the host gave the
same inputs again (R-REC-3). It covers each value's key name, codec id and version, state and
digest, so a change of value, of codec, or of ready/skipped changes it; the order in which the
inputs were given does not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from durable_core.graph import In, Node
from durable_core.records import ValueRecord

__all__ = ["bindings_fingerprint", "sub_scope_fingerprint", "values_fingerprint"]


def _digest(kind: str, payload: object) -> str:
    text = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def values_fingerprint(values: Iterable[ValueRecord]) -> str:
    """SHA-256 hex over the encoded values (name, codec id, version, state, digest), by name."""
    items = sorted([v.name, v.type_id, v.version, str(v.state.value), v.digest] for v in values)
    return _digest("values", items)


def bindings_fingerprint(graph: str, bindings: Iterable[tuple[str, str, str]]) -> str:
    """SHA-256 hex of a Sub scope's stable wiring (``Bindings: true``, R-SCOPE-1).

    Args:
        graph: the child graph's name.
        bindings: ``(direction, parent_key, child_key)`` triples, direction ``"in"``/``"out"``.
    """
    return _digest("bindings", [graph, sorted([list(b) for b in bindings])])


def sub_scope_fingerprint(node: Node) -> str:
    """The ``Inputs`` of a Sub node's child scope: its stable wiring (``Bindings: true``).

    Args:
        node: a Sub node (``node.child`` is its child graph).
    """
    assert node.child is not None
    wiring = [
        ("in" if isinstance(b, In) else "out", b.parent.name, b.child.name) for b in node.bindings
    ]
    return bindings_fingerprint(node.child.name, wiring)
