"""Paths into a run record and the :class:`CorruptRecordError` that names them (private).

A path is built as a linked pair ``(parent, segment)`` so that walking a large record costs one
small tuple per object and nothing per scalar; it is rendered only when an error is raised, in
JSONPath style with the record's JSON names: ``$.Scopes["9f…"].Nodes["split"].Outputs[0].Digest``.

Segments: a ``str`` is a field (``.Digest``), an ``int`` a list index (``[0]``), a 1-tuple
``(key,)`` a map key (``["split"]``, quoted as a JSON string, so unusual keys stay readable).
"""

from __future__ import annotations

import json
from typing import Any

from durable_core.errors import CorruptRecordError

__all__ = ["Path", "corrupt", "describe", "path_of", "render_path"]

Path = tuple[Any, Any] | None
"""``None`` is the record itself (``$``); otherwise ``(parent_path, segment)``."""


def path_of(*segments: str | int | tuple[str]) -> Path:
    """The linked path of ``segments`` below the record: ``path_of("Attempts", (id,), "Index")``."""
    path: Path = None
    for segment in segments:
        path = (path, segment)
    return path


def render_path(path: Path) -> str:
    """Render a linked path as ``$.Field["key"][0]``."""
    parts: list[str] = []
    while path is not None:
        path, segment = path
        if isinstance(segment, str):
            parts.append("." + segment)
        elif isinstance(segment, int):
            parts.append(f"[{segment}]")
        else:
            parts.append("[" + json.dumps(segment[0]) + "]")
    return "$" + "".join(reversed(parts))


def describe(value: Any) -> str:
    """A short description of a found value for an error message (never a long or binary dump)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return f"the string {json.dumps(shown)}"
    if isinstance(value, int):
        text = (
            str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
        )
        return f"the integer {text}"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def corrupt(path: Path, rule: str, problem: str, advice: str) -> CorruptRecordError:
    """Build the error for the first violation found at ``path``.

    Args:
        path: where the violation is.
        rule: the SPEC rule broken (``"R-ATT-3"``).
        problem: what was expected and what was found.
        advice: what the reader should do next.
    """
    where = render_path(path)
    return CorruptRecordError(f"run record at {where}: {problem}. {advice}", path=where, rule=rule)
