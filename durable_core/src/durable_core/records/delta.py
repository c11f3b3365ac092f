"""Record deltas: the change of one save against the record stored before it (R-STORE-3).

A save may hand a store, besides the complete record, a *delta*: what changed against the
record stored at the expected revision. A store that keeps a journal of deltas next to the last
complete record folds them in with :func:`apply_delta`; ``load`` always returns the complete
record.

A delta is canonical JSON (UTF-8, sorted keys, no whitespace)::

    {"Base": <expected revision>, "Revision": <new revision>,
     "Set":   [[<path>, <json value>], ...],
     "Unset": [<path>, ...]}

A path is a non-empty list of JSON object keys from the record's root object, for example
``["Revision"]``, ``["Attempts", "<attempt id>"]`` or ``["Scopes", "<scope id>", "Nodes",
"<node id>"]``. Applying a delta to a complete record checks that the record is at revision
``Base``, assigns every ``Set`` value at its path (the parent object must exist), deletes every
``Unset`` path (the key must exist), and sets ``Revision``. The result, encoded canonically,
equals :func:`~durable_core.records.jsonio.record_to_json` of the new record byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from durable_core.errors import CorruptRecordError

__all__ = [
    "GONE",
    "Delta",
    "ObjectChange",
    "Partial",
    "apply_delta",
    "apply_tree",
    "canonical_json",
    "encode_delta",
    "read_delta",
]

_DUMPS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_KEYS = frozenset({"Base", "Revision", "Set", "Unset"})
_ADVICE = (
    "The journal of this run is damaged: keep the stored files as evidence and restore the run "
    "from a backup, or start a new run id"
)


@attrs.frozen
class Delta:
    """One decoded delta.

    Attributes:
        base: the revision the delta applies to (the save's expected revision).
        revision: the revision it produces (``base + 1``).
        set: ``(path, value)`` pairs; ``value`` is a parsed JSON value.
        unset: paths whose key is deleted.
    """

    base: int
    revision: int
    set: tuple[tuple[tuple[str, ...], Any], ...] = ()
    unset: tuple[tuple[str, ...], ...] = ()

    def to_json(self) -> bytes:
        """The canonical bytes of this delta (see :func:`encode_delta`)."""
        return encode_delta(self.base, self.revision, self.set, self.unset)


class _Gone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "GONE"


GONE: Any = _Gone()
"""Marks a deleted entry in an :class:`ObjectChange` (and in the runtime's proposals)."""


@attrs.define
class Partial:
    """An entry changed in part: its new ``value`` and what changed inside it."""

    value: Any
    change: ObjectChange


@attrs.define
class ObjectChange:
    """What changed in one record object (the run record, or a scope).

    Attributes:
        fields: attribute names of changed fields that are not maps.
        maps: by attribute name of a map field, the changed entries: the new value (the entry
            is set whole), :data:`GONE` (deleted) or a :class:`Partial`.
        whole: map fields replaced as a whole (a new map object was assigned).
    """

    fields: list[str] = attrs.Factory(list)
    maps: dict[str, dict[str, Any]] = attrs.Factory(dict)
    whole: list[str] = attrs.Factory(list)


def canonical_json(tree: Any) -> bytes:
    """``tree`` as canonical JSON bytes: UTF-8, sorted keys, separators ``,`` and ``:``."""
    return _DUMPS(tree).encode("utf-8")


def encode_delta(
    base: int,
    revision: int,
    set: Iterable[tuple[Sequence[str], Any]] = (),
    unset: Iterable[Sequence[str]] = (),
) -> bytes:
    """The canonical bytes of a delta from revision ``base`` to ``revision``.

    Args:
        base: the expected revision of the save.
        revision: the revision it writes.
        set: ``(path, value)`` pairs, ``value`` a JSON value (dicts, lists, str, int, bool).
        unset: paths to delete.

    Returns:
        Canonical UTF-8 JSON bytes.
    """
    return canonical_json(
        {
            "Base": base,
            "Revision": revision,
            "Set": [[list(path), value] for path, value in set],
            "Unset": [list(path) for path in unset],
        }
    )


def _bad(problem: str) -> CorruptRecordError:
    return CorruptRecordError(f"a stored record delta is not valid: {problem}. {_ADVICE}")


def _revision(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise _bad(f"its {name} must be a revision (an integer from 0 to 2**64-1), found {value!r}")
    return value


def _path(value: Any, where: str, index: int) -> tuple[str, ...]:
    """``value`` as a path; ``where`` names it (``{}`` takes ``index``) in the error only."""
    if not isinstance(value, list) or not value or not all(isinstance(part, str) for part in value):
        place = where.format(index)
        raise _bad(f"{place} must be a non-empty list of object keys, found {value!r}")
    return tuple(value)


class _DuplicateKeyError(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    tree = dict(pairs)
    if len(tree) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(f"the key {key!r:.200} appears twice in one object")
            seen.add(key)
    return tree


_DECODE = json.JSONDecoder(object_pairs_hook=_unique_pairs).decode
"""``json.loads`` with the hook, built once (``json.loads`` builds a decoder per call)."""


def load_tree(data: bytes | bytearray | memoryview) -> Any:
    """Parse stored JSON bytes (a complete record or a delta) into a tree, refusing an object
    that holds the same key twice (``json.loads`` would keep the last one silently, R-REC-4).

    Raises:
        UnicodeDecodeError: the bytes are not UTF-8.
        ValueError: the bytes are not JSON, or an object holds a key twice.
        RecursionError: the JSON nests too deeply.
    """
    return _DECODE(bytes(data).decode("utf-8"))


def read_delta(data: bytes | bytearray | memoryview) -> Delta:
    """Decode and check the shape of one delta.

    Args:
        data: the delta's bytes.

    Returns:
        The :class:`Delta`.

    Raises:
        CorruptRecordError: the bytes are not UTF-8 JSON of the delta shape: an object with
            exactly ``Base``, ``Revision`` (``Base + 1``), ``Set`` (a list of ``[path, value]``)
            and ``Unset`` (a list of paths), every path a non-empty list of strings.
    """
    try:
        tree = load_tree(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(f"its bytes are not UTF-8 JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(tree, dict):
        raise _bad(f"it must be a JSON object, found {type(tree).__name__}")
    if set(tree) != _KEYS:
        raise _bad(f"it must have exactly the keys {sorted(_KEYS)}, found {sorted(tree)}")
    base = _revision(tree["Base"], "Base")
    revision = _revision(tree["Revision"], "Revision")
    if revision != base + 1:
        raise _bad(f"its Revision must be Base + 1 = {base + 1}, found {revision}")
    sets = tree["Set"]
    if not isinstance(sets, list):
        raise _bad(f"Set must be a list, found {type(sets).__name__}")
    pairs = []
    for index, item in enumerate(sets):
        if not isinstance(item, list) or len(item) != 2:
            raise _bad(f"Set[{index}] must be a [path, value] pair, found {item!r:.200}")
        pairs.append((_path(item[0], "the path of Set[{}]", index), item[1]))
    unsets = tree["Unset"]
    if not isinstance(unsets, list):
        raise _bad(f"Unset must be a list, found {type(unsets).__name__}")
    paths = tuple(_path(item, "Unset[{}]", index) for index, item in enumerate(unsets))
    return Delta(base=base, revision=revision, set=tuple(pairs), unset=paths)


def _parent(tree: dict[str, Any], path: tuple[str, ...], revision: int) -> dict[str, Any]:
    node: Any = tree
    for depth, key in enumerate(path[:-1]):
        node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            where = "".join(f"[{k!r}]" for k in path[: depth + 1])
            raise _bad(
                f"the delta to revision {revision} changes {list(path)}, but the record has no "
                f"object at {where}"
            )
    return node


def apply_tree(tree: dict[str, Any], delta: Delta) -> None:
    """Apply one checked delta to a parsed record tree, in place.

    Raises:
        CorruptRecordError: the tree is not at revision ``delta.base`` (the chain is broken),
            a ``Set`` path has no parent object, or an ``Unset`` path does not exist.
    """
    stored = tree.get("Revision")
    if stored != delta.base:
        raise _bad(
            f"the delta to revision {delta.revision} applies to revision {delta.base}, but the "
            f"record it follows is at revision {stored!r}: the chain of saves is broken"
        )
    for path, value in delta.set:
        _parent(tree, path, delta.revision)[path[-1]] = value
    for path in delta.unset:
        parent = _parent(tree, path, delta.revision)
        if path[-1] not in parent:
            raise _bad(
                f"the delta to revision {delta.revision} deletes {list(path)}, which the record "
                "does not hold"
            )
        del parent[path[-1]]
    tree["Revision"] = delta.revision


def apply_delta(complete: bytes | bytearray | memoryview, *deltas: bytes) -> bytes:
    """Fold ``deltas`` (in revision order) into a complete record.

    Args:
        complete: the complete record's canonical JSON bytes.
        deltas: the deltas saved after it, oldest first; each one's ``Base`` must be the
            revision the previous one produced.

    Returns:
        The complete record after the last delta, as canonical JSON bytes (equal to
        ``record_to_json`` of that record when the deltas came from the runtime's encoder).
        With no deltas, ``complete`` re-encoded canonically.

    Raises:
        CorruptRecordError: ``complete`` is not a JSON object, a delta is malformed, or the
            chain is broken (see :func:`apply_tree`).
    """
    try:
        tree = load_tree(complete)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptRecordError(
            f"the complete record that deltas follow is not UTF-8 JSON ({type(exc).__name__}: "
            f"{exc}). {_ADVICE}"
        ) from None
    if not isinstance(tree, dict):
        raise CorruptRecordError(
            f"the complete record that deltas follow is not a JSON object. {_ADVICE}"
        )
    for data in deltas:
        apply_tree(tree, read_delta(data))
    return canonical_json(tree)
