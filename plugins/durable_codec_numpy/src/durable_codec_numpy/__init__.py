"""Durable codec plugin for numpy arrays (``numpy:ndarray``, version 1).

Installing the distribution ``durable-codec-numpy`` is enough: Durable finds it through its
entry point ``numpy`` (group ``durable``), and ``Codecs.from_plugins()`` serves
``numpy.ndarray`` keys, and containers of them (``list[numpy.ndarray]``,
``numpy.ndarray | None``).
"""

from durable_codec_numpy.codec import NdarrayCodec

__all__ = ["NdarrayCodec"]
