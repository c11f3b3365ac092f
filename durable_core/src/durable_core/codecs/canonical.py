"""Canonical JSON text: the JSON kinds, canonical bytes, strict parsing (SPEC C-1, C-4).

Errors inside a value travel up as :class:`PathProblem`, each level adding its path segment, so
the final :class:`~durable_core.errors.CodecError` can say ``at items[3].name: expected str``.
"""

from __future__ import annotations

import json
from typing import Any

from durable_core._typeforms import (
    mismatch_text,
    type_name,
)

BOOLEAN, INTEGER, FLOAT, STRING, NULL, ARRAY, OBJECT = (
    "boolean",
    "integer",
    "float",
    "string",
    "null",
    "array",
    "object",
)
ALL_KINDS = frozenset({BOOLEAN, INTEGER, FLOAT, STRING, NULL, ARRAY, OBJECT})
"""The JSON kinds a codec may produce; ``float`` is a JSON number written with ``.`` or ``e``."""

KIND_TEXT = {
    BOOLEAN: "a JSON boolean",
    INTEGER: "a JSON integer",
    FLOAT: "a JSON number with a fraction or exponent",
    STRING: "a JSON string",
    NULL: "null",
    ARRAY: "a JSON array",
    OBJECT: "a JSON object",
}


class PathProblem(Exception):
    """A problem at a path inside a value (internal; turned into CodecError at the top)."""

    def __init__(self, problem: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path

    def under(self, segment: str) -> PathProblem:
        """The same problem seen from the container one level up."""
        return PathProblem(self.problem, (segment, *self.path))


class ResolveProblem(Exception):
    """No JSON codec can be built for a type form (internal; carries where it was met)."""

    def __init__(self, problem: str, where: tuple[str, ...] = ()) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where = where

    def within(self, place: str) -> ResolveProblem:
        return ResolveProblem(self.problem, (place, *self.where))


# --- canonical text ------------------------------------------------------------------------


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
"""What ``json.dumps`` with these options builds on every call (``encode`` keeps no state)."""


def dumps_canonical(obj: Any) -> bytes:
    """Canonical JSON bytes of a JSON form: sorted keys, no whitespace, UTF-8 (C-1).

    Raises:
        PathProblem: NaN/Infinity, a lone surrogate, a value nested too deeply.
    """
    try:
        return _CANONICAL.encode(obj).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PathProblem(
            f"a string contains a lone surrogate ({exc.object[exc.start : exc.end]!r}); JSON "
            "needs valid UTF-8: store arbitrary data as bytes or through a custom codec"
        ) from None
    except RecursionError:
        raise PathProblem("the value is nested too deeply to be written as JSON") from None
    except (ValueError, TypeError) as exc:
        raise PathProblem(f"cannot be written as JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise PathProblem(f"{name} is not a JSON number (NaN and Infinity are refused)")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise PathProblem(f"the JSON object has the key {key!r} twice")
        out[key] = value
    return out


_STRICT = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_object)
"""One decoder for every value: ``json.loads`` with arguments would build one per call."""


def loads_strict(data: Any) -> Any:
    """Parse encoded bytes strictly: valid UTF-8, one JSON value, nothing after it (C-4).

    Raises:
        PathProblem: not bytes, invalid UTF-8, invalid JSON, trailing content, NaN/Infinity,
            a duplicate object key.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise PathProblem(f"expected encoded bytes, found {type_name(type(data))}")
    raw = bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PathProblem(
            f"the encoded bytes are not valid UTF-8 (at byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1]!r})"
        ) from None
    try:
        return _STRICT.decode(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise PathProblem(
                f"trailing content after the JSON value (at character {exc.pos}: "
                f"{text[exc.pos : exc.pos + 20]!r})"
            ) from None
        raise PathProblem(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise PathProblem("the JSON value is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise PathProblem(f"invalid JSON: {exc}") from None


def json_kind(obj: Any) -> str:
    """The kind of a parsed JSON value."""
    if obj is None:
        return NULL
    if isinstance(obj, bool):
        return BOOLEAN
    if isinstance(obj, int):
        return INTEGER
    if isinstance(obj, float):
        return FLOAT
    if isinstance(obj, str):
        return STRING
    if isinstance(obj, list):
        return ARRAY
    return OBJECT


def describe_json(obj: Any) -> str:
    """``null``, ``true``, ``the JSON string 'abc'``, ``a JSON array of 3 items`` …"""
    kind = json_kind(obj)
    if kind == NULL:
        return "null"
    if kind == BOOLEAN:
        return "true" if obj else "false"
    if kind in (INTEGER, FLOAT):
        text = repr(obj)
        return f"the JSON number {text if len(text) < 30 else text[:27] + '...'}"
    if kind == STRING:
        return f"the JSON string {obj[:30]!r}{'...' if len(obj) > 30 else ''}"
    if kind == ARRAY:
        return f"a JSON array of {len(obj)} items"
    return "a JSON object"


def check_text(text: str, what: str) -> None:
    """Refuse a string that is not valid Unicode text (a lone surrogate) (C-4)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PathProblem(
            f"{what} contains a lone surrogate U+{ord(text[exc.start]):04X} at index "
            f"{exc.start}; JSON needs valid UTF-8: store arbitrary data as bytes or through a "
            "custom codec"
        ) from None


def mismatch(expected: Any, value: Any) -> PathProblem:
    """``expected int, found str 'x'`` with a hint for the bool/int/float confusions."""
    return PathProblem(mismatch_text(expected, value))
