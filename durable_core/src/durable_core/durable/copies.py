"""Every reader of a value reads it as it was saved (the ``share`` step of the seam).

A body that mutates a value it received must not change what other nodes see, and a reader
must not see anything a resumed run would not: after a restart, readers get the value decoded
from the record. So in a durable run every read of a ready value (``rc.get``, the run's result)
gives the value decoded from the bytes already encoded for its save:

- a mutable value (a list, a dict, an attrs instance that is not frozen, a numpy array, …):
  each read decodes its own copy;
- an immutable value (tuples, frozensets, frozen attrs classes and frozen dataclasses made only
  of numbers, strings, bytes, ``None``, enums, dates …): decoded once, at the first read, and
  shared;
- an ``int``, ``float``, ``str``, ``bytes``, ``bool`` or ``None`` saved with the codec of its own
  type: shared as it is (decoding gives the same value; an ``int`` saved for a ``float`` key is
  decoded, so it reads as a ``float`` as it would after a restart).

Nothing is decoded until a body reads the value. A value restored from the record (decoded once
by ``resume``) is shared when immutable, and goes to its first reader as it is when mutable.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.graph.checkpoint import Attempt, CopyOnRead, Scope
from durable_core.graph.streams import Stream
from durable_core.records import RunRecord, ValueRecord, ValueState

__all__ = ["immutable", "share_values", "shared_as_is"]

ATOMS = frozenset(
    {
        int,
        float,
        complex,
        bool,
        str,
        bytes,
        type(None),
        decimal.Decimal,
        fractions.Fraction,
        datetime.date,
        datetime.datetime,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
        uuid.UUID,
        range,
    }
)
_MAX_DEPTH = 64


def immutable(value: Any, depth: int = 0) -> bool:
    """True when ``value`` cannot be changed in place, all the way down.

    Exact built-in atoms (a subclass may add mutable state), enum members, and tuples,
    frozensets, frozen attrs instances and frozen dataclass instances whose parts are all
    immutable. Anything else, and anything nested deeper than 64 levels, counts as mutable.
    """
    tp = type(value)
    if tp in ATOMS or isinstance(value, enum.Enum):
        return True
    if depth >= _MAX_DEPTH:
        return False
    if tp is tuple or tp is frozenset or (isinstance(value, tuple) and hasattr(tp, "_fields")):
        return _all_immutable(value, depth)
    if attrs.has(tp):
        if tp.__setattr__.__name__ != "_frozen_setattrs":
            return False
        return all(immutable(getattr(value, f.name), depth + 1) for f in attrs.fields(tp))
    if dataclasses.is_dataclass(tp):
        if not tp.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return False
        return all(immutable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


def _all_immutable(items: Any, depth: int) -> bool:
    if set(map(type, items)) <= ATOMS:  # the common case, at C speed
        return True
    return all(type(item) in ATOMS or immutable(item, depth + 1) for item in items)


_EXACT = {
    int: "json:int",
    float: "json:float",
    str: "json:str",
    bytes: "json:bytes",
    bool: "json:bool",
    type(None): "json:none",
}
"""Scalars that their own built-in codec gives back unchanged."""


class _Decode:
    """Decodes one saved value again; the codec is looked up once, at the first read.

    ``once``: decode at the first call and return that same object afterwards (for immutable
    values; two threads reading at once may both decode, which is harmless).
    """

    __slots__ = ("_codec", "_codecs", "_key_type", "_once", "_record", "_value")

    def __init__(self, codecs: Codecs, key_type: Any, record: ValueRecord, once: bool) -> None:
        self._codecs = codecs
        self._key_type = key_type
        self._record = record
        self._once = once
        self._codec: Any = None
        self._value: Any = self

    def __call__(self) -> Any:
        if self._value is not self:
            return self._value
        record = self._record
        if self._codec is None:
            self._codec = self._codecs.stored_codec(
                self._key_type, record.type_id, record.version, name=record.name
            )
        value = self._codec.decode(record.data)
        if self._once:
            self._value = value
        return value


def shared_as_is(ready: Mapping[str, Any], records: list[ValueRecord]) -> bool:
    """Whether :func:`share_values` gives ``ready`` back unchanged for the node whose outputs
    ``records`` were just encoded (in this process, not restored): every ready value is a
    stream, a :class:`~durable_core.graph.CopyOnRead`, or a scalar of exactly a type that its
    built-in codec gives back unchanged, and encoded by that codec. The confirming save can
    tell at once, so that sharing the values costs no look at the record afterwards.
    """
    named = 0
    for record in records:
        name = record.name
        if name not in ready:
            continue  # skipped
        named += 1
        value = ready[name]
        if type(value) is CopyOnRead or isinstance(value, Stream):
            continue
        if _EXACT.get(type(value)) != record.type_id:
            return False
    return named == len(ready)


def share_values(
    codecs: Codecs,
    record: RunRecord,
    scope: Scope,
    attempt: Attempt | None,
    ready: Mapping[str, Any],
) -> Mapping[str, Any]:
    """The ``share`` answer of the durable checkpointer (see the module documentation).

    Args:
        codecs: the run's codec registry.
        record: the committed record; it holds the node's confirmed outputs.
        scope: the scope the values are published in.
        attempt: the node's root attempt, its NodeRecord saved (or restored); None for the
            root inputs (encoded here, since the record keeps only their fingerprint).
        ready: the ready values by key name.

    Returns:
        ``ready`` itself when no value needs decoding; else a new mapping in which those
        values are :class:`~durable_core.graph.CopyOnRead`.

    Raises:
        CodecError: a root input cannot be encoded (``run`` and ``resume`` encode the root
            inputs before they start, so this does not happen in a durable run).
    """
    keys: Mapping[str, Any] | None = None
    shared: dict[str, Any] | None = None
    saved: dict[str, ValueRecord] | None = None
    restored = attempt is not None and attempt.restored is not None
    for name, value in ready.items():
        kind = type(value)
        if restored and kind in ATOMS:
            continue  # decoded from the record already, and nobody can change it
        if kind is CopyOnRead or isinstance(value, Stream):
            continue
        fixed = immutable(value)
        if restored and fixed:
            continue  # as above
        if keys is None:
            keys = scope.graph.keys
        key = keys[name]
        if attempt is None:
            encoded = codecs.encode_value(key.type, value, name=name)
            value_record = ValueRecord(
                name=name,
                type_id=encoded.codec_id,
                version=encoded.version,
                state=ValueState.READY,
                digest=encoded.digest,
                data=encoded.data,
            )
        else:
            if saved is None:
                node = record.scopes[scope.id].nodes[attempt.node_id]
                saved = {v.name: v for v in node.outputs}
            value_record = saved[name]
        if fixed and _EXACT.get(type(value)) == value_record.type_id:
            continue
        decode = _Decode(codecs, key.type, value_record, once=fixed)
        if shared is None:
            shared = dict(ready)
        # A mutable restored value was decoded for this run alone: its first reader may have it.
        shared[name] = (
            CopyOnRead(decode, value, source=value_record)
            if restored
            else CopyOnRead(decode, source=value_record)
        )
    return ready if shared is None else shared
