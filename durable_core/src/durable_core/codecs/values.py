"""One value and one codec: the codec contract (:class:`Codec`), a value's stored form
(:class:`EncodedValue`) and its digest (:func:`digest_of`), encoding and decoding a value with
a chosen codec with errors that name the key, and :class:`StoredDecoder` (C-1, R-VAL-1…3).

Which codec serves a value is the registry's question, :class:`~durable_core.codecs.Codecs`
in :mod:`durable_core.codecs.registry`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

from durable_core._digest import sha256_hex
from durable_core._typeforms import (
    InstanceMismatch,
    NoneType,
    check_instance,
    format_path,
    normalize,
    type_name,
)
from durable_core.codecs.jsoncodec import JSONCodec
from durable_core.errors import CodecError

__all__ = ["Codec", "EncodedValue", "StoredDecoder", "digest_of"]


@runtime_checkable
class Codec(Protocol):
    """The codec contract (SPEC C-1; seed 000 "Codec 契约").

    ``encode``/``decode`` are synchronous and thread-safe, never mutate the value, encode equal
    values to equal bytes, and ``decode`` returns an instance of ``type``. Raise
    :class:`~durable_core.errors.CodecError` (or ``ValueError``/``TypeError``) with a message
    naming the problem on bad input. A codec may return zero bytes; the digest of those bytes
    is still stored and checked (R-VAL-2).

    Attributes:
        type: the Python type (or type form, such as ``list[numpy.ndarray]``) served; the
            registry is keyed by it.
        id: a stable, non-empty id without whitespace, stored as ``ValueRecord.TypeID``
            (``json:int``, ``numpy:ndarray``).
        version: the version of the encoding contract, stored as ``ValueRecord.Version``
            (``"1"``); change it whenever the bytes of a value change.
    """

    type: Any
    id: str
    version: str

    def encode(self, value: Any) -> bytes:
        """Encode ``value`` to bytes."""
        ...

    def decode(self, data: bytes) -> Any:
        """Rebuild a value from bytes written by :meth:`encode`."""
        ...


class EncodedValue(NamedTuple):
    """The stored form of a ready value: what goes into a ``ValueRecord`` (R-VAL-1, R-VAL-2)."""

    codec_id: str
    """The codec id (``ValueRecord.TypeID``)."""
    version: str
    """The codec version (``ValueRecord.Version``)."""
    data: bytes
    """The encoded bytes (``ValueRecord.Data``); may be empty."""
    digest: str
    """SHA-256 of ``data``, 64 lowercase hex characters (``ValueRecord.Digest``)."""


def digest_of(data: bytes) -> str:
    """The digest of encoded bytes: SHA-256, 64 lowercase hex characters (R-VAL-1).

    Args:
        data: the encoded bytes (may be empty: the digest of zero bytes is stored too).

    Returns:
        The hex digest.
    """
    return sha256_hex(data)


def _subject(declared: Any, name: str | None) -> str:
    if name is not None:
        return f"the value of key {name!r} (declared type {type_name(declared)})"
    return f"a value of declared type {type_name(declared)}"


class StoredDecoder:
    """Decodes stored bytes with one codec for one declared type (see
    :meth:`Codecs.stored_decoder`); the digest is the caller's to check."""

    __slots__ = ("_codec", "declared", "decode")

    def __init__(self, codec: Any, declared: Any) -> None:
        self._codec = codec
        self.declared = declared
        """The declared type (normalized): a decoded value of exactly this type is checked."""
        self.decode = codec.decode
        """The codec's own ``decode``: no instance check, errors not named (see ``checked``)."""

    def __call__(self, data: bytes, name: str | None = None) -> Any:
        """The decoded value, an instance of the declared type.

        Raises:
            CodecError: as :meth:`Codecs.decode_value`.
        """
        return _decode_checked(self._codec, self.declared, data, name)

    def checked(self, value: Any, name: str | None = None) -> Any:
        """``value`` (what ``decode`` returned) once it is an instance of the declared type.

        Raises:
            CodecError: it is not, as :meth:`__call__` would raise.
        """
        return _check_decoded(self._codec, self.declared, value, name)


def _decode_checked(codec: Any, declared: Any, data: bytes, name: str | None) -> Any:
    try:
        value = codec.decode(data)
    except CodecError as exc:
        if name is None:
            raise
        raise CodecError(f"key {name!r}: {exc}") from exc
    except Exception as exc:
        raise CodecError(
            f"cannot decode {_subject(declared, name)} with codec {codec.id} version "
            f"{codec.version}: {type(exc).__name__}: {exc}"
        ) from exc
    return _check_decoded(codec, declared, value, name)


def _check_decoded(codec: Any, declared: Any, value: Any, name: str | None) -> Any:
    if type(value) is not declared:  # the exact type passes at once (int for int, ...)
        try:
            check_instance(value, declared)
        except InstanceMismatch as exc:
            raise CodecError(
                f"cannot decode {_subject(declared, name)}: codec {codec.id} version "
                f"{codec.version} returned a "
                f"value that is not an instance of the declared type: at "
                f"{format_path(exc.path)}: {exc.problem}; fix the codec"
            ) from None
    return value


_PLAIN_SCALARS = frozenset({int, str, bool, float, bytes, NoneType})
"""Types that :func:`~durable_core._typeforms.normalize` leaves as they are, and whose values
hold nothing that :func:`~durable_core.codecs.persistable.find_unpersistable` refuses."""


def _encode_with(codec: Any, declared: Any, value: Any, name: str | None) -> EncodedValue:
    """Encode ``value`` with ``codec``, the codec of its actual type; errors name the key."""
    try:
        data = codec.encode(value)
    except CodecError as exc:
        if name is None:
            raise
        raise CodecError(f"key {name!r}: {exc}") from exc
    except Exception as exc:
        raise CodecError(
            f"cannot encode {_subject(declared, name)} with codec {codec.id} version "
            f"{codec.version}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(data, bytes):
        raise CodecError(
            f"codec {codec.id} version {codec.version} returned {type_name(type(data))} "
            f"instead of bytes while encoding {_subject(declared, name)}; fix the codec"
        )
    return EncodedValue(codec.id, codec.version, data, digest_of(data))


def _serves(codec: Any, value: Any) -> bool:
    """True when ``codec`` is the codec of ``value``'s actual type."""
    if isinstance(codec, JSONCodec):
        return codec.accepts(value)
    tp = normalize(codec.type)
    if isinstance(tp, type):
        return type(value) is tp
    try:
        check_instance(value, tp)
    except InstanceMismatch:
        return False
    return True


def _class_of(declared: Any) -> type | tuple[type, ...]:
    """The class to test subclass values against (an empty tuple for type forms)."""
    return declared if isinstance(declared, type) else ()
