"""Registers the numpy array codec with Durable (entry point ``numpy`` of group ``durable``)."""

from __future__ import annotations

from durable_codec_numpy.codec import NdarrayCodec
from durable_core import Codecs, hookimpl


@hookimpl
def durable_register_codecs(codecs: Codecs) -> None:
    """Add :class:`~durable_codec_numpy.codec.NdarrayCodec` (``numpy:ndarray`` version 1)."""
    codecs.register(NdarrayCodec())
