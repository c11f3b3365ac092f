"""Codecs: encoding business values to bytes, with digests (SPEC section C).

Placeholder of the registry's shape; the full implementation follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Codecs:
    """A registry of codecs keyed by Python type (C-2)."""

    def __init__(self) -> None:
        self._by_type: dict[Any, Any] = {}

    def register(self, codec: Any) -> None:
        self._by_type[codec.type] = codec

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._by_type.values()))


def register_builtin_codecs(codecs: Codecs) -> None:
    """Add the built-in JSON codecs to ``codecs``."""
