"""The record's JSON layout (R-REC-4): a run record <-> canonical UTF-8 JSON bytes.

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

The layout is driven by the attrs classes of :mod:`durable_core.records`: one field table per
class, derived from the attributes and their types, serves both directions. cattrs' generic hooks
are deliberately not used here: its ``int`` hook accepts ``true``, ``1.5`` and ``"7"``, it cannot
see duplicate keys, and its validation errors carry no single path; the record is the core of
Durable and must be exact. Decoding and encoding are one linear pass each. Reading a record and
checking its shape each have a quick path generated from the same field table, which accepts
only what the exact path accepts and hands anything else to it (the exact path names the
problem).

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
from bisect import bisect_left, insort
from collections.abc import Callable
from typing import Any

import attrs

from durable_core._nogc import nogc
from durable_core._words import a
from durable_core.errors import CorruptRecordError
from durable_core.records import model as r
from durable_core.records.delta import GONE, Partial
from durable_core.records.model import copy_record
from durable_core.records.path import Path, corrupt, describe

__all__ = [
    "INT_MAX",
    "UINT64_MAX",
    "RecordEncoder",
    "copy_record",
    "json_name",
    "record_from_json",
    "record_to_json",
]

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


# -- Public API ----------------------------------------------------------------------------------


def record_to_json(record: r.RunRecord) -> bytes:
    """Encode ``record`` as canonical UTF-8 JSON bytes (R-REC-4).

    Keys are the seed's field names, maps and objects are written with sorted keys and no
    whitespace, ``bytes`` as standard base64; ``ValueRecord.Stream`` and ``ManagedRecord.State``
    are omitted when ``None``. Equal records give equal bytes.

    Args:
        record: the record to encode; it is not modified.

    Returns:
        The UTF-8 JSON bytes, which :func:`record_from_json` reads back into an equal record.

    Raises:
        CorruptRecordError: the record cannot be written as a valid record: a metadata string or
            map key holds a lone surrogate (R-REC-4, B-FILE-5), a field has the wrong Python type,
            an integer is negative or too large, ``format`` is not 1 to ``RECORD_FORMAT``
            (R-REC-1), or ``revision`` is not in 1…2**64-1 (R-REC-2).
            The message names the path (``$.Scopes["…"].Graph``); nothing is written.
    """
    tree = _WRITE_RUN(_Writer(surrogates=False), record, None, None)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _WRITE_RUN(_Writer(surrogates=True), record, None, None)  # raises, naming the path
        raise CorruptRecordError(  # pragma: no cover - the exact pass always finds it
            "run record holds a string that is not valid Unicode; nothing was written",
            rule="R-REC-4",
        ) from None


@nogc
def record_from_json(data: bytes | bytearray | memoryview) -> r.RunRecord:
    """Decode a run record from JSON bytes, strictly (R-REC-4, B-FILE-5).

    Only the shape is checked here (JSON, types, names, ranges, Unicode); the data model's
    structural rules are :func:`durable_core.validate_record`'s job.

    Args:
        data: the stored bytes (UTF-8 JSON).

    Returns:
        The decoded record (enum fields as enum members).

    Raises:
        CorruptRecordError: the bytes are not a run record. ``.path`` names the JSON path of the
            first problem (``$.Scopes["…"].Nodes["split"].Outputs[0].Digest``; ``$`` for
            unparsable text) and ``.rule`` the rule: ``R-REC-1`` for a ``Format`` other than 1 to
            :data:`~durable_core.records.RECORD_FORMAT` (checked first: a newer format may hold
            fields this runtime does not know), ``R-REC-2`` for a bad ``Revision``,
            ``R-REC-4`` for everything else.
    """
    raw_bytes = bytes(data)
    invalid_utf8: UnicodeDecodeError | None = None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Keep going so that the path of the bad string can be named: surrogateescape turns each
        # invalid byte into a lone surrogate, which the string checks below report.
        invalid_utf8 = exc
        text = raw_bytes.decode("utf-8", "surrogateescape")
    surrogates = invalid_utf8 is not None or (
        "\\" in text and _SURROGATE_ESCAPE.search(text) is not None
    )
    if not surrogates:
        quick = _read_plain(text)
        if quick is not None:
            return quick
    try:
        tree = json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_NonFinite)
    except RecursionError:
        raise corrupt(None, "R-REC-4", "the JSON is nested too deeply", _READ_ADVICE) from None
    except ValueError as exc:  # JSONDecodeError, or an integer literal of thousands of digits
        if invalid_utf8 is not None:
            problem = (
                f"the bytes are not valid UTF-8 (first invalid byte at offset {invalid_utf8.start})"
            )
        elif isinstance(exc, json.JSONDecodeError):
            problem = (
                f"the text is not one JSON value: {exc.msg} at line {exc.lineno} column "
                f"{exc.colno} (character {exc.pos})"
            )
        else:
            problem = f"the text is not valid JSON: {exc}"
        raise corrupt(None, "R-REC-4", problem, _READ_ADVICE) from None
    if isinstance(tree, dict) and "Format" in tree:
        # Before anything else: a newer format may hold fields this runtime does not know.
        _read_format(_Reader(False, None), tree["Format"], None, "Format")
    if not surrogates:
        try:
            return _QUICK_READ(tree)  # the hook marked any object with a duplicate key
        except _Slow:
            pass  # the exact reader below decides, and names the path of a problem
    record = _READ_RUN(_Reader(surrogates, invalid_utf8), tree, None, None)
    if invalid_utf8 is not None:  # pragma: no cover - every string and key is checked above
        raise corrupt(None, "R-REC-4", "the bytes are not valid UTF-8", _READ_ADVICE)
    return record


class _Slow(Exception):
    """The quick reader met something it does not handle; the exact reader takes over."""


def _quick_bytes(raw: Any) -> bytes:
    if raw is None or raw == "":
        return b""
    if type(raw) is not str:
        raise _Slow
    try:
        data = binascii.a2b_base64(raw, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _Slow from None
    if binascii.b2a_base64(data, newline=False) != raw.encode("ascii"):
        raise _Slow  # not the canonical spelling
    return data


def _build_quick_readers() -> Callable[[Any, list[int]], Any]:
    """Generate one ``_quick_<Class>(raw, n)`` per record class from the field table.

    For text without surrogate escapes and of valid UTF-8 (every record Durable writes), each
    builds exactly the object the exact reader builds, or raises :class:`_Slow` at the first
    thing it does not handle (a wrong type, an unknown or missing field, a duplicate key,
    non-canonical base64, …): the exact reader then reads the whole record again and names
    the problem. Each adds the number of keys of every JSON object it reads (its own and its
    maps') to ``n[0]``, which is how :func:`record_from_json` knows no key occurred twice.
    """
    names: dict[str, Any] = {
        "_Slow": _Slow,
        "_bytes": _quick_bytes,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
        "M": _MISSING,
    }
    special = {
        (r.RunRecord, "revision"): "if not (type(v) is int and 1 <= v <= UINT64_MAX): raise _Slow",
        (r.RunRecord, "format"): "if not (type(v) is int and 1 <= v <= RECORD_FORMAT): raise _Slow",
    }

    def item_expression(tp: Any) -> str:
        """An expression reading ``x`` as ``tp`` (objects only: scalars in lists do not occur)."""
        if isinstance(tp, type) and tp in _SPECS:
            return f"_quick_{tp.__name__}(x, n)"
        raise TypeError(f"record list or map item type {tp!r} has no quick reader")

    def statements(tp: Any, target: str) -> list[str]:
        """Statements reading ``v`` (present) into ``target``."""
        if tp is str:
            return ["if type(v) is not str: raise _Slow", f"{target} = v"]
        if tp is int:
            return ["if not (type(v) is int and 0 <= v <= INT_MAX): raise _Slow", f"{target} = v"]
        if tp is bool:
            return ["if type(v) is not bool: raise _Slow", f"{target} = v"]
        if tp is bytes:
            return [f"{target} = _bytes(v)"]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            members = f"_members_{tp.__name__}"
            names[members] = {member.value: member for member in tp}
            return [
                f"{target} = {members}.get(v) if type(v) is str else None",
                f"if {target} is None: raise _Slow",
            ]
        if isinstance(tp, type) and tp in _SPECS:
            return [f"{target} = _quick_{tp.__name__}(v, n)"]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list:
            return [
                "if v is None: " + f"{target} = []",
                f"elif type(v) is list: {target} = [{item_expression(args[0])} for x in v]",
                "else: raise _Slow",
            ]
        if origin is dict and args[0] is str:
            return [
                "if v is None: " + f"{target} = {{}}",
                "elif type(v) is dict:",
                "    n[0] += len(v)",
                f"    {target} = {{k: {item_expression(args[1])} for k, x in v.items()}}",
                "else: raise _Slow",
            ]
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            body = statements(inner, target)
            return [f"if v is None: {target} = None", "else:", *("    " + line for line in body)]
        raise TypeError(f"record field type {tp!r} has no quick reader")

    lines: list[str] = []
    for cls, spec in _SPECS.items():
        names[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        # No unknown key: every key present is a field read below. Without optional fields
        # the object has exactly the required keys; with them, ``k`` counts down one per
        # optional field present and ends at the number of required fields.
        required = sum(1 for field in spec.fields if field.absent is None)
        optional = len(spec.fields) - required
        lines.append(f"def _quick_{cls.__name__}(raw, n):")
        if optional:
            lines.append("    if type(raw) is not dict: raise _Slow")
            lines.append("    k = len(raw)")
            lines.append("    n[0] += k")
            lines.append("    g = raw.get")
        else:
            lines.append(f"    if type(raw) is not dict or len(raw) != {required}: raise _Slow")
            lines.append(f"    n[0] += {required}")
        lines.append("    try:")
        for index, field in enumerate(spec.fields):
            target = f"a{index}"
            if field.absent is None:  # required: a missing key is a KeyError
                lines.append(f"        v = raw[{field.key!r}]")
                body = (
                    [special[(cls, field.attr)], f"{target} = v"]
                    if (cls, field.attr) in special
                    else statements(hints[field.attr], target)
                )
                lines.extend("        " + line for line in body)
            else:
                absent = f"_absent_{cls.__name__}_{index}"
                names[absent] = field.absent
                lines.append(f"        v = g({field.key!r}, M)")
                lines.append(f"        if v is M: {target} = {absent}()")
                lines.append("        else:")
                lines.append("            k -= 1")
                lines.extend(
                    "            " + line for line in statements(hints[field.attr], target)
                )
        lines.append("    except KeyError:")
        lines.append("        raise _Slow from None")
        if optional:
            lines.append(f"    if k != {required}: raise _Slow")
        arguments = ", ".join(f"a{index}" for index in range(len(spec.fields)))
        lines.append(f"    return {cls.__name__}({arguments})")
    exec(compile("\n".join(lines), "<record quick readers>", "exec"), names)
    return names["_quick_RunRecord"]  # type: ignore[no-any-return]


_QUICK_RUN = _build_quick_readers()


def _QUICK_READ(tree: Any) -> r.RunRecord:
    """The quick reader of a parsed record (raises :class:`_Slow` for the exact reader)."""
    return _QUICK_RUN(tree, [0])  # type: ignore[no-any-return]


# JSON text that the quick path may parse without watching for duplicate keys: see
# :func:`_read_plain`.
_PLAIN = json.JSONDecoder(parse_constant=_NonFinite)
_SPACE_BEFORE_COLON = re.compile(r'" +:')


def _read_plain(text: str) -> r.RunRecord | None:
    """The record in ``text`` read on the quick path, or ``None`` when the exact path must read it.

    The quick path parses with the C parser alone (no Python call per object) and proves
    afterwards that no object held a key twice: in text without a backslash every ``"`` opens or
    closes a string, so when no key is followed by whitespace before its colon, ``'":'`` occurs
    once per key (and once more for every string that begins with ``:``). Parsing without a
    hook keeps one entry per key, so the keys the quick reader counts in the parsed objects
    equal that count exactly when there was no duplicate (and no string began with ``:``).
    Anything else (a backslash, a tab or line break, a space before a colon, a count that
    differs, text the quick reader does not take) returns ``None``, and the exact path decides
    and names the problem.
    """
    if "\\" in text or "\n" in text or "\r" in text or "\t" in text:
        return None  # escapes, or whitespace that only a layout other than ours writes
    if '" ' in text and _SPACE_BEFORE_COLON.search(text) is not None:
        return None  # a space after a closing quote may stand before a colon
    try:
        tree = _PLAIN.decode(text)
    except (ValueError, RecursionError):
        return None  # the exact path parses again and says what is wrong
    if isinstance(tree, dict) and "Format" in tree:
        # Before anything else: a newer format may hold fields this runtime does not know.
        _read_format(_Reader(False, None), tree["Format"], None, "Format")
    keys = [0]
    try:
        record = _QUICK_RUN(tree, keys)
    except _Slow:
        return None
    if keys[0] != text.count('":'):
        return None
    return record  # type: ignore[no-any-return]


def check_shape(record: r.RunRecord) -> None:
    """Check that ``record`` can be written: Python types, integer ranges, valid Unicode.

    It accepts exactly what the writing pass of :func:`record_to_json` accepts; it is the
    first step of :func:`durable_core.validate_record`. A quick pass generated from the field
    table checks the usual record (exact types) without producing any text; when it finds
    anything else, the writing pass itself decides and names the path.

    Raises:
        CorruptRecordError: as :func:`record_to_json`, naming the path.
    """
    if not _SHAPE_OK(record):
        _WRITE_RUN(_Writer(surrogates=True), record, None, None)


def _build_shape_checks() -> Callable[[Any], bool]:
    """Generate one ``_shape_<Class>(value) -> bool`` per record class from the field table.

    Each returns True only when the writing pass would accept the value: the exact type of
    every object, list and map (the writer accepts subclasses too: they take the slow path),
    the ranges of the integer fields, valid Unicode of every string and map key, enum members
    of string enums. It never raises and builds nothing.
    """
    names: dict[str, Any] = {
        "_lone": _LONE_SURROGATE.search,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
    }
    lines: list[str] = []
    special = {
        (r.RunRecord, "revision"): "(type({v}) is int and 1 <= {v} <= UINT64_MAX)",
        (r.RunRecord, "format"): "(type({v}) is int and 1 <= {v} <= RECORD_FORMAT)",
    }

    def scalar(tp: Any) -> str | None:
        if tp is str:
            return "(type({v}) is str and ({v}.isascii() or _lone({v}) is None))"
        if tp is int:
            return "(type({v}) is int and 0 <= {v} <= INT_MAX)"
        if tp is bool:
            return "(type({v}) is bool)"
        if tp is bytes:
            return "(type({v}) is bytes)"
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            names[tp.__name__] = tp
            # the writer takes a str that is a member's value: a str enum's own members pass
            return f"(type({{v}}) is {tp.__name__})" if issubclass(tp, str) else "False"
        if isinstance(tp, type) and tp in _SPECS:
            return f"_shape_{tp.__name__}({{v}})"
        return None

    def check(tp: Any, v: str, depth: int, out: list[str], indent: str) -> None:
        """Append statements that ``return False`` unless ``v`` is acceptable as ``tp``."""
        expression = scalar(tp)
        if expression is not None:
            out.append(f"{indent}if not {expression.format(v=v)}: return False")
            return
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        item = f"x{depth}"
        if origin is list:
            out.append(f"{indent}if type({v}) is not list: return False")
            out.append(f"{indent}for {item} in {v}:")
            check(args[0], item, depth + 1, out, indent + "    ")
            return
        if origin is dict and args[0] is str:
            key = f"k{depth}"
            out.append(f"{indent}if type({v}) is not dict: return False")
            out.append(f"{indent}for {key}, {item} in {v}.items():")
            key_check = scalar(str)
            assert key_check is not None
            out.append(f"{indent}    if not {key_check.format(v=key)}: return False")
            check(args[1], item, depth + 1, out, indent + "    ")
            return
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            out.append(f"{indent}if {v} is not None:")
            check(inner, v, depth, out, indent + "    ")
            return
        raise TypeError(f"record field type {tp!r} has no shape check")

    for cls, spec in _SPECS.items():
        names[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        lines.append(f"def _shape_{cls.__name__}(value):")
        lines.append(f"    if type(value) is not {cls.__name__}: return False")
        for field in spec.fields:
            lines.append(f"    v = value.{field.attr}")
            fixed = special.get((cls, field.attr))
            if fixed is not None:
                lines.append(f"    if not {fixed.format(v='v')}: return False")
            else:
                check(hints[field.attr], "v", 0, lines, "    ")
        lines.append("    return True")
    exec(compile("\n".join(lines), "<record shape checks>", "exec"), names)
    return names["_shape_RunRecord"]  # type: ignore[no-any-return]


_SHAPE_OK = _build_shape_checks()


# -- Encoding successive versions of one record ---------------------------------------------------


def _canonical_dumps() -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode``,
    without building a new C encoder on every call (the saves encode many small parts)."""
    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C encoder
        return plain.encode
    # No circular check (markers None): the writers build trees, never cycles.
    tree = make(None, plain.default, _STR, None, ":", ",", True, False, True)

    def dumps(value: Any) -> str:
        kind = type(value)
        if kind is str:
            return _STR(value)
        if kind is int:
            return int.__repr__(value)
        return "".join(tree(value, 0))

    return dumps


_STR: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]
_DUMPS = _canonical_dumps()


def _build_text_writers() -> tuple[
    dict[type, Callable[[Any], str]], dict[type, dict[str, Callable[[Any], str]]]
]:
    """Generate one ``_text_<Class>(value) -> str`` per record class from the field table, and
    one ``_field_<Class>_<attribute>(value) -> str`` per field (the text of a value, not None,
    of that field alone).

    Each writes the canonical JSON text of a record object directly (keys in sorted order, no
    whitespace, strings as the C encoder spells them with ``ensure_ascii`` off), exactly the
    text ``_DUMPS`` gives of the writing pass's tree, without building that tree. Each takes
    only the usual object (exact types throughout, integers in range, enum members of their
    own enum) and raises :class:`_Slow` at anything else: the writing pass then encodes the
    object, and names the path of a value it refuses. Strings are not checked for lone
    surrogates here, as in the writing pass without ``surrogates``: the UTF-8 encoding of the
    whole text refuses them, and :func:`check_shape` names the path.
    """
    names: dict[str, Any] = {
        "_Slow": _Slow,
        "_str": _STR,
        "_b64": binascii.b2a_base64,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
    }
    special = {
        (r.RunRecord, "revision"): "type(x) is int and 1 <= x <= UINT64_MAX",
        (r.RunRecord, "format"): "type(x) is int and 1 <= x <= RECORD_FORMAT",
    }

    def statements(tp: Any, x: str, target: str, depth: int) -> list[str]:
        """Statements that set ``target`` to the text of ``x`` (present) as ``tp``."""
        if tp is str:
            return [f"if type({x}) is not str: raise _Slow", f"{target} = _str({x})"]
        if tp is int:
            return [
                f"if not (type({x}) is int and 0 <= {x} <= INT_MAX): raise _Slow",
                f"{target} = int.__repr__({x})",
            ]
        if tp is bool:
            return [
                f"if type({x}) is not bool: raise _Slow",
                f'{target} = "true" if {x} else "false"',
            ]
        if tp is bytes:
            return [
                f"if type({x}) is not bytes: raise _Slow",
                f"{target} = '\"' + _b64({x}, newline=False).decode('ascii') + '\"'",
            ]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            if not issubclass(tp, str):  # the writing pass refuses every member
                return ["raise _Slow"]
            table = f"_enum_{tp.__name__}"
            names[tp.__name__] = tp
            names[table] = {member: _STR(member.value) for member in tp}
            return [
                f"{target} = {table}.get({x}) if type({x}) is {tp.__name__} else None",
                f"if {target} is None: raise _Slow",
            ]
        if isinstance(tp, type) and tp in _SPECS:
            return [f"{target} = _text_{tp.__name__}({x})"]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        item = f"y{depth}"
        if origin is list:
            if isinstance(args[0], type) and args[0] in _SPECS:  # a list of record objects
                return [
                    f"if type({x}) is not list: raise _Slow",
                    f'{target} = "[" + ",".join(map(_text_{args[0].__name__}, {x})) + "]"',
                ]
            inner = statements(args[0], item, "t", depth + 1)
            return [
                f"if type({x}) is not list: raise _Slow",
                f"p{depth} = []",
                f"for {item} in {x}:",
                *("    " + line for line in inner),
                f"    p{depth}.append(t)",
                f'{target} = "[" + ",".join(p{depth}) + "]"',
            ]
        if origin is dict and args[0] is str:
            key = f"k{depth}"
            inner = statements(args[1], item, "t", depth + 1)
            return [
                f"if type({x}) is not dict: raise _Slow",
                f"p{depth} = []",
                # sorted keys; the keys of a dict are distinct, so no value is compared
                f"for {key}, {item} in sorted({x}.items()):",
                f"    if type({key}) is not str: raise _Slow",
                *("    " + line for line in inner),
                f'    p{depth}.append(_str({key}) + ":" + t)',
                f'{target} = "{{" + ",".join(p{depth}) + "}}"',
            ]
        raise TypeError(f"record field type {tp!r} has no text writer")

    def value_statements(cls: type, field: _Field, tp: Any, target: str) -> list[str]:
        """Statements that set ``target`` to the text of the field's value ``x`` (not None)."""
        fixed = special.get((cls, field.attr))
        if fixed is not None:
            return [f"if not ({fixed}): raise _Slow", f"{target} = int.__repr__(x)"]
        if field.omit_none:
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        return statements(tp, "x", target, 0)

    lines: list[str] = []
    for cls, spec in _SPECS.items():
        names[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        for field in spec.fields:  # one field's value alone (a changed field of an object)
            lines.append(f"def _field_{cls.__name__}_{field.attr}(x):")
            body = value_statements(cls, field, hints[field.attr], "t")
            lines.extend("    " + line for line in body)
            lines.append("    return t")
        ordered = sorted(spec.fields, key=lambda f: f.key)
        lines.append(f"def _text_{cls.__name__}(v):")
        lines.append(f"    if type(v) is not {cls.__name__}: raise _Slow")
        pieces: list[str] = []  # f-string pieces, in key order
        for index, field in enumerate(ordered):
            target = f"a{index}"
            lines.append(f"    x = v.{field.attr}")
            body = value_statements(cls, field, hints[field.attr], target)
            separator = "," if pieces else ""
            prefix = (separator + _key_prefix(field.key)).replace("{", "{{").replace("}", "}}")
            if field.omit_none:  # Optional: the key is left out when the value is None
                if not pieces:
                    raise TypeError(f"{cls.__name__}: an optional field may not come first")
                lines.append(f'    if x is None: {target} = ""')
                lines.append("    else:")
                lines.extend("        " + line for line in body)
                lines.append(f"        {target} = {prefix!r} + {target}")
                pieces.append(f"{{{target}}}")
            else:
                lines.extend("    " + line for line in body)
                pieces.append(prefix + f"{{{target}}}")
        lines.append("    return f" + repr("{{" + "".join(pieces) + "}}"))
    exec(compile("\n".join(lines), "<record text writers>", "exec"), names)
    objects = {cls: names[f"_text_{cls.__name__}"] for cls in _SPECS}
    fields = {
        cls: {f.attr: names[f"_field_{cls.__name__}_{f.attr}"] for f in spec.fields}
        for cls, spec in _SPECS.items()
    }
    return objects, fields


def _record_map_fields(cls: type) -> dict[str, type]:
    """The fields of ``cls`` holding ``dict[str, <record class>]``, by JSON key."""
    hints = typing.get_type_hints(cls)
    result: dict[str, type] = {}
    for field in _SPECS[cls].fields:
        tp = hints[field.attr]
        if typing.get_origin(tp) is dict:
            value = typing.get_args(tp)[1]
            if isinstance(value, type) and value in _SPECS:
                result[field.key] = value
    return result


_MAP_FIELDS = {cls: _record_map_fields(cls) for cls in _SPECS}

_FIELDS_BY_ATTR = {cls: {f.attr: f for f in spec.fields} for cls, spec in _SPECS.items()}


def _key_prefix(key: str) -> str:
    return _STR(key) + ":"


_TEXT, _FIELD_TEXT = _build_text_writers()


def _field_text(cls: type, field: _Field, value: Any) -> str:
    """The canonical JSON text of ``value`` (not None) as ``field`` of a ``cls``.

    Raises:
        CorruptRecordError: the value cannot be written (see :func:`_entry_text`).
    """
    try:
        return _FIELD_TEXT[cls][field.attr](value)
    except _Slow:
        return _DUMPS(field.write(_Writer(False), value, None, field.key))


def _entry_text(cls: type, value: Any) -> str:
    """The canonical JSON text of the record object ``value`` of class ``cls``.

    Raises:
        CorruptRecordError: the object cannot be written (its path is not known here: the
            caller's :func:`check_shape` names it).
    """
    try:
        return _TEXT[cls](value)
    except _Slow:
        return _DUMPS(_CODECS[cls][1](_Writer(False), value, None, None))


class _Parts:
    """The encoded entries of one map: ``parts[key]`` is ``"key":{…}``; ``order`` the sorted
    keys; ``subs`` the memos of entries that hold maps themselves (scopes), whose part is
    rebuilt on demand after they changed (``stale``)."""

    __slots__ = ("order", "parts", "stale", "subs")

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self.order: list[str] = []
        self.subs: dict[str, _Object] = {}
        self.stale: set[str] = set()

    def put(self, key: str, quoted: str, cls: type, value: Any) -> str:
        """Encode entry ``key`` (``quoted``: its JSON string) anew; returns its value's text."""
        if _MAP_FIELDS[cls]:
            sub = self.subs[key] = _Object.build(cls, value)
            text = sub.text()
        else:
            text = _entry_text(cls, value)
        parts = self.parts
        if key not in parts:
            insort(self.order, key)
        parts[key] = quoted + ":" + text
        if self.stale:
            self.stale.discard(key)
        return text

    def remove(self, key: str) -> None:
        del self.parts[key]
        del self.order[bisect_left(self.order, key)]
        self.subs.pop(key, None)
        self.stale.discard(key)

    def text(self) -> str:
        for key in self.stale:
            self.parts[key] = _key_prefix(key) + self.subs[key].text()
        self.stale.clear()
        return "{" + ",".join(map(self.parts.__getitem__, self.order)) + "}"

    @classmethod
    def build(cls, entry_cls: type, mapping: Any) -> _Parts:
        if type(mapping) is not dict:
            raise TypeError("expected a dict")
        parts = cls()
        for key, value in mapping.items():
            if type(key) is not str:
                raise TypeError("expected str map keys")
            if _MAP_FIELDS[entry_cls]:
                sub = parts.subs[key] = _Object.build(entry_cls, value)
                text = sub.text()
            else:
                text = _entry_text(entry_cls, value)
            parts.parts[key] = _key_prefix(key) + text
        parts.order = sorted(parts.parts)
        return parts


class _Object:
    """The encoded fields of one record object that holds maps (the run record, a scope)."""

    __slots__ = ("fields", "maps")

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.maps: dict[str, _Parts] = {}

    @classmethod
    def build(cls, record_cls: type, value: Any) -> _Object:
        if not isinstance(value, record_cls):
            raise TypeError(f"expected {a(record_cls.__name__)}")
        memo = cls()
        maps = _MAP_FIELDS[record_cls]
        for field in _SPECS[record_cls].fields:
            item = getattr(value, field.attr)
            entry_cls = maps.get(field.key)
            if entry_cls is not None:
                memo.maps[field.key] = _Parts.build(entry_cls, item)
            elif not (item is None and field.omit_none):
                text = _field_text(record_cls, field, item)
                memo.fields[field.key] = _key_prefix(field.key) + text
        return memo

    def text(self) -> str:
        items = dict(self.fields)
        for key, parts in self.maps.items():
            items[key] = _key_prefix(key) + parts.text()
        return "{" + ",".join(items[key] for key in sorted(items)) + "}"


class RecordEncoder:
    """Encodes successive versions of one run's record from what changed between them.

    :meth:`encode` encodes a whole record and remembers the text of each of its parts (every
    scope, node, attempt, stream, message and managed record) by its place in the record.
    :meth:`encode_change` is then told exactly what changed (a
    :class:`~durable_core.durable.proposal.ObjectChange`): it encodes only those parts with the
    same exact writers as :func:`record_to_json` and returns the save's
    :mod:`~durable_core.recorddelta` delta, plus the complete bytes on demand. Nothing is
    remembered by object identity: what is re-encoded is what the change names.

    The complete bytes are identical to ``record_to_json(record)``.
    """

    def __init__(self) -> None:
        self._root: _Object | None = None
        self._generation = 0

    def encode(self, record: r.RunRecord) -> bytes:
        """The canonical JSON bytes of ``record`` (as :func:`record_to_json`); its parts are
        remembered for :meth:`encode_change`.

        Raises:
            CorruptRecordError: as :func:`record_to_json`, naming the path.
        """
        self._generation += 1
        try:
            self._root = _Object.build(r.RunRecord, record)
            return self._root.text().encode("utf-8")
        except Exception:
            self._root = None
            return record_to_json(record)  # raises, naming the path

    def encode_change(
        self, record: r.RunRecord, change: Any, base: int
    ) -> tuple[bytes | None, Callable[[], bytes]]:
        """The delta of one save, and a function returning the complete bytes.

        Args:
            record: the record after the change (``record.revision`` is the new revision).
            change: what changed since the record last given to :meth:`encode` or
                :meth:`encode_change`.
            base: the revision before the change.

        Returns:
            ``(delta, data)``: the delta's canonical bytes (``None`` when the encoder had not
            seen the record before: the first save after a resume), and a function returning
            ``record_to_json(record)``'s bytes; it may only be called before the next call of
            this encoder (afterwards it raises ``DurableError``).

        Raises:
            CorruptRecordError: a changed part cannot be written (naming the path).
        """
        self._generation += 1
        generation = self._generation
        if self._root is None:
            self.encode(record)
            self._generation = generation
            return None, self._data(generation, record)  # no delta known: a whole save
        sets: list[str] = []
        unsets: list[str] = []
        try:
            self._apply(r.RunRecord, self._root, record, change, "[", sets, unsets)
            delta = (
                f'{{"Base":{int.__repr__(base)},"Revision":{int.__repr__(record.revision)},'
                f'"Set":[{",".join(sets)}],"Unset":[{",".join(unsets)}]}}'
            ).encode()
        except Exception:
            self._root = None
            check_shape(record)  # raises, naming the path
            raise
        return delta, self._data(generation, record)

    def _data(self, generation: int, record: r.RunRecord) -> Callable[[], bytes]:
        def data() -> bytes:
            root = self._root
            if generation == self._generation and root is not None:
                text = root.text()
                # Checked again: a change encoded meanwhile (another thread) may have been
                # half applied to what was just read.
                if generation == self._generation:
                    return text.encode("utf-8")
            from durable_core.errors import DurableError

            raise DurableError(
                f"the complete bytes of revision {record.revision} are no longer available: "
                "the encoder has encoded another change since; read EncodedRecord.data before "
                "the next save"
            )

        return data

    def _apply(
        self,
        cls: type,
        memo: _Object,
        value: Any,
        change: Any,
        path: str,
        sets: list[str],
        unsets: list[str],
    ) -> None:
        """Encode ``change`` of ``value`` (of class ``cls``, remembered in ``memo``) into
        ``memo``, adding each ``Set`` entry's and each ``Unset`` path's text to ``sets`` and
        ``unsets``; ``path`` is the JSON text of the object's path without its closing bracket
        (``[`` for the record, ``["Scopes","<id>",`` for a scope)."""
        fields = _FIELDS_BY_ATTR[cls]
        for attr in change.fields:
            field = fields[attr]
            item = getattr(value, attr)
            quoted = _STR(field.key)
            if item is None and field.omit_none:
                if memo.fields.pop(field.key, None) is not None:
                    unsets.append(f"{path}{quoted}]")
                continue
            text = _field_text(cls, field, item)
            memo.fields[field.key] = quoted + ":" + text
            sets.append(f"[{path}{quoted}],{text}]")
        if change.whole:
            maps = _MAP_FIELDS[cls]
            for attr in change.whole:
                field = fields[attr]
                parts = memo.maps[field.key] = _Parts.build(maps[field.key], getattr(value, attr))
                sets.append(f"[{path}{_STR(field.key)}],{parts.text()}]")
        for attr, entries in change.maps.items():
            field = fields[attr]
            entry_cls = _MAP_FIELDS[cls][field.key]
            parts = memo.maps[field.key]
            within = path + _STR(field.key) + ","
            for key, entry in entries.items():
                if type(key) is not str:
                    raise TypeError("expected str map keys")
                quoted = _STR(key)
                if entry is GONE:
                    parts.remove(key)
                    unsets.append(f"{within}{quoted}]")
                elif type(entry) is Partial:
                    self._apply(
                        entry_cls,
                        parts.subs[key],
                        entry.value,
                        entry.change,
                        f"{within}{quoted},",
                        sets,
                        unsets,
                    )
                    parts.stale.add(key)
                else:
                    text = parts.put(key, quoted, entry_cls, entry)
                    sets.append(f"[{within}{quoted}],{text}]")
