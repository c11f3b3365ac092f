"""The JSON codec base class and the version rule of composed codecs (SPEC C-1, C-4).

Every JSON codec turns a value into a *JSON form* (``to_json``) and back (``from_json``);
``encode``/``decode`` add the canonical text: sorted keys, no whitespace, ``ensure_ascii=False``,
UTF-8.
"""

from __future__ import annotations

from typing import Any

from durable_core._typeforms import (
    format_path,
    type_name,
)
from durable_core.codecs.canonical import (
    ALL_KINDS,
    KIND_TEXT,
    PathProblem,
    describe_json,
    dumps_canonical,
    json_kind,
    loads_strict,
    mismatch,
)
from durable_core.errors import CodecError

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
        expected = " or ".join(KIND_TEXT[k] for k in sorted(kinds))
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
