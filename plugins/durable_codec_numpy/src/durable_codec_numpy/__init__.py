"""Durable codec plugin for numpy arrays (``numpy:ndarray``, version 1).

Installing the distribution ``durable-codec-numpy`` is enough: Durable finds it through its
entry point ``numpy`` (group ``durable``), and ``Codecs.from_plugins()`` serves
``numpy.ndarray`` keys, and containers of them (``list[numpy.ndarray]``,
``numpy.ndarray | None``).
"""

from __future__ import annotations

import typing

from durable_core._lazy import bind_lazily

if typing.TYPE_CHECKING:
    from durable_codec_numpy.codec import NdarrayCodec

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "NdarrayCodec": "durable_codec_numpy.codec",
}

__all__ = [
    "NdarrayCodec",
]

__getattr__, __dir__ = bind_lazily(__name__, _EXPORTS, __all__)
