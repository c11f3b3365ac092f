"""Record deltas: the change of one save against the record stored before it (R-STORE-3).

A save may hand a store, besides the complete record, a *delta*: what changed against the
record stored at the expected revision. A store that keeps a journal of deltas next to the last
complete record folds them in with :func:`apply_delta`; ``load`` always returns the complete
record.

A delta is canonical JSON (UTF-8, sorted keys, no whitespace)::

    {"Base": <expected revision>, "Revision": <new revision>,
     "Set":   [[<path>, <json value>], ...],
     "Unset": [<path>, ...],
     "Splice": [[<path>, [<sequence>, ...], [<json object>, ...]], ...]}

``Splice`` is present only when the save changes a stream entry's list of pending messages in
part; a delta without it is exactly as before. A path is a non-empty list of JSON object keys
from the record's root object, for example ``["Revision"]``, ``["Attempts", "<attempt id>"]``
or ``["Scopes", "<scope id>", "Nodes", "<node id>"]``. Applying a delta to a complete record
checks that the record is at revision ``Base``, assigns every ``Set`` value at its path (the
parent object must exist), deletes every ``Unset`` path (the key must exist), then applies
every ``Splice``, and sets ``Revision``.

A splice ``[path, drop, append]`` changes the list at ``path`` (a list of objects ordered by
their integer ``"Sequence"``, such as a stream entry's ``Pending``): the objects whose sequence
is in ``drop`` (strictly increasing integers, each held by the list) leave it, then ``append``
(objects whose ``"Sequence"`` increase strictly, past every sequence left in the list) is added
at its end. So a save that acknowledges one message of a long backlog, or adds one, writes that
much and not the backlog (S-2). The result, encoded canonically,
equals :func:`~durable_core.records.jsonio.record_to_json` of the new record byte for byte.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from durable_core.errors import CorruptRecordError

__all__ = [
    "GONE",
    "Delta",
    "Folded",
    "ListSplice",
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
_OPTIONAL_KEYS = frozenset({"Splice"})
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
    splice: tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[Any, ...]], ...] = ()

    def to_json(self) -> bytes:
        """The canonical bytes of this delta (see :func:`encode_delta`)."""
        return encode_delta(self.base, self.revision, self.set, self.unset, self.splice)


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
class ListSplice:
    """What changed in a list of sequence-ordered record objects (a stream entry's pending
    messages): ``dropped`` sequences left it, then ``appended`` objects were added at its end."""

    dropped: list[int] = attrs.Factory(list)
    appended: list[Any] = attrs.Factory(list)


@attrs.define
class ObjectChange:
    """What changed in one record object (the run record, a scope, a stream entry).

    Attributes:
        fields: attribute names of changed fields that are not maps.
        maps: by attribute name of a map field, the changed entries: the new value (the entry
            is set whole), :data:`GONE` (deleted) or a :class:`Partial`.
        whole: map fields replaced as a whole (a new map object was assigned).
        splices: by attribute name of a list field, a :class:`ListSplice` (the list changed
            in part: written as a delta's ``Splice``).
    """

    fields: list[str] = attrs.Factory(list)
    maps: dict[str, dict[str, Any]] = attrs.Factory(dict)
    whole: list[str] = attrs.Factory(list)
    splices: dict[str, ListSplice] = attrs.Factory(dict)


def canonical_json(tree: Any) -> bytes:
    """``tree`` as canonical JSON bytes: UTF-8, sorted keys, separators ``,`` and ``:``."""
    return _DUMPS(tree).encode("utf-8")


def encode_delta(
    base: int,
    revision: int,
    set: Iterable[tuple[Sequence[str], Any]] = (),
    unset: Iterable[Sequence[str]] = (),
    splice: Iterable[tuple[Sequence[str], Sequence[int], Sequence[Any]]] = (),
) -> bytes:
    """The canonical bytes of a delta from revision ``base`` to ``revision``.

    Args:
        base: the expected revision of the save.
        revision: the revision it writes.
        set: ``(path, value)`` pairs, ``value`` a JSON value (dicts, lists, str, int, bool).
        unset: paths to delete.
        splice: ``(path, dropped sequences, appended objects)`` of lists changed in part; the
            ``Splice`` key is written only when there is one.

    Returns:
        Canonical UTF-8 JSON bytes.
    """
    tree = {
        "Base": base,
        "Revision": revision,
        "Set": [[list(path), value] for path, value in set],
        "Unset": [list(path) for path in unset],
    }
    splices = [[list(path), list(drop), list(append)] for path, drop, append in splice]
    if splices:
        tree["Splice"] = splices
    return canonical_json(tree)


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
            and ``Unset`` (a list of paths), and perhaps ``Splice`` (a non-empty list of
            ``[path, drop, append]``: ``drop`` strictly increasing sequences, ``append``
            objects whose integer ``Sequence`` increase strictly), every path a non-empty list
            of strings.
    """
    try:
        tree = load_tree(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(f"its bytes are not UTF-8 JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(tree, dict):
        raise _bad(f"it must be a JSON object, found {type(tree).__name__}")
    keys = set(tree)
    if not keys >= _KEYS or not keys <= _KEYS | _OPTIONAL_KEYS:
        raise _bad(
            f"it must have exactly the keys {sorted(_KEYS)} and perhaps {sorted(_OPTIONAL_KEYS)}, "
            f"found {sorted(tree)}"
        )
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
    splices = _splices(tree["Splice"]) if "Splice" in tree else ()
    return Delta(base=base, revision=revision, set=tuple(pairs), unset=paths, splice=splices)


def _sequence(value: Any) -> bool:
    return type(value) is int and 1 <= value < 2**63


def _splices(value: Any) -> tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[Any, ...]], ...]:
    """The checked ``Splice`` entries of a delta (see :func:`read_delta`)."""
    if not isinstance(value, list) or not value:
        raise _bad(f"Splice, when present, must be a non-empty list, found {value!r:.200}")
    result = []
    for index, item in enumerate(value):
        if not isinstance(item, list) or len(item) != 3:
            raise _bad(
                f"Splice[{index}] must be a [path, drop, append] triple, found {item!r:.200}"
            )
        path = _path(item[0], "the path of Splice[{}]", index)
        drop, append = item[1], item[2]
        if not isinstance(drop, list) or not all(_sequence(s) for s in drop):
            raise _bad(f"the drop list of Splice[{index}] must hold sequences, found {drop!r:.200}")
        if any(a >= b for a, b in itertools.pairwise(drop)):
            raise _bad(
                f"the drop list of Splice[{index}] must increase strictly, found {drop!r:.200}"
            )
        if not isinstance(append, list) or not all(
            isinstance(o, dict) and _sequence(o.get("Sequence")) for o in append
        ):
            raise _bad(
                f"the append list of Splice[{index}] must hold objects with a Sequence, found "
                f"{append!r:.200}"
            )
        added = [o["Sequence"] for o in append]
        if any(a >= b for a, b in itertools.pairwise(added)):
            raise _bad(
                f"the appended sequences of Splice[{index}] must increase strictly, found {added}"
            )
        if not drop and not append:
            raise _bad(f"Splice[{index}] changes nothing")
        result.append((path, tuple(drop), tuple(append)))
    return tuple(result)


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
    for path, drop, append in delta.splice:
        _splice(_parent(tree, path, delta.revision), path, drop, append, delta.revision)
    tree["Revision"] = delta.revision


def _order(item: Any) -> Any:
    return item["Sequence"]


def _splice(
    parent: dict[str, Any],
    path: tuple[str, ...],
    drop: tuple[int, ...],
    append: tuple[Any, ...],
    revision: int,
) -> None:
    """Apply one checked splice to the list at ``path`` (``parent[path[-1]]``), in place."""
    items = parent.get(path[-1])
    if not isinstance(items, list):
        raise _bad(
            f"the delta to revision {revision} splices {list(path)}, but the record holds no list "
            "there"
        )
    try:
        if drop:
            count = len(drop)
            if len(items) >= count and [_order(o) for o in items[:count]] == list(drop):
                del items[:count]  # the front of the list: acknowledged in order
            else:
                for sequence in reversed(drop):
                    index = bisect.bisect_left(items, sequence, key=_order)
                    if index == len(items) or _order(items[index]) != sequence:
                        raise _bad(
                            f"the delta to revision {revision} drops sequence {sequence} from "
                            f"{list(path)}, which the record does not hold"
                        )
                    del items[index]
        if append and items and _order(items[-1]) >= append[0]["Sequence"]:
            raise _bad(
                f"the delta to revision {revision} appends sequence {append[0]['Sequence']} to "
                f"{list(path)}, which is not past its last one ({_order(items[-1])})"
            )
    except (TypeError, KeyError):
        raise _bad(
            f"the delta to revision {revision} splices {list(path)}, but that list does not hold "
            "objects with integer sequences"
        ) from None
    items.extend(append)


class Folded:
    """A complete record and the deltas saved after it, folded when first asked.

    A store that reads a journal of deltas hands this to
    :func:`~durable_core.store.checks.decode_stored` instead of the folded bytes: the record is
    then decoded from the folded tree, without encoding it as text and parsing it once more.
    :meth:`data` gives the bytes (those :func:`apply_delta` returns) to a caller that needs them.

    Args:
        complete: the complete record's bytes.
        deltas: the deltas saved after it, oldest first.
        where: what the message of a fold that fails names (``"the record of <location> and
            its saved deltas"``).
    """

    __slots__ = ("_tree", "complete", "deltas", "where")

    def __init__(self, complete: bytes, deltas: Sequence[bytes], where: str) -> None:
        self.complete = complete
        self.deltas = tuple(deltas)
        self.where = where
        self._tree: Any = None

    def tree(self) -> Any:
        """The folded tree (parsed once; do not change it).

        Raises:
            CorruptRecordError: as :func:`apply_delta`, with a message naming ``where``.
        """
        if self._tree is None:
            try:
                self._tree = _fold_tree(self.complete, self.deltas)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self.where} do not fold into a record: {exc}") from exc
        return self._tree

    def data(self) -> bytes:
        """The folded record's canonical bytes (:func:`apply_delta`'s answer).

        Raises:
            CorruptRecordError: as :meth:`tree`.
        """
        return _folded_json(self.tree(), self.where + " fold into a record that")

    def escaped(self) -> bool:
        """Whether a backslash occurs in the bytes: only then may a string hold an escape."""
        return b"\\" in self.complete or any(b"\\" in delta for delta in self.deltas)


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
    return _folded_json(_fold_tree(complete, deltas), "the record the deltas fold into")


def _folded_json(tree: Any, what: str) -> bytes:
    try:
        return canonical_json(tree)
    except UnicodeEncodeError:
        raise CorruptRecordError(
            f"{what} holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
            f"which UTF-8 cannot hold. {_ADVICE}"
        ) from None


def _fold_tree(complete: bytes | bytearray | memoryview, deltas: Iterable[bytes]) -> Any:
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
    return tree
