"""The json:int, json:str and json:bool codecs decode their canonical spelling without the JSON
parser; for every byte string they answer exactly what the strict parser answers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import CodecError, Codecs
from durable_core.codecs.jsoncodec import JSONCodec

CODECS = Codecs.default()
SPELLINGS = [
    b"0",
    b"-0",
    b"7",
    b"-12",
    b"012",
    b"+1",
    b"1_000",
    b" 5",
    b"5 ",
    b"1e3",
    b"1.0",
    b"--1",
    b"9" * 4000,
    b"9" * 4400,
    b"true",
    b"false",
    b"null",
    b" true",
    b"True",
    b"",
    b'""',
    b'"abc"',
    b'"a\\"b"',
    b'"\\u00e9"',
    b'"\xc3\xa9"',
    b'"\xff"',
    b'"\xed\xa0\x80"',
    b'"\\ud800"',
    b'"a\nb"',
    b'"a\x7fb"',
    b'"a" ',
    b'"a""b"',
    b'"unterminated',
    b'"',
]


def _answer(decode: Any, data: bytes) -> tuple[str, Any]:
    try:
        return ("value", decode(data))
    except CodecError as exc:
        return ("error", str(exc))


def _check(tp: type, data: bytes) -> None:
    codec = CODECS.lookup(tp)
    plain = _answer(codec.decode, data)
    strict = _answer(lambda d: JSONCodec.decode(codec, d), data)
    assert plain == strict
    if plain[0] == "value":
        assert type(plain[1]) is type(strict[1])


@pytest.mark.parametrize("data", SPELLINGS)
@pytest.mark.parametrize("tp", [int, str, bool])
def test_every_spelling_decodes_as_the_strict_parser_decodes_it(tp: type, data: bytes) -> None:
    # covers: C-1, C-4
    _check(tp, data)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(), st.text(), st.booleans()))
def test_encoded_values_decode_to_themselves(value: Any) -> None:
    # covers: C-1
    codec = CODECS.lookup(type(value))
    data = codec.encode(value)
    assert codec.decode(data) == value
    _check(type(value), data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12))
def test_arbitrary_bytes_get_the_strict_answer(data: bytes) -> None:
    # covers: C-4
    for tp in (int, str, bool):
        _check(tp, data)
