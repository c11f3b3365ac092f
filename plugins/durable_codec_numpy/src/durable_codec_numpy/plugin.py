"""Registers the numpy array codec with Durable (entry point ``numpy`` of group ``durable``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from durable_core import hookimpl

if TYPE_CHECKING:
    from durable_core import Codecs


@hookimpl
def durable_register_codecs(codecs: Codecs) -> None:
    """Add :class:`~durable_codec_numpy.codec.NdarrayCodec` (``numpy:ndarray`` version 1)."""
    from durable_codec_numpy.codec import NdarrayCodec  # numpy: only once codecs are built

    codecs.register(NdarrayCodec())
