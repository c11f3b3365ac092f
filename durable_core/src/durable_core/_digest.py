"""SHA-256 digests of the bytes Durable stores, by the faster implementation for their size."""

from __future__ import annotations

import hashlib

__all__ = ["SHORT_INPUT", "sha256_hex", "short_sha256"]

try:  # CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before); a build may lack it
    from _sha2 import sha256 as short_sha256  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the interpreter
    try:
        from _sha256 import sha256 as short_sha256  # type: ignore[import-not-found,no-redef]
    except ImportError:
        short_sha256 = hashlib.sha256

SHORT_INPUT = 512
"""Inputs shorter than this (bytes) are digested by CPython's own SHA-256 (``short_sha256``),
longer ones by OpenSSL's (``hashlib.sha256``). Most stored values and stream elements are tens
of bytes, where setting up an OpenSSL digest costs more than the digest itself: on a run's hot
path the builtin one answers in about half the time. Past a few hundred bytes OpenSSL's (with
the processor's SHA instructions) is the faster. Both give the same digest."""


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as 64 lowercase hex characters (see :data:`SHORT_INPUT`)."""
    if len(data) < SHORT_INPUT:
        return short_sha256(data).hexdigest()
    return hashlib.sha256(data).hexdigest()
