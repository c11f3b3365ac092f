"""The built-in scalar JSON codecs: bool, int, float, str, bytes (base64) and None (SPEC C-2)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any

from durable_core._typeforms import (
    NoneType,
)
from durable_core.codecs.canonical import (
    BOOLEAN,
    FLOAT,
    INTEGER,
    NULL,
    STRING,
    PathProblem,
    check_text,
    describe_json,
)
from durable_core.codecs.jsoncodec import (
    JSONCodec,
)

# --- scalars -------------------------------------------------------------------------------


# Scalar codecs offer ``fast_to_json``/``fast_from_json`` for whole sequences: one pass that
# either accepts every item as its own JSON form or returns None, after which the container
# goes item by item to name the exact offender.


# Each scalar codec's ``encode`` writes its exact type's canonical JSON directly (what
# ``JSONCodec.encode`` writes: ``json.dumps`` with sorted keys, no whitespace, ensure_ascii off,
# which for these scalars is the C encoder's own spelling) and hands anything else to the
# general path, which names the problem (an int beyond the digit limit, a lone surrogate, NaN).
# Only the class itself does: a subclass may change the JSON form in ``to_json``.
_STR: Any = json.encoder.encode_basestring  # type: ignore[attr-defined]
_FINITE = math.isfinite

# Stored bytes in the one spelling ``encode`` writes, decoded without the JSON parser (a resume
# decodes every stored value). Anything else takes the strict parser, which gives the same
# value for these spellings and names the problem in the others.
_PLAIN_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,3999})")  # within int()'s digit limit
_PLAIN_STR = re.compile(rb'"[^"\\\x00-\x1f]*"')  # no escape, no control character
_CONSTANTS = {b"true": True, b"false": False}


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

    def encode(self, value: Any) -> bytes:
        if type(value) is bool and type(self) is _BoolCodec:
            return b"true" if value else b"false"
        return super().encode(value)

    def to_json(self, value: bool) -> bool:
        return value

    def decode(self, data: bytes) -> Any:
        value = _CONSTANTS.get(data) if type(data) is bytes else None
        return super().decode(data) if value is None else value

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

    def encode(self, value: Any) -> bytes:
        if type(value) is int and type(self) is _IntCodec:
            try:
                return b"%d" % value
            except ValueError:  # more digits than int() may convert: the general path says so
                pass
        return super().encode(value)

    def to_json(self, value: int) -> int:
        return value

    def decode(self, data: bytes) -> Any:
        if type(data) is bytes:
            # A non-negative int without a leading zero (the usual value), without the regex;
            # anything else (a sign, a leading zero, too many digits) is decided by it.
            if data.isdigit() and (data[0] != 48 or len(data) == 1) and len(data) <= 4000:
                return int(data)
            if _PLAIN_INT.fullmatch(data) is not None:
                return int(data)
        return super().decode(data)

    def from_json(self, obj: Any) -> int:
        return obj


class FloatCodec(JSONCodec):
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

    def encode(self, value: Any) -> bytes:
        if type(value) is float and _FINITE(value) and type(self) is FloatCodec:
            return float.__repr__(value).encode("ascii")
        return super().encode(value)

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

    def encode(self, value: Any) -> bytes:
        if type(value) is str and type(self) is _StrCodec:
            try:
                return _STR(value).encode("utf-8")  # type: ignore[no-any-return]
            except UnicodeEncodeError:  # a lone surrogate: the general path names it
                pass
        return super().encode(value)

    def to_json(self, value: str) -> str:
        check_text(value, "the string")
        return value

    def from_json(self, obj: Any) -> str:
        check_text(obj, "the JSON string")
        return obj

    def decode(self, data: bytes) -> Any:
        if type(data) is bytes and _PLAIN_STR.fullmatch(data) is not None:
            try:  # valid UTF-8 never holds a lone surrogate
                return data[1:-1].decode("utf-8")
            except UnicodeDecodeError:
                pass  # the strict parser names the byte
        return super().decode(data)


class _BytesCodec(JSONCodec):
    """``bytes`` as a standard base64 string (RFC 4648, with padding)."""

    type = bytes
    id = "json:bytes"
    version = "1"
    json_kinds = frozenset({STRING})

    def encode(self, value: Any) -> bytes:
        if type(value) is bytes and type(self) is _BytesCodec:
            return b'"' + base64.b64encode(value) + b'"'
        return super().encode(value)

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
    return [_BoolCodec(), _IntCodec(), FloatCodec(), _StrCodec(), _BytesCodec(), _NoneCodec()]
