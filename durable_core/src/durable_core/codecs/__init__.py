"""Codecs: business values to bytes and back, with digests (SPEC section C, R-VAL-1…3).

A :class:`Codec` turns values of one Python type into bytes and back. A :class:`Codecs`
registry holds codecs keyed by type; :meth:`Codecs.lookup` also builds codecs for container
forms of registered types (``T | None``, ``list[T]``, ``dict[str, T]``, ``tuple[...]``).

The durable runtime stores every ready output as a ``ValueRecord`` through two calls:

- :meth:`Codecs.encode_value` — ``(key_type, value) -> EncodedValue(codec_id, version, data,
  digest)``: refuses values that can never be persisted (C-3), picks the codec of the value's
  actual type (R-VAL-1), and hashes the bytes (SHA-256 hex).
- :meth:`Codecs.decode_value` — ``(key_type, codec_id, version, data, digest) -> value``: checks
  the digest (a mismatch is :class:`~durable_core.errors.CorruptRecordError`), the codec id and
  version (a change is :class:`~durable_core.errors.CodecError`), decodes, and checks that the
  value is an instance of the declared type (R-VAL-3).

See ``docs/codecs.md`` for the built-in ids, ``register_json``, custom codecs and plugins.
"""

from durable_core.codecs.jsoncodec import JSONCodec
from durable_core.codecs.registry import (
    Codec,
    Codecs,
    EncodedValue,
    digest_of,
    register_builtin_codecs,
)

__all__ = [
    "Codec",
    "Codecs",
    "EncodedValue",
    "JSONCodec",
    "digest_of",
    "register_builtin_codecs",
]
