"""Property tests: every built-in codec and every container form round-trips exactly (C-1, C-4,
R-VAL-1…3); equal values give equal bytes, different values give different bytes."""

from __future__ import annotations

import copy
import hashlib
import math
import struct
import typing
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core.codecs import Codecs

CODECS = Codecs.default()

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
keys = st.text(max_size=6)

SCALARS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (bool, st.booleans()),
    (int, st.integers()),
    (int, st.integers(min_value=-(2**200), max_value=2**200)),
    (float, finite_floats),
    (str, st.text(max_size=8)),
    (bytes, st.binary(max_size=8)),
    (type(None), st.none()),
    (int | str, st.integers() | st.text(max_size=8)),
    (bool | float | str, st.booleans() | finite_floats | st.text(max_size=8)),
]


def _extend(children: st.SearchStrategy[tuple[Any, Any]]) -> st.SearchStrategy[tuple[Any, Any]]:
    def optional(c):
        tp, values = c
        return (typing.Optional[tp], st.none() | values)  # noqa: UP045

    def fixed_tuple(cs):
        if not cs:
            return (tuple[()], st.just(()))
        return (tuple[tuple(c[0] for c in cs)], st.tuples(*[c[1] for c in cs]))

    return st.one_of(
        children.map(lambda c: (list[c[0]], st.lists(c[1], max_size=3))),
        children.map(lambda c: (dict[str, c[0]], st.dictionaries(keys, c[1], max_size=3))),
        children.map(lambda c: (tuple[c[0], ...], st.lists(c[1], max_size=3).map(tuple))),
        st.lists(children, max_size=3).map(fixed_tuple),
        children.filter(lambda c: c[0] is not type(None)).map(optional),
    )


forms = st.recursive(st.sampled_from(SCALARS), _extend, max_leaves=4)


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types; floats compared bit for bit (so -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


# covers: C-1, C-2, C-4, R-VAL-1, R-VAL-3
@settings(max_examples=300)
@given(st.data())
def test_every_builtin_form_round_trips_exactly(data):
    declared, values = data.draw(forms)
    value = data.draw(values)
    before = copy.deepcopy(value)
    encoded = CODECS.encode_value(declared, value)
    assert same(value, before)  # encoding does not mutate the value
    assert encoded.codec_id == CODECS.lookup(declared).id
    assert encoded.digest == hashlib.sha256(encoded.data).hexdigest()
    decoded = CODECS.decode_value(declared, *encoded)
    assert same(decoded, value)
    # Equal values encode to equal bytes, whatever object holds them.
    assert CODECS.encode_value(declared, copy.deepcopy(value)) == encoded
    assert CODECS.lookup(declared).encode(value) == encoded.data
    assert same(CODECS.lookup(declared).decode(encoded.data), value)


# covers: C-1, R-VAL-1
@settings(max_examples=300)
@given(st.data())
def test_different_values_of_one_type_encode_to_different_bytes(data):
    declared, values = data.draw(forms)
    a = data.draw(values)
    b = data.draw(values)
    ea = CODECS.encode_value(declared, a)
    eb = CODECS.encode_value(declared, b)
    assert (ea.data == eb.data) == same(a, b)
    assert (ea.digest == eb.digest) == same(a, b)


# covers: C-1
@given(st.dictionaries(keys, st.integers(), min_size=2))
def test_dict_insertion_order_does_not_change_the_bytes(value):
    reordered = dict(reversed(list(value.items())))
    assert CODECS.encode_value(dict[str, int], value) == CODECS.encode_value(
        dict[str, int], reordered
    )


# covers: C-4
@given(finite_floats)
def test_floats_keep_their_exact_bits(value):
    decoded = CODECS.decode_value(float, *CODECS.encode_value(float, value))
    assert struct.pack("<d", decoded) == struct.pack("<d", value)
    assert math.copysign(1.0, decoded) == math.copysign(1.0, value)


# covers: C-1, C-4, R-VAL-3
@given(
    st.one_of(
        st.tuples(st.just(str), st.text(max_size=2000)),
        st.tuples(st.just(bytes), st.binary(max_size=2000)),
        st.tuples(st.just(int), st.integers(min_value=-(10**1000), max_value=10**1000)),
    )
)
def test_long_scalars_round_trip(pair):
    declared, value = pair
    assert same(CODECS.decode_value(declared, *CODECS.encode_value(declared, value)), value)


# covers: C-4
@given(st.text())
def test_strings_are_utf8_without_ascii_escapes(value):
    data = CODECS.encode_value(str, value).data
    data.decode("utf-8")  # valid UTF-8
    if value.isprintable() and '"' not in value and "\\" not in value:
        assert data == f'"{value}"'.encode()
