"""The scalar codecs write their own type's canonical JSON directly, and ``encode_value`` takes
a short way for a plain scalar of exactly its declared type. Both give exactly what the general
path gives (bytes, codec id, version, digest), and refuse what it refuses with its message."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import CodecError, Codecs
from durable_core.codecs.jsoncodec import JSONCodec
from durable_core.codecs.scalars import FloatCodec

CODECS = Codecs.default()
SCALARS = (int, str, bool, float, bytes, type(None))

lone = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
texts = st.lists(st.one_of(st.characters(), lone), max_size=12).map("".join)
values = st.one_of(
    st.integers(),
    st.sampled_from([10**4299, 10**4300, -(10**5000), 2**63, -(2**64)]),
    texts,
    st.booleans(),
    st.floats(),
    st.sampled_from([float("nan"), float("inf"), -0.0, 1e308, 5e-324]),
    st.binary(max_size=16),
    st.none(),
)


def _answer(encode: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return ("value", encode(*args, **kwargs))
    except CodecError as exc:
        return ("error", str(exc))  # never another error: a value no codec writes is named


@settings(max_examples=500, deadline=None)
@given(values)
def test_each_scalar_codec_writes_what_the_general_path_writes(value: Any) -> None:
    # covers: C-1, C-4
    for tp in SCALARS:
        codec = CODECS.lookup(tp)
        assert _answer(codec.encode, value) == _answer(JSONCodec.encode, codec, value)


@settings(max_examples=500, deadline=None)
@given(values)
def test_encode_value_of_a_plain_scalar_is_what_the_general_path_gives(value: Any) -> None:
    # covers: R-VAL-1, R-VAL-2, C-1, C-3
    for tp in SCALARS:
        general = typing.Annotated[tp, "spelled otherwise: the general path"]
        for name in ("k", None):
            quick = _answer(CODECS.encode_value, tp, value, name=name)
            assert quick == _answer(CODECS.encode_value, general, value, name=name)


@pytest.mark.parametrize(
    ("tp", "value", "data"),
    [
        (int, 7, b"7"),
        (int, -12, b"-12"),
        (str, 'é "x"\n', b'"\xc3\xa9 \\"x\\"\\n"'),
        (bool, False, b"false"),
        (float, 0.1, b"0.1"),
        (float, 3, b"3.0"),
        (bytes, b"\x00\xff", b'"AP8="'),
        (type(None), None, b"null"),
    ],
)
def test_plain_scalars_are_stored_in_their_one_spelling(tp: type, value: Any, data: bytes) -> None:
    # covers: R-VAL-1, C-1
    encoded = CODECS.encode_value(tp, value, name="k")
    assert encoded.data == data
    assert encoded.codec_id == CODECS.lookup(tp).id


@pytest.mark.parametrize(
    ("tp", "value", "problem"),
    [
        pytest.param(int, 10**5000, "Exceeds the limit", id="int-beyond-the-digit-limit"),
        pytest.param(str, 10**5000, "found int <an int of 16610 bits>", id="huge-int-for-str"),
        pytest.param(str, "lone \ud800", "lone surrogate", id="lone-surrogate"),
        pytest.param(int, True, "a bool is not an int", id="bool-behind-int"),
        pytest.param(float, float("nan"), "NaN and ±Infinity are refused", id="nan"),
    ],
)
def test_what_the_short_way_cannot_write_gets_the_general_answer(
    tp: type, value: Any, problem: str
) -> None:
    # covers: C-1, C-4
    with pytest.raises(CodecError) as caught:
        CODECS.encode_value(tp, value, name="k")
    assert problem in str(caught.value)
    assert "'k'" in str(caught.value)


class _Decimal:
    """A custom codec for int (not a JSON codec): the short way uses the registered codec."""

    type = int
    id = "test:decimal"
    version = "2"

    def encode(self, value: Any) -> bytes:
        return f"D{value}".encode()

    def decode(self, data: bytes) -> Any:
        return int(data[1:])


class _Rounded(FloatCodec):
    """A subclass of the public float codec that changes the JSON form."""

    id = "test:rounded"

    def to_json(self, value: float) -> float:
        return round(super().to_json(value), 1)


def test_a_subclass_of_the_float_codec_keeps_its_own_json_form() -> None:
    # covers: C-1, C-2
    codecs = Codecs()
    codecs.register(_Rounded())
    assert codecs.encode_value(float, 2.345, name="k").data == b"2.3"


def test_a_custom_codec_registered_for_a_scalar_type_is_used() -> None:
    # covers: C-2, R-VAL-1
    codecs = Codecs()
    codecs.register(_Decimal())
    encoded = codecs.encode_value(int, 42, name="k")
    assert (encoded.codec_id, encoded.version, encoded.data) == ("test:decimal", "2", b"D42")
    with pytest.raises(CodecError, match="no codec"):
        codecs.encode_value(str, "x", name="k")  # nothing serves str in this registry
