"""The numpy codec plugin: found through its entry point, exact round trips (C-1, C-2)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from durable_codec_numpy import NdarrayCodec
from durable_core import CodecError, make_plugin_manager
from durable_core.codecs import Codecs


@pytest.fixture(scope="module")
def codecs():
    return Codecs.from_plugins(make_plugin_manager())


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Same class, dtype (with byte order), shape and element bytes."""
    return (
        type(a) is type(b)
        and a.dtype == b.dtype
        and a.dtype.str == b.dtype.str
        and a.shape == b.shape
        and a.tobytes() == b.tobytes()
    )


# covers: C-2
def test_the_plugin_is_found_through_its_entry_point():
    pm = make_plugin_manager()
    assert pm.has_plugin("numpy")
    assert pm.source("numpy")[0] == "durable-codec-numpy"
    codecs = Codecs.from_plugins(pm)
    codec = codecs.lookup(np.ndarray)
    assert isinstance(codec, NdarrayCodec)
    assert (codec.id, codec.version) == ("numpy:ndarray", "1")
    info = {i.name: i for i in pm.describe()}["numpy"]
    assert info.distribution == "durable-codec-numpy"
    assert info.codecs == ("numpy:ndarray@1",)


# covers: C-2
def test_blocking_the_plugin_removes_the_codec():
    codecs = Codecs.from_plugins(make_plugin_manager(block=["numpy"]))
    assert np.ndarray not in codecs
    with pytest.raises(CodecError, match=r"no codec is registered for numpy.ndarray"):
        codecs.lookup(np.ndarray)


dtypes = st.one_of(
    hnp.scalar_dtypes(),
    hnp.byte_string_dtypes(endianness="="),
    hnp.unicode_string_dtypes(endianness="<"),
    hnp.unicode_string_dtypes(endianness=">"),
    hnp.integer_dtypes(endianness=">"),
    hnp.floating_dtypes(endianness=">"),
    hnp.array_dtypes(max_size=3),
)
arrays = hnp.arrays(dtype=dtypes, shape=hnp.array_shapes(min_dims=0, min_side=0, max_side=4))


# covers: C-1, R-VAL-1, R-VAL-3
@settings(max_examples=200, deadline=None)
@given(arrays)
def test_arrays_round_trip_exactly(codecs, array):
    before = array.copy()
    encoded = codecs.encode_value(np.ndarray, array)
    assert same_array(array, before)  # not mutated
    assert encoded.codec_id == "numpy:ndarray"
    assert encoded.digest == hashlib.sha256(encoded.data).hexdigest()
    decoded = codecs.decode_value(np.ndarray, *encoded)
    assert same_array(decoded, array)
    assert decoded.flags.writeable and decoded.flags.c_contiguous
    assert codecs.encode_value(np.ndarray, array.copy()) == encoded


# covers: C-1
@settings(max_examples=100, deadline=None)
@given(hnp.arrays(dtype=hnp.scalar_dtypes(), shape=hnp.array_shapes(min_dims=2, min_side=1)))
def test_layout_does_not_change_the_bytes(codecs, array):
    fortran = np.asfortranarray(array)
    strided = np.repeat(array, 2, axis=0)[::2]
    assert not strided.flags.c_contiguous or strided.shape[0] <= 1 or strided.size == 0
    encoded = codecs.encode_value(np.ndarray, array)
    assert codecs.encode_value(np.ndarray, fortran) == encoded
    assert codecs.encode_value(np.ndarray, strided) == encoded


@pytest.mark.parametrize(
    "array",
    [
        np.array(5),
        np.array(2.5, dtype=">f8"),
        np.zeros((0,)),
        np.zeros((3, 0, 2), dtype=np.int16),
        np.arange(12, dtype=">i4").reshape(3, 4).T,
        np.arange(10)[::3],
        np.array([np.nan, -0.0, np.inf]),
        np.array([b"ab", b""], dtype="S2"),
        np.array(["é", "漢字"]),
        np.array(["2024-01-02"], dtype="datetime64[D]"),
        np.zeros(2, dtype=[("a", ">i2"), ("b", "<f4", (2,))]),
        np.array([True, False]),
        np.array([1 + 2j], dtype=np.complex64),
    ],
)
def test_special_arrays_round_trip_exactly(codecs, array):
    decoded = codecs.decode_value(np.ndarray, *codecs.encode_value(np.ndarray, array))
    assert same_array(decoded, np.ascontiguousarray(array) if array.ndim else array)


# covers: C-1
def test_different_arrays_have_different_digests(codecs):
    base = np.arange(6, dtype="<i4").reshape(2, 3)
    variants = [
        base,
        base.reshape(3, 2),
        base.reshape(6),
        base.astype(">i4"),
        base.astype("<i8"),
        np.where(base == 5, 6, base).astype("<i4"),
        np.array(0, dtype="<i4"),
        np.zeros((0,), dtype="<i4"),
    ]
    digests = {codecs.encode_value(np.ndarray, v).digest for v in variants}
    assert len(digests) == len(variants)


# covers: C-3, C-1
@pytest.mark.parametrize(
    "array",
    [
        np.array([1, "a", None], dtype=object),
        np.array([], dtype=object),
        np.zeros(2, dtype=[("a", "i4"), ("b", "O")]),
    ],
)
def test_object_dtype_is_refused(codecs, array):
    with pytest.raises(CodecError, match="numpy:ndarray version 1 cannot encode an array of dtype"):
        codecs.encode_value(np.ndarray, array, name="matrix")


# covers: R-VAL-1
def test_array_subclasses_and_other_types_are_refused(codecs):
    masked = np.ma.masked_array([1, 2], mask=[0, 1])
    with pytest.raises(CodecError, match="MaskedArray"):
        codecs.encode_value(np.ndarray, masked)
    with pytest.raises(CodecError, match=r"expected numpy.ndarray, found list \[1, 2\]"):
        codecs.encode_value(np.ndarray, [1, 2])
    with pytest.raises(CodecError, match=r"encodes numpy.ndarray, found list"):
        NdarrayCodec().encode([1, 2])


# covers: C-4
def test_damaged_npy_bytes_are_refused(codecs):
    data = codecs.encode_value(np.ndarray, np.arange(3)).data
    for bad, problem in [
        (data + b"\x00", "trailing content"),
        (data[:-1], "cannot decode"),
        (b"", "cannot decode"),
        (b"not npy", "cannot decode"),
    ]:
        with pytest.raises(CodecError, match=problem):
            codecs.decode_value(
                np.ndarray, "numpy:ndarray", "1", bad, hashlib.sha256(bad).hexdigest()
            )


def test_arrays_inside_containers_and_classes(codecs):
    value = {"a": [np.arange(3), None], "b": [np.zeros((2, 2), dtype=">f4")]}
    declared = dict[str, list[np.ndarray | None]]
    encoded = codecs.encode_value(declared, value)
    assert encoded.codec_id == "json:dict[str,list[optional[numpy:ndarray]]]"
    decoded = codecs.decode_value(declared, *encoded)
    assert decoded["a"][1] is None
    assert same_array(decoded["a"][0], value["a"][0])
    assert same_array(decoded["b"][0], value["b"][0])
    with pytest.raises(CodecError, match=r"at \['a'\]\[0\]: .*cannot encode an array of dtype"):
        codecs.encode_value(declared, {"a": [np.array([None], dtype=object)]})
