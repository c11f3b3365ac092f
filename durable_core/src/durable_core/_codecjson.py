"""JSON codecs: canonical bytes, strict decoding, composition in containers (SPEC C-1, C-4).

Every codec here turns a value into a *JSON form* (``to_json``) and back (``from_json``);
``encode``/``decode`` add the canonical text: sorted keys, no whitespace, ``ensure_ascii=False``,
UTF-8. Container codecs (list, dict, tuple, optional, union) and class codecs (attrs classes,
dataclasses, enums — through a private cattrs converter) are built from the codecs of their
parts by :class:`Resolver`. A codec that is not a JSON codec (numpy arrays, any custom binary
codec) takes part in a container as a base64 string of its own bytes.

Errors inside a value travel up as :class:`PathProblem`, each level adding its path segment, so
the final :class:`~durable_core.errors.CodecError` can say ``at items[3].name: expected str``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import inspect
import json
import math
import typing
from abc import ABCMeta
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from durable_core._typeforms import (
    InstanceMismatch,
    NoneType,
    check_instance,
    format_path,
    is_union,
    mismatch_text,
    normalize,
    type_name,
)
from durable_core.errors import CodecError

__all__ = [
    "ALL_KINDS",
    "JSONCodec",
    "PathProblem",
    "ResolveProblem",
    "Resolver",
    "default_json_codecs",
    "dumps_canonical",
    "loads_strict",
    "make_converter",
]

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

_KIND_TEXT = {
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


def dumps_canonical(obj: Any) -> bytes:
    """Canonical JSON bytes of a JSON form: sorted keys, no whitespace, UTF-8 (C-1).

    Raises:
        PathProblem: NaN/Infinity, a lone surrogate, a value nested too deeply.
    """
    try:
        text = json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")
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
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_object)
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


# --- the base class and the version rule -----------------------------------------------------


def ref_name(codec: Any) -> str:
    """How a codec is named inside another codec's id: ``int`` for ``json:int``, else the id."""
    cid = codec.id
    return cid[5:] if cid.startswith("json:") else cid


def pins_of(codec: Any) -> frozenset[str]:
    """``name@version`` of every codec with a version other than ``"1"`` that ``codec`` is
    made of, itself included — what a containing codec's version must reflect."""
    base = getattr(codec, "_base_version", codec.version)
    deps: frozenset[str] = getattr(codec, "_dep_pins", frozenset())
    if base != "1":
        return deps | {f"{ref_name(codec)}@{base}"}
    return deps


def compose_version(base: str, deps: frozenset[str]) -> str:
    """``base``, then ``+`` and the sorted pins of the versioned codecs it contains."""
    return base if not deps else f"{base}+{','.join(sorted(deps))}"


class JSONCodec:
    """Base class of codecs whose bytes are canonical JSON (C-1, C-4).

    A JSON codec can be used inside containers (``list[T]``, ``dict[str, T]``, ``T | None`` …)
    and as a field of a :meth:`~durable_core.codecs.Codecs.register_json` class without an
    extra base64 layer. Subclasses set ``type``, ``id``, ``version`` and ``json_kinds`` and
    implement :meth:`to_json` / :meth:`from_json`; raise ``ValueError``/``TypeError`` (or
    :class:`~durable_core.errors.CodecError`) with a clear message on bad input.

    Attributes:
        type: the Python type served.
        id: the codec id, by convention ``json:<name>`` (``json:myapp.Money``).
        version: the version of the encoding contract (``"1"``); change it when the JSON form
            changes.
        json_kinds: the JSON kinds ``to_json`` may produce (``"boolean"``, ``"integer"``,
            ``"float"``, ``"string"``, ``"null"``, ``"array"``, ``"object"``); a union of codecs
            is only possible when their kinds do not overlap.
    """

    type: Any
    id: str
    version: str
    json_kinds: frozenset[str] = ALL_KINDS

    def accepts(self, value: Any) -> bool:
        """True when ``value`` is of the exact type this codec serves."""
        return type(value) is self.type

    def to_json(self, value: Any) -> Any:
        """Return the JSON form of ``value`` (dicts, lists, str, int, float, bool, None)."""
        raise NotImplementedError

    def from_json(self, obj: Any) -> Any:
        """Rebuild a value from its parsed JSON form; refuse anything unexpected."""
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        """Canonical JSON bytes of ``value`` (C-1).

        Raises:
            CodecError: the value does not fit the codec's type or cannot be written as JSON;
                the message names the codec and the path inside the value.
        """
        try:
            return dumps_canonical(to_json_checked(self, value))
        except PathProblem as problem:
            raise codec_error(self, "encode", problem) from None

    def decode(self, data: bytes) -> Any:
        """Rebuild a value from bytes written by :meth:`encode` (C-1, C-4).

        Raises:
            CodecError: invalid UTF-8 or JSON, trailing content, a wrong JSON kind, an unknown
                field …; the message names the codec and the path inside the value.
        """
        try:
            return from_json_checked(self, loads_strict(data))
        except PathProblem as problem:
            raise codec_error(self, "decode", problem) from None

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"<{name} {self.id} version {self.version} for {type_name(self.type)}>"


def codec_error(codec: Any, action: str, problem: PathProblem) -> CodecError:
    """The CodecError of a problem met while encoding/decoding with ``codec``."""
    return CodecError(
        f"cannot {action} a value of type {type_name(codec.type)} with codec {codec.id} "
        f"version {codec.version}: at {format_path(problem.path)}: {problem.problem}"
    )


def to_json_checked(codec: Any, value: Any) -> Any:
    if not codec.accepts(value):
        raise mismatch(codec.type, value)
    try:
        return codec.to_json(value)
    except PathProblem:
        raise
    except Exception as exc:
        raise PathProblem(_exc_text(exc)) from exc


def from_json_checked(codec: Any, obj: Any) -> Any:
    kinds = codec.json_kinds
    if kinds is not ALL_KINDS and json_kind(obj) not in kinds:
        expected = " or ".join(_KIND_TEXT[k] for k in sorted(kinds))
        note = " (the declared type is not Optional)" if obj is None else ""
        raise PathProblem(
            f"expected {expected} for {type_name(codec.type)}, found {describe_json(obj)}{note}"
        )
    try:
        return codec.from_json(obj)
    except PathProblem:
        raise
    except Exception as exc:
        raise PathProblem(_exc_text(exc)) from exc


def child_to_json(codec: Any, value: Any, segment: str) -> Any:
    try:
        return to_json_checked(codec, value)
    except PathProblem as problem:
        raise problem.under(segment) from None


def child_from_json(codec: Any, obj: Any, segment: str) -> Any:
    try:
        return from_json_checked(codec, obj)
    except PathProblem as problem:
        raise problem.under(segment) from None


def _exc_text(exc: BaseException) -> str:
    if isinstance(exc, CodecError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# --- scalars -------------------------------------------------------------------------------


# Scalar codecs offer ``fast_to_json``/``fast_from_json`` for whole sequences: one pass that
# either accepts every item as its own JSON form or returns None, after which the container
# goes item by item to name the exact offender.


def _all_of_type(items: Any, tp: type) -> bool:
    return all(type(v) is tp for v in items)


def _all_text(items: Any) -> bool:
    if not _all_of_type(items, str):
        return False
    try:
        "".join(items).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _all_finite_floats(items: Any) -> bool:
    finite = math.isfinite
    return all(type(v) is float and finite(v) for v in items)


class _BoolCodec(JSONCodec):
    type = bool
    id = "json:bool"
    version = "1"
    json_kinds = frozenset({BOOLEAN})

    @staticmethod
    def fast_items(items: Any) -> bool:
        return _all_of_type(items, bool)

    def to_json(self, value: bool) -> bool:
        return value

    def from_json(self, obj: Any) -> bool:
        return obj


class _IntCodec(JSONCodec):
    type = int
    id = "json:int"
    version = "1"
    json_kinds = frozenset({INTEGER})

    @staticmethod
    def fast_items(items: Any) -> bool:
        return _all_of_type(items, int)

    def to_json(self, value: int) -> int:
        return value

    def from_json(self, obj: Any) -> int:
        return obj


class _FloatCodec(JSONCodec):
    """``float``; an ``int`` (not a ``bool``) is accepted too and stored as ``float(value)``,
    as the engine accepts an int where a float is declared (PEP 484's numeric tower). It
    decodes as a float: a float key never gives back an int."""

    type = float
    id = "json:float"
    version = "1"
    json_kinds = frozenset({FLOAT})

    def accepts(self, value: Any) -> bool:
        return type(value) is float or type(value) is int

    @staticmethod
    def fast_items(items: Any) -> bool:
        return _all_finite_floats(items)

    def to_json(self, value: float) -> float:
        if type(value) is int:
            try:
                return float(value)
            except OverflowError:
                raise PathProblem(
                    f"the int {_short_int(value)} is too large for a float; declare the key "
                    "int, or use a custom codec"
                ) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise PathProblem(
                f"{value!r} cannot be stored as JSON (NaN and ±Infinity are refused); store "
                "None through an Optional key, or use a custom codec"
            )
        return value

    def from_json(self, obj: Any) -> float:
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise PathProblem(
                f"the JSON number overflows to {obj!r}; only finite floats are stored"
            )
        return obj


def _short_int(value: int) -> str:
    text = str(value) if value.bit_length() < 200 else f"of {value.bit_length()} bits"
    return text if len(text) <= 30 else text[:27] + "..."


class _StrCodec(JSONCodec):
    type = str
    id = "json:str"
    version = "1"
    json_kinds = frozenset({STRING})

    @staticmethod
    def fast_items(items: Any) -> bool:
        return _all_text(items)

    def to_json(self, value: str) -> str:
        check_text(value, "the string")
        return value

    def from_json(self, obj: Any) -> str:
        check_text(obj, "the JSON string")
        return obj


class _BytesCodec(JSONCodec):
    """``bytes`` as a standard base64 string (RFC 4648, with padding)."""

    type = bytes
    id = "json:bytes"
    version = "1"
    json_kinds = frozenset({STRING})

    def to_json(self, value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")

    def from_json(self, obj: Any) -> bytes:
        return strict_b64decode(obj)


def strict_b64decode(text: str) -> bytes:
    """Decode standard base64, refusing anything :func:`base64.b64encode` would not write."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as exc:
        raise PathProblem(f"invalid base64 ({exc}) in {describe_json(text)}") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise PathProblem(f"non-canonical base64 in {describe_json(text)}")
    return raw


class _NoneCodec(JSONCodec):
    type = NoneType
    id = "json:none"
    version = "1"
    json_kinds = frozenset({NULL})

    def accepts(self, value: Any) -> bool:
        return value is None

    def to_json(self, value: None) -> None:
        return None

    def from_json(self, obj: Any) -> None:
        return None


def default_json_codecs() -> list[JSONCodec]:
    """Fresh instances of the built-in scalar codecs, in registration order."""
    return [_BoolCodec(), _IntCodec(), _FloatCodec(), _StrCodec(), _BytesCodec(), _NoneCodec()]


# --- containers ------------------------------------------------------------------------------


class _Composite(JSONCodec):
    """A codec built from the codecs of its parts; version "1" plus their pins."""

    _base_version = "1"

    def _finish(self, tp: Any, cid: str, parts: list[Any]) -> None:
        self.type = tp
        self.id = cid
        deps: frozenset[str] = frozenset()
        for part in parts:
            deps |= pins_of(part)
        self._dep_pins = deps
        self.version = compose_version(self._base_version, deps)


class _ListCodec(_Composite):
    json_kinds = frozenset({ARRAY})

    def __init__(self, item: Any) -> None:
        self.item = item
        self._finish(list[item.type], f"json:list[{ref_name(item)}]", [item])

    def accepts(self, value: Any) -> bool:
        return type(value) is list

    def to_json(self, value: list[Any]) -> list[Any]:
        fast = getattr(self.item, "fast_items", None)
        if fast is not None and fast(value):
            return value  # the JSON form of these items is the items themselves
        return [child_to_json(self.item, v, f"[{i}]") for i, v in enumerate(value)]

    def from_json(self, obj: list[Any]) -> list[Any]:
        fast = getattr(self.item, "fast_items", None)
        if fast is not None and fast(obj):
            return obj
        return [child_from_json(self.item, v, f"[{i}]") for i, v in enumerate(obj)]


class _DictCodec(_Composite):
    json_kinds = frozenset({OBJECT})

    def __init__(self, value: Any) -> None:
        self.value = value
        self._finish(dict[str, value.type], f"json:dict[str,{ref_name(value)}]", [value])

    def accepts(self, value: Any) -> bool:
        return type(value) is dict

    def to_json(self, value: dict[Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in value.items():
            if type(k) is not str:
                raise mismatch(str, k).under(f"[{k!r}] (key)")
            try:
                check_text(k, "the key")
            except PathProblem as problem:
                raise problem.under(f"[{k!r}] (key)") from None
            out[k] = child_to_json(self.value, v, f"[{k!r}]")
        return out

    def from_json(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            try:
                check_text(k, "the key")
            except PathProblem as problem:
                raise problem.under(f"[{k!r}] (key)") from None
            out[k] = child_from_json(self.value, v, f"[{k!r}]")
        return out


class _TupleCodec(_Composite):
    json_kinds = frozenset({ARRAY})

    def __init__(self, items: list[Any], variadic: bool) -> None:
        self.items = items
        self.variadic = variadic
        if variadic:
            tp: Any = tuple[items[0].type, ...]
            cid = f"json:tuple[{ref_name(items[0])},...]"
        elif items:
            tp = tuple[tuple(i.type for i in items)]
            cid = f"json:tuple[{','.join(ref_name(i) for i in items)}]"
        else:
            tp = tuple[()]
            cid = "json:tuple[()]"
        self._finish(tp, cid, items)

    def accepts(self, value: Any) -> bool:
        return type(value) is tuple

    def _pairs(self, seq: Any, what: str) -> list[tuple[Any, Any]]:
        if self.variadic:
            return [(self.items[0], v) for v in seq]
        if len(seq) != len(self.items):
            raise PathProblem(
                f"expected {len(self.items)} items for {type_name(self.type)}, found {what} of "
                f"{len(seq)} items"
            )
        return list(zip(self.items, seq, strict=True))

    def to_json(self, value: tuple[Any, ...]) -> list[Any]:
        return [
            child_to_json(c, v, f"[{i}]") for i, (c, v) in enumerate(self._pairs(value, "a tuple"))
        ]

    def from_json(self, obj: list[Any]) -> tuple[Any, ...]:
        return tuple(
            child_from_json(c, v, f"[{i}]")
            for i, (c, v) in enumerate(self._pairs(obj, "a JSON array"))
        )


class _OptionalCodec(_Composite):
    def __init__(self, inner: Any) -> None:
        if NULL in inner.json_kinds:
            raise ResolveProblem(
                f"{type_name(inner.type)} | None cannot be told apart from None in JSON (codec "
                f"{inner.id} may write null): a custom codec is needed"
            )
        self.inner = inner
        self.json_kinds = inner.json_kinds | {NULL}
        self._finish(
            typing.Optional[inner.type],  # noqa: UP045 - built from a runtime type
            f"json:optional[{ref_name(inner)}]",
            [inner],
        )

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)

    def to_json(self, value: Any) -> Any:
        return None if value is None else to_json_checked(self.inner, value)

    def from_json(self, obj: Any) -> Any:
        return None if obj is None else from_json_checked(self.inner, obj)


class _UnionCodec(_Composite):
    def __init__(self, members: list[Any]) -> None:
        members = sorted(members, key=ref_name)
        seen: dict[str, Any] = {}
        for m in members:
            for kind in m.json_kinds:
                if kind in seen:
                    other = seen[kind]
                    advice = (
                        "a union of classes cannot be told apart in JSON (no type tag is written)"
                        if kind == OBJECT
                        else "their JSON forms overlap"
                    )
                    raise ResolveProblem(
                        f"the union {' | '.join(type_name(x.type) for x in members)} is "
                        f"ambiguous: {type_name(other.type)} and {type_name(m.type)} both "
                        f"write {_KIND_TEXT[kind]}; {advice}: a custom codec is needed"
                    )
                seen[kind] = m
        self.members = members
        # An int is also accepted by the float codec: try members that take a value as
        # itself first, so an int in an ``int | float`` key stays an int.
        self._encode_order = sorted(members, key=lambda m: isinstance(m, _FloatCodec))
        self.json_kinds = frozenset(seen)
        self._by_kind = seen
        self._finish(
            typing.Union[tuple(m.type for m in members)],  # noqa: UP007
            f"json:union[{','.join(ref_name(m) for m in members)}]",
            members,
        )

    def accepts(self, value: Any) -> bool:
        return any(m.accepts(value) for m in self.members)

    def to_json(self, value: Any) -> Any:
        for m in self._encode_order:
            if m.accepts(value):
                return to_json_checked(m, value)
        raise mismatch(self.type, value)

    def from_json(self, obj: Any) -> Any:
        return from_json_checked(self._by_kind[json_kind(obj)], obj)


class EmbeddedCodec(JSONCodec):
    """A non-JSON codec inside a JSON value: its bytes as a base64 string."""

    json_kinds = frozenset({STRING})

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.type = codec.type
        self.id = codec.id
        self.version = codec.version

    def accepts(self, value: Any) -> bool:
        if isinstance(self.type, type):
            return type(value) is self.type
        try:
            check_instance(value, self.type)
        except InstanceMismatch:
            return False
        return True

    def to_json(self, value: Any) -> str:
        data = self.codec.encode(value)
        if not isinstance(data, bytes):
            raise PathProblem(f"codec {self.id} returned {type_name(type(data))}, not bytes")
        return base64.b64encode(data).decode("ascii")

    def from_json(self, obj: str) -> Any:
        return self.codec.decode(strict_b64decode(obj))


# --- classes (attrs, dataclasses, enums) -----------------------------------------------------


def make_converter() -> cattrs.Converter:
    """The private cattrs converter class codecs are generated with.

    Every field gets its own hooks (the field codec), so the converter only contributes the
    generated dict <-> class functions; ``forbid_extra_keys`` refuses unknown fields (C-4), and
    without detailed validation our own path-carrying problems pass through unchanged.
    """
    return cattrs.Converter(detailed_validation=False, forbid_extra_keys=True)


class ClassCodec(JSONCodec):
    """An attrs class or dataclass as a JSON object of its ``__init__`` fields (C-4)."""

    json_kinds = frozenset({OBJECT})

    def __init__(self, cls: type, cid: str, version: str) -> None:
        self.type = cls
        self.id = cid
        self._base_version = version
        self._dep_pins: frozenset[str] = frozenset()
        self.version = version
        self.fields: dict[str, Any] = {}

    def finish(self, fields: dict[str, Any], converter: cattrs.Converter) -> None:
        cls = self.type
        self.fields = fields
        overrides = {
            name: override(
                unstruct_hook=_field_unstructure(codec, name),
                struct_hook=_field_structure(codec, name),
            )
            for name, codec in fields.items()
        }
        self._unstructure = make_dict_unstructure_fn(cls, converter, **overrides)
        self._structure = make_dict_structure_fn(
            cls,
            converter,
            _cattrs_forbid_extra_keys=True,
            _cattrs_detailed_validation=False,
            **overrides,
        )
        self._required = frozenset(_required_fields(cls))
        deps: frozenset[str] = frozenset()
        for codec in fields.values():
            if codec is not self:
                deps |= pins_of(codec)
        deps -= {f"{ref_name(self)}@{self._base_version}"}
        self._dep_pins = deps
        self.version = compose_version(self._base_version, deps)

    def to_json(self, value: Any) -> dict[str, Any]:
        return self._unstructure(value)

    def from_json(self, obj: dict[str, Any]) -> Any:
        unknown = sorted(set(obj) - set(self.fields))
        if unknown:
            raise PathProblem(
                f"unknown field(s) {', '.join(map(repr, unknown))} for {type_name(self.type)}; "
                f"its fields are {', '.join(map(repr, self.fields)) or 'none'}"
            )
        missing = sorted(self._required - set(obj))
        if missing:
            raise PathProblem(
                f"missing field(s) {', '.join(map(repr, missing))} for {type_name(self.type)}"
            )
        try:
            return self._structure(obj, self.type)
        except PathProblem:
            raise
        except ForbiddenExtraKeysError as exc:
            raise PathProblem(
                f"unknown field(s) {', '.join(map(repr, sorted(exc.extra_fields)))} for "
                f"{type_name(self.type)}"
            ) from None
        except Exception as exc:
            raise PathProblem(
                f"{type_name(self.type)} refused the decoded fields: {type(exc).__name__}: {exc}"
            ) from exc


def _field_unstructure(codec: Any, name: str) -> Callable[[Any], Any]:
    def hook(value: Any) -> Any:
        return child_to_json(codec, value, f".{name}")

    return hook


def _field_structure(codec: Any, name: str) -> Callable[[Any, Any], Any]:
    def hook(obj: Any, _type: Any) -> Any:
        return child_from_json(codec, obj, f".{name}")

    return hook


def _init_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(name, declared type, required)`` of every field passed to ``__init__``."""
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any, bool]] = []
    if attrs.has(cls):
        for a in attrs.fields(cls):
            if not a.init:
                continue
            tp = hints.get(a.name, a.type)
            out.append((a.name, tp, a.default is attrs.NOTHING))
        return out
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, hints.get(f.name, f.type), required))
    return out


def _required_fields(cls: type) -> list[str]:
    return [name for name, _, required in _init_fields(cls) if required]


class EnumCodec(JSONCodec):
    """An enum as the JSON form of its member's value (values must be str or int)."""

    def __init__(self, cls: type[enum.Enum], cid: str, version: str) -> None:
        self.type = cls
        self.id = cid
        self.version = version
        self._base_version = version
        by_value: dict[tuple[type, Any], enum.Enum] = {}
        kinds: set[str] = set()
        for member in cls:
            value = member.value
            if type(value) not in (str, int):
                raise ResolveProblem(
                    f"enum {type_name(cls)} has the member {member.name} with a value of type "
                    f"{type_name(type(value))}; JSON enums need str or int values: a custom "
                    "codec is needed"
                )
            kinds.add(STRING if type(value) is str else INTEGER)
            by_value[(type(value), value)] = member
        self._by_value = by_value
        self.json_kinds = frozenset(kinds)

    def to_json(self, value: enum.Enum) -> Any:
        return value.value

    def from_json(self, obj: Any) -> Any:
        try:
            return self._by_value[(type(obj), obj)]
        except (KeyError, TypeError):
            values = ", ".join(repr(m.value) for m in self.type)
            raise PathProblem(
                f"{describe_json(obj)} is not a value of {type_name(self.type)} ({values})"
            ) from None


# --- building codecs for type forms --------------------------------------------------------


def is_abstract(tp: type) -> bool:
    """Abstract classes, protocols and the abstract collections of ``collections.abc``."""
    if inspect.isabstract(tp) or getattr(tp, "_is_protocol", False):
        return True
    return isinstance(tp, ABCMeta) and tp.__module__ in ("collections.abc", "numbers", "typing")


def serves_as_class(tp: Any) -> bool:
    """True for the classes :meth:`Codecs.register_json` can serve: attrs, dataclass, enum."""
    return isinstance(tp, type) and (
        attrs.has(tp) or dataclasses.is_dataclass(tp) or issubclass(tp, enum.Enum)
    )


def default_class_id(cls: type) -> str:
    return f"json:{cls.__module__}.{cls.__qualname__}"


class Resolver:
    """Builds JSON codecs for normalised type forms from the registered codecs.

    Args:
        registered: returns the registered codec of a normalised type form, or ``None``.
        converter: the cattrs converter class codecs are generated with.
        serve_classes: also serve attrs classes, dataclasses and enums that have no registered
            codec, as part of the codec being built (``register_json``); ``lookup`` does not.
    """

    def __init__(
        self,
        registered: Callable[[Any], Any],
        converter: cattrs.Converter,
        *,
        serve_classes: bool,
    ) -> None:
        self._registered = registered
        self._converter = converter
        self._serve_classes = serve_classes
        self._classes: dict[type, JSONCodec] = {}

    def component(self, tp: Any) -> Any:
        """A JSON codec for ``tp`` usable inside containers (registered, built or embedded).

        Raises:
            ResolveProblem: no codec can serve ``tp``; the message says why and what to do.
        """
        reg = self._registered(tp)
        if reg is not None:
            return reg if isinstance(reg, JSONCodec) else EmbeddedCodec(reg)
        return self.build(tp)

    def build(self, tp: Any) -> Any:
        """Build a new codec for ``tp`` (a container form, or a class when serving classes)."""
        if tp is typing.Any or tp is object:
            raise ResolveProblem(
                f"{type_name(tp)} says nothing about how to rebuild the value: declare a "
                "concrete type, or a custom codec is needed"
            )
        if tp is NoneType:
            raise ResolveProblem("no codec for None is registered (Codecs.default() has one)")
        if is_union(tp):
            return self._union(tp)
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is list and args:
            return _ListCodec(self.component(args[0]))
        if origin is dict and len(args) == 2:
            if args[0] is not str:
                raise ResolveProblem(
                    f"{type_name(tp)}: JSON object keys are strings; declare dict[str, ...] "
                    "(or a list of pairs), or a custom codec is needed"
                )
            return _DictCodec(self.component(args[1]))
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _TupleCodec([self.component(args[0])], variadic=True)
            return _TupleCodec([self.component(a) for a in args], variadic=False)
        if tp in (set, frozenset) or origin in (set, frozenset):
            raise ResolveProblem(
                f"{type_name(tp)}: sets are not stored as JSON (their order is not defined); "
                "declare list[T] or tuple[T, ...], or a custom codec is needed"
            )
        if tp in (list, dict, tuple):
            raise ResolveProblem(
                f"{type_name(tp)} has no codec: declare the element types, for example "
                "list[int], dict[str, float], tuple[str, ...]"
            )
        if origin is not None:
            raise ResolveProblem(
                f"{type_name(tp)} is abstract or not a type Durable can store; declare list[T], "
                "dict[str, T] or tuple[...], or a custom codec is needed"
            )
        if not isinstance(tp, type):
            raise ResolveProblem(f"{tp!r} is not a type Durable can store")
        if tp in self._classes:
            return self._classes[tp]
        if is_abstract(tp):
            raise ResolveProblem(
                f"{type_name(tp)} is abstract: JSON cannot tell which concrete class to "
                "rebuild; declare a concrete class, or a custom codec is needed"
            )
        if self._serve_classes and serves_as_class(tp):
            return self.build_class(tp, default_class_id(tp), "1")
        if serves_as_class(tp):
            raise ResolveProblem(
                f"no codec is registered for {type_name(tp)}: call "
                f"codecs.register_json({tp.__qualname__}) first (or, when an installed codec "
                "plugin provides it, build the registry with Codecs.from_plugins())"
            )
        raise ResolveProblem(
            f"no codec is registered for {type_name(tp)}: register a custom codec for it "
            "(codecs.register, see docs/codecs.md), install a codec plugin that provides one "
            "and build the registry with Codecs.from_plugins(), or convert the value to a "
            "stored type"
        )

    def _union(self, tp: Any) -> Any:
        members = list(typing.get_args(tp))
        optional = NoneType in members
        rest = [m for m in members if m is not NoneType]
        if len(rest) == 1:
            inner = self.component(rest[0])
        else:
            inner = _UnionCodec([self.component(m) for m in rest])
        return _OptionalCodec(inner) if optional else inner

    def build_class(self, cls: type, cid: str, version: str) -> JSONCodec:
        """The codec of an attrs class, dataclass or enum; nested unregistered classes are
        served as part of it, recursively (a class may refer to itself)."""
        if issubclass(cls, enum.Enum):
            codec: JSONCodec = EnumCodec(cls, cid, version)
            self._classes[cls] = codec
            return codec
        if is_abstract(cls):
            raise ResolveProblem(
                f"{type_name(cls)} is abstract: JSON cannot tell which concrete class to "
                "rebuild; a custom codec is needed"
            )
        class_codec = ClassCodec(cls, cid, version)
        self._classes[cls] = class_codec
        try:
            fields_info = _init_fields(cls)
        except Exception as exc:  # unresolvable forward references
            raise ResolveProblem(
                f"the field types of {type_name(cls)} cannot be resolved ({type(exc).__name__}: "
                f"{exc}); define the classes it refers to at module level"
            ) from exc
        fields: dict[str, Any] = {}
        for name, ftp, _required in fields_info:
            try:
                fields[name] = self.component(normalize(ftp))
            except ResolveProblem as problem:
                raise problem.within(
                    f"field {type_name(cls)}.{name} (type {type_name(normalize(ftp))})"
                ) from None
        class_codec.finish(fields, self._converter)
        return class_codec
