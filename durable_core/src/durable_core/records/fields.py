"""The field table of the run record's JSON layout, and its exact readers and writers (R-REC-4).

Keys are spelled exactly as the seed's field names (``Format``, ``RunID``, ``NodeID``, ``TypeID``
…, see :func:`json_name`); ``bytes`` fields are standard base64; output is deterministic (sorted
keys, no whitespace), so equal records give equal bytes.

Reading is strict and names the JSON path of the first problem in a
:class:`~durable_core.errors.CorruptRecordError`: invalid UTF-8, unpaired ``\\uD800``–``\\uDFFF``
escapes, duplicate keys, unknown fields, trailing content, NaN/Infinity, wrong JSON types
(``true`` is not an integer, ``1.0`` is not an integer), negative integers, a ``Revision`` of 0 or
beyond uint64, non-canonical base64. Missing fields: maps and lists read as empty, the optional
``Stream``/``State`` objects as absent and ``Bindings`` as false (records from before those
fields existed, e.g. format 1); every other field is required. ``null`` is read where Go's
encoder writes it for a nil map, slice, ``[]byte`` or pointer; it is never accepted for a string,
integer or boolean. Writing checks the same shape (types, ranges, valid Unicode), so every record
that can be written can be read back.

The layout is driven by the attrs classes of :mod:`durable_core.records.model`: one field table
per class, derived from the attributes and their types, serves both directions. cattrs' generic
hooks are deliberately not used here: its ``int`` hook accepts ``true``, ``1.5`` and ``"7"``, it
cannot see duplicate keys, and its validation errors carry no single path; the record is the core
of Durable and must be exact. Decoding and encoding are one linear pass each. The quick paths
generated from this table are :mod:`durable_core.records.fastpath`; the public read and write,
:mod:`durable_core.records.jsonio`.

See ``docs/data-model.md`` for the full layout and the decisions.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs

from durable_core._words import a
from durable_core.errors import CorruptRecordError
from durable_core.records import model as r
from durable_core.records.path import Path, corrupt, describe

__all__ = ["INT_MAX", "UINT64_MAX", "json_name"]

INT_MAX = 2**63 - 1
"""Largest value of every integer field except ``Revision`` (the seed's Go ``int`` is 64-bit)."""

UINT64_MAX = 2**64 - 1
"""Largest ``Revision`` (uint64, R-REC-2); equals ``durable_core.store.MAX_REVISION``."""

_READ_ADVICE = (
    "The stored bytes were not changed: keep them as evidence, find what wrote them, and do not "
    "replace them with a new record."
)
_WRITE_ADVICE = "Nothing was written; fix the record before saving it."

# A JSON escape of a UTF-16 surrogate (\uD800-\uDFFF). Paired escapes are decoded into one
# character by json; only when the text holds one of these can a lone surrogate appear.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_name(attribute: str) -> str:
    """The JSON key of a record attribute (``run_id`` -> ``RunID``, ``acked_through`` ->
    ``AckedThrough``): the seed's Go field name (R-REC-4)."""
    return "".join("ID" if part == "id" else part.capitalize() for part in attribute.split("_"))


# -- The JSON text ------------------------------------------------------------------------------


class _Duplicates(dict):  # type: ignore[type-arg]
    """An object in which a key occurred twice; reported with its path when it is read."""

    duplicate: str


class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity`` in the text (not JSON); refused with its path."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    seen: set[str] = set()
    marked = _Duplicates(result)
    for key, _ in pairs:
        if key in seen:
            marked.duplicate = key
            break
        seen.add(key)
    return marked


def _duplicate(path: Path) -> CorruptRecordError:
    return corrupt(
        path, "R-REC-4", "the key occurs twice in its object; JSON keys are unique", _READ_ADVICE
    )


def _found(value: Any) -> str:
    if isinstance(value, _Duplicates):
        return f"an object with the key {json.dumps(value.duplicate)} twice"
    if isinstance(value, _NonFinite):
        return f"{value.literal} (not a JSON number)"
    return describe(value)


# -- The field table ------------------------------------------------------------------------------

Reader = Callable[["_Reader", Any, Path, Any], Any]
Writer = Callable[["_Writer", Any, Path, Any], Any]

_MISSING = object()


@attrs.frozen
class _Field:
    attr: str
    key: str
    read: Reader
    write: Writer
    absent: Callable[[], Any] | None  # value of a missing key; None: the key is required
    omit_none: bool  # written only when not None


@attrs.frozen
class _Class:
    cls: type
    fields: tuple[_Field, ...]
    keys: frozenset[str]


class _Reader:
    """State of one decoding pass."""

    __slots__ = ("invalid_utf8", "surrogates")

    def __init__(self, surrogates: bool, invalid_utf8: UnicodeDecodeError | None) -> None:
        self.surrogates = surrogates
        self.invalid_utf8 = invalid_utf8

    def error(self, path: Path, expected: str, found: Any, rule: str = "R-REC-4") -> Exception:
        return corrupt(path, rule, f"expected {expected}, found {_found(found)}", _READ_ADVICE)

    def bad_unicode(self, path: Path, what: str) -> Exception:
        if self.invalid_utf8 is not None:
            problem = (
                f"{what} is not valid UTF-8 (the record holds invalid UTF-8 bytes, the first at "
                f"byte offset {self.invalid_utf8.start}, or an unpaired \\uD800-\\uDFFF escape)"
            )
        else:
            problem = f"{what} holds an unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF)"
        return corrupt(path, "R-REC-4", problem + "; metadata must be valid UTF-8", _READ_ADVICE)


class _Writer:
    """State of one encoding pass; ``surrogates`` checks every string (the slow, exact path)."""

    __slots__ = ("surrogates",)

    def __init__(self, surrogates: bool) -> None:
        self.surrogates = surrogates

    def error(self, path: Path, expected: str, found: Any, rule: str = "R-REC-4") -> Exception:
        return corrupt(path, rule, f"expected {expected}, found {_found(found)}", _WRITE_ADVICE)


def _lone_surrogate(text: str) -> bool:
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


# Scalars. Each reader/writer gets (state, value, parent path, segment); the value's own path,
# (parent, segment), is only built when an error is raised.


def _read_str(rd: _Reader, raw: Any, parent: Path, seg: Any) -> str:
    if type(raw) is not str:
        raise rd.error((parent, seg), "a string", raw)
    if rd.surrogates and _lone_surrogate(raw):
        raise rd.bad_unicode((parent, seg), "the string")
    return raw


def _write_str(wr: _Writer, value: Any, parent: Path, seg: Any) -> str:
    if not isinstance(value, str):
        raise wr.error((parent, seg), "a str", value)
    if wr.surrogates and _lone_surrogate(value):
        raise corrupt(
            (parent, seg),
            "R-REC-4",
            "the string holds a lone surrogate and cannot be written as UTF-8; metadata strings "
            "and map keys must be valid Unicode",
            _WRITE_ADVICE,
        )
    return value


def _read_int(rd: _Reader, raw: Any, parent: Path, seg: Any) -> int:
    if type(raw) is int and 0 <= raw <= INT_MAX:
        return raw
    raise rd.error((parent, seg), f"an integer from 0 to {INT_MAX}", raw)


def _write_int(wr: _Writer, value: Any, parent: Path, seg: Any) -> int:
    if type(value) is int and 0 <= value <= INT_MAX:
        return value
    raise wr.error((parent, seg), f"an int from 0 to {INT_MAX}", value)


def _read_revision(rd: _Reader, raw: Any, parent: Path, seg: Any) -> int:
    if type(raw) is int and 1 <= raw <= UINT64_MAX:
        return raw
    raise rd.error((parent, seg), f"a revision from 1 to {UINT64_MAX} (uint64)", raw, "R-REC-2")


def _write_revision(wr: _Writer, value: Any, parent: Path, seg: Any) -> int:
    if type(value) is int and 1 <= value <= UINT64_MAX:
        return value
    raise wr.error((parent, seg), f"a revision from 1 to {UINT64_MAX} (uint64)", value, "R-REC-2")


def _format_problem(value: Any) -> str:
    problem = f"expected record format 1 to {r.RECORD_FORMAT}, found {_found(value)}"
    if type(value) is int and value > r.RECORD_FORMAT:
        problem += "; it is newer than this runtime: upgrade Durable to read it, never save over it"
    return problem


def _read_format(rd: _Reader, raw: Any, parent: Path, seg: Any) -> int:
    if type(raw) is int and 1 <= raw <= r.RECORD_FORMAT:
        return raw
    raise corrupt((parent, seg), "R-REC-1", _format_problem(raw), _READ_ADVICE)


def _write_format(wr: _Writer, value: Any, parent: Path, seg: Any) -> int:
    if type(value) is int and 1 <= value <= r.RECORD_FORMAT:
        return value
    raise corrupt((parent, seg), "R-REC-1", _format_problem(value), _WRITE_ADVICE)


def _read_bool(rd: _Reader, raw: Any, parent: Path, seg: Any) -> bool:
    if type(raw) is bool:
        return raw
    raise rd.error((parent, seg), "true or false", raw)


def _write_bool(wr: _Writer, value: Any, parent: Path, seg: Any) -> bool:
    if type(value) is bool:
        return value
    raise wr.error((parent, seg), "a bool", value)


def _read_bytes(rd: _Reader, raw: Any, parent: Path, seg: Any) -> bytes:
    if raw is None:  # Go writes a nil []byte as null
        return b""
    if type(raw) is not str:
        raise rd.error((parent, seg), "a standard base64 string", raw)
    try:
        encoded = raw.encode("ascii")
        data = base64.b64decode(encoded, validate=True)
    except (UnicodeEncodeError, binascii.Error):
        data = None
    # Only the canonical spelling is accepted: padding present, unused bits zero.
    if data is None or base64.b64encode(data) != encoded:
        raise corrupt(
            (parent, seg),
            "R-REC-4",
            f"expected canonical standard base64 (RFC 4648 alphabet with '=' padding), found a "
            f"string of {len(raw)} characters that is not",
            _READ_ADVICE,
        )
    return data


def _write_bytes(wr: _Writer, value: Any, parent: Path, seg: Any) -> str:
    if type(value) is not bytes:
        raise wr.error((parent, seg), "bytes", value)
    return base64.b64encode(value).decode("ascii")


def _enum_codec(cls: type[enum.Enum]) -> tuple[Reader, Writer]:
    members = {member.value: member for member in cls}
    expected = "one of " + ", ".join(json.dumps(v) for v in members)

    def read(rd: _Reader, raw: Any, parent: Path, seg: Any) -> enum.Enum:
        if type(raw) is str:
            member = members.get(raw)
            if member is not None:
                return member
        raise rd.error((parent, seg), expected, raw)

    def write(wr: _Writer, value: Any, parent: Path, seg: Any) -> str:
        if isinstance(value, str) and value in members:
            return members[value].value
        raise wr.error((parent, seg), f"a {cls.__name__} ({expected})", value)

    return read, write


# Composites.


def _object_codec(spec: _Class) -> tuple[Reader, Writer]:
    cls, keys = spec.cls, spec.keys
    reads = tuple((f.key, f.read, f.absent) for f in spec.fields)
    writes = tuple((f.attr, f.key, f.write, f.omit_none) for f in spec.fields)

    def read(rd: _Reader, raw: Any, parent: Path, seg: Any) -> Any:
        path = (parent, seg) if seg is not None else parent
        if type(raw) is not dict:
            if isinstance(raw, _Duplicates):
                raise _duplicate((path, raw.duplicate))
            raise rd.error(path, f"an object ({a(cls.__name__)})", raw)
        if not raw.keys() <= keys:
            unknown = next(k for k in raw if k not in keys)
            raise corrupt(
                (path, unknown),
                "R-REC-4",
                f"unknown field {json.dumps(unknown)} in {a(cls.__name__)} (its fields are "
                f"{', '.join(sorted(keys))}); a newer or foreign writer produced it",
                _READ_ADVICE,
            )
        args = []  # positional, in attribute order: no keyword dict per object
        for key, read_field, absent in reads:
            item = raw.get(key, _MISSING)
            if item is _MISSING:
                if absent is None:
                    raise corrupt(
                        (path, key),
                        "R-REC-4",
                        f"the required field {key} of {a(cls.__name__)} is missing",
                        _READ_ADVICE,
                    )
                args.append(absent())
            else:
                args.append(read_field(rd, item, path, key))
        return cls(*args)

    def write(wr: _Writer, value: Any, parent: Path, seg: Any) -> dict[str, Any]:
        path = (parent, seg) if seg is not None else parent
        if not isinstance(value, cls):
            raise wr.error(path, f"a {cls.__name__}", value)
        out = {}
        for attr, key, write_field, omit_none in writes:
            item = getattr(value, attr)
            if item is None and omit_none:
                continue
            out[key] = write_field(wr, item, path, key)
        return out

    return read, write


def _optional_codec(inner: tuple[Reader, Writer]) -> tuple[Reader, Writer]:
    read_inner, write_inner = inner

    def read(rd: _Reader, raw: Any, parent: Path, seg: Any) -> Any:
        return None if raw is None else read_inner(rd, raw, parent, seg)

    return read, write_inner  # None is omitted by the field (omit_none)


def _list_codec(item: tuple[Reader, Writer]) -> tuple[Reader, Writer]:
    read_item, write_item = item

    def read(rd: _Reader, raw: Any, parent: Path, seg: Any) -> list[Any]:
        if raw is None:  # Go writes a nil slice as null
            return []
        path = (parent, seg)
        if type(raw) is not list:
            raise rd.error(path, "an array", raw)
        return [read_item(rd, element, path, index) for index, element in enumerate(raw)]

    def write(wr: _Writer, value: Any, parent: Path, seg: Any) -> list[Any]:
        path = (parent, seg)
        if not isinstance(value, list):
            raise wr.error(path, "a list", value)
        return [write_item(wr, element, path, index) for index, element in enumerate(value)]

    return read, write


def _map_codec(item: tuple[Reader, Writer]) -> tuple[Reader, Writer]:
    read_item, write_item = item

    def read(rd: _Reader, raw: Any, parent: Path, seg: Any) -> dict[str, Any]:
        if raw is None:  # Go writes a nil map as null
            return {}
        path = (parent, seg)
        if type(raw) is not dict:
            if isinstance(raw, _Duplicates):
                raise _duplicate((path, (raw.duplicate,)))
            raise rd.error(path, "an object", raw)
        if rd.surrogates:
            for key in raw:
                if _lone_surrogate(key):
                    raise rd.bad_unicode((path, (key,)), "the map key")
        return {key: read_item(rd, element, path, (key,)) for key, element in raw.items()}

    def write(wr: _Writer, value: Any, parent: Path, seg: Any) -> dict[str, Any]:
        path = (parent, seg)
        if not isinstance(value, dict):
            raise wr.error(path, "a dict", value)
        out = {}
        for key, element in value.items():
            if not isinstance(key, str):
                raise wr.error(path, "str map keys", key)
            if wr.surrogates and _lone_surrogate(key):
                raise corrupt(
                    (path, (key,)),
                    "R-REC-4",
                    "the map key holds a lone surrogate and cannot be written as UTF-8; metadata "
                    "strings and map keys must be valid Unicode",
                    _WRITE_ADVICE,
                )
            out[key] = write_item(wr, element, path, (key,))
        return out

    return read, write


# Fields that differ from their type's general rule.
_FIELD_CODECS: dict[tuple[type, str], tuple[Reader, Writer]] = {
    (r.RunRecord, "revision"): (_read_revision, _write_revision),
    (r.RunRecord, "format"): (_read_format, _write_format),
}
# Scalars that may be missing: Bindings was added after the first records ("false keeps the
# original fingerprint of input values", seed 000 ScopeRecord).
_ABSENT_AS_DEFAULT = {(r.ScopeRecord, "bindings")}

_SCALARS: dict[Any, tuple[Reader, Writer]] = {
    str: (_read_str, _write_str),
    int: (_read_int, _write_int),
    bool: (_read_bool, _write_bool),
    bytes: (_read_bytes, _write_bytes),
}


_SPECS: dict[type, _Class] = {}
"""The field table of every record class, filled once at import by ``_build_codecs``."""


def _build_codecs() -> dict[type, tuple[Reader, Writer]]:
    objects: dict[type, tuple[Reader, Writer]] = {}

    def codec_of(tp: Any) -> tuple[Reader, Writer]:
        if tp in _SCALARS:
            return _SCALARS[tp]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _enum_codec(tp)
        if isinstance(tp, type) and attrs.has(tp):
            return object_codec(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list:
            return _list_codec(codec_of(args[0]))
        if origin is dict and args[0] is str:
            return _map_codec(codec_of(args[1]))
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            return _optional_codec(codec_of(next(a for a in args if a is not type(None))))
        raise TypeError(f"record field type {tp!r} has no JSON layout")

    def object_codec(cls: type) -> tuple[Reader, Writer]:
        if cls not in objects:
            hints = typing.get_type_hints(cls)
            fields = []
            for attribute in attrs.fields(cls):
                if attribute.kw_only or not attribute.init:  # records are built positionally
                    raise TypeError(f"{cls.__name__}.{attribute.name} must be a positional field")
                tp = hints[attribute.name]
                codec = _FIELD_CODECS.get((cls, attribute.name)) or codec_of(tp)
                origin = typing.get_origin(tp)
                optional = origin in (types.UnionType, typing.Union)
                if origin in (list, dict):
                    absent: Callable[[], Any] | None = attribute.default.factory  # type: ignore[union-attr]
                elif optional or (cls, attribute.name) in _ABSENT_AS_DEFAULT:
                    absent = (lambda default: lambda: default)(attribute.default)
                else:
                    absent = None
                fields.append(
                    _Field(
                        attr=attribute.name,
                        key=json_name(attribute.name),
                        read=codec[0],
                        write=codec[1],
                        absent=absent,
                        omit_none=optional,
                    )
                )
            spec = _Class(cls, tuple(fields), frozenset(f.key for f in fields))
            objects[cls] = _object_codec(spec)
            _SPECS[cls] = spec
        return objects[cls]

    object_codec(r.RunRecord)
    return objects


_CODECS = _build_codecs()
_READ_RUN, _WRITE_RUN = _CODECS[r.RunRecord]
