"""The numpy array codec: dtype, shape and bytes in the ``.npy`` format, exact round trip."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from numpy.lib import format as npy

from durable_core import CodecError

__all__ = ["NdarrayCodec"]


def _class_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class NdarrayCodec:
    """Encodes ``numpy.ndarray`` values as ``.npy`` bytes (format 1.0, or 3.0 when the header
    needs UTF-8 or more than 64 KiB): the dtype with its byte order, the shape, and the raw element
    bytes in C order. Decoding returns a writable, C-contiguous array with the same dtype,
    shape and element bytes — NaN payloads, ``-0.0``, big-endian dtypes, 0-d and empty arrays
    included (SPEC C-1).

    Equal arrays (same dtype, shape and element bytes) encode to equal bytes whatever their
    memory layout: Fortran-ordered and non-contiguous views are written in C order.

    Arrays of object dtype (or structured dtypes holding objects) are refused: they hold
    arbitrary Python objects, which would need pickle. Subclasses of ``ndarray`` (masked
    arrays, matrices) are not served: the runtime looks for a codec of their own class.

    Attributes:
        type: ``numpy.ndarray``.
        id: ``"numpy:ndarray"``.
        version: ``"1"``.
    """

    type = np.ndarray
    id = "numpy:ndarray"
    version = "1"

    def encode(self, value: Any) -> bytes:
        """Encode an array.

        Args:
            value: a ``numpy.ndarray`` (exactly that class); it is not modified.

        Returns:
            The ``.npy`` bytes.

        Raises:
            CodecError: the value is not an ndarray, or its dtype holds Python objects.
        """
        if type(value) is not np.ndarray:
            raise CodecError(
                f"codec {self.id} version {self.version} encodes numpy.ndarray, found "
                f"{_class_name(type(value))}"
            )
        dtype = value.dtype
        if dtype.hasobject:
            raise CodecError(
                f"codec {self.id} version {self.version} cannot encode an array of dtype "
                f"{dtype!r}: it holds Python objects, which cannot be stored as array bytes; "
                "convert it to a numeric, string or bytes dtype, or store a list of values"
            )
        if npy.descr_to_dtype(npy.dtype_to_descr(dtype)) != dtype:
            raise CodecError(
                f"codec {self.id} version {self.version} cannot encode the dtype {dtype!r} "
                "exactly (the .npy header cannot describe it); use a simpler dtype"
            )
        array = value if value.flags.c_contiguous else value.copy(order="C")
        # Format 1.0 whenever its header can describe the array (latin-1, < 64 KiB); 3.0
        # (UTF-8 header) otherwise. Chosen explicitly: numpy's own guess warns on every 3.0.
        for version in ((1, 0), (3, 0)):
            out = io.BytesIO()
            try:
                npy.write_array(out, array, version=version, allow_pickle=False)
            except ValueError:
                continue
            return out.getvalue()
        raise CodecError(
            f"codec {self.id} version {self.version} cannot write a .npy header for dtype "
            f"{dtype!r} and shape {value.shape}"
        )

    def decode(self, data: bytes) -> np.ndarray:
        """Decode bytes written by :meth:`encode`.

        Raises:
            CodecError: the bytes are not a complete ``.npy`` array, hold an object dtype, or
                have trailing content.
        """
        stream = io.BytesIO(bytes(data))
        try:
            array = npy.read_array(stream, allow_pickle=False)
        except Exception as exc:
            raise CodecError(
                f"codec {self.id} version {self.version} cannot decode {len(data)} bytes as "
                f"a .npy array: {type(exc).__name__}: {exc}"
            ) from exc
        rest = stream.read()
        if rest:
            raise CodecError(
                f"codec {self.id} version {self.version} found {len(rest)} bytes of trailing "
                "content after the array"
            )
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = array.copy(order="C")
        return array
