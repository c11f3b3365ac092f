"""What the codecs refuse, and that each refusal names the problem (C-3, C-4)."""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import hashlib
import json
import socket
import threading
import typing

import pytest

from durable_core import CodecError
from durable_core.codecs import Codecs
from tests.durable_core.codecs.models import Invoice, Line


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def codecs():
    codecs = Codecs.default()
    codecs.register_json(Line)
    return codecs


def _function():
    return 1


def _generator():
    yield 1


async def _coroutine_function():
    return 1


async def _async_generator():
    yield 1


class _CallableThing:
    def __call__(self):
        return 1


@pytest.fixture
def unpersistable(tmp_path):
    """(kind named in the message, the object) for every kind C-3 lists, and a few more."""
    coroutine = _coroutine_function()
    file = open(tmp_path / "f.txt", "w")  # noqa: SIM115 - closed below
    sock = socket.socket()
    loop = asyncio.new_event_loop()
    items = [
        ("a function", _function),
        ("a function", lambda: 1),
        ("a function", len),
        ("a function", "abc".upper),
        ("a function", Codecs().register),
        ("a class object", int),
        ("a callable object", _CallableThing()),
        ("a generator", _generator()),
        ("a coroutine", coroutine),
        ("an async generator", _async_generator()),
        ("a lock", threading.Lock()),
        ("a lock", threading.RLock()),
        ("a lock", threading.Condition()),
        ("a lock", asyncio.Lock()),
        ("an open file", file),
        ("a socket", sock),
        ("a module", json),
        ("an iterator", iter([1, 2])),
    ]
    yield items
    coroutine.close()
    file.close()
    sock.close()
    loop.close()


# covers: C-3
@pytest.mark.parametrize(
    ("declared", "wrap", "path"),
    [
        (object, lambda x: x, "the top level"),
        (typing.Any, lambda x: x, "the top level"),
        (list[int], lambda x: [1, 2, x], "[2]"),
        (list[object], lambda x: [1, x], "[1]"),
        (dict[str, int], lambda x: {"a": 1, "b": x}, "['b']"),
        (dict[str, int], lambda x: {x: 1}, "(key)"),
        (tuple[int, ...], lambda x: (1, (2, [x])), "[1][1][0]"),
        (int | None, lambda x: x, "the top level"),
        (Line, lambda x: Line("n", x), "qty"),
        (list[Line], lambda x: [Line("n", 1), Line("m", 1, x)], "[1].price"),
    ],
)
def test_unpersistable_values_are_refused_at_any_depth(codecs, unpersistable, declared, wrap, path):
    for kind, obj in unpersistable:
        with pytest.raises(CodecError) as info:
            codecs.encode_value(declared, wrap(obj), name="k")
        message = str(info.value)
        assert f"{kind} (" in message, message
        assert "cannot be persisted" in message
        assert path in message, message
        assert "key 'k'" in message


class _Countdown:
    """A plain class; later registered as an iterator to change what it is."""

    def __init__(self) -> None:
        self.left = 2


class _Proxy:
    """Stands in for another object: ``__class__`` answers the wrapped object's class."""

    def __init__(self, wrapped: object) -> None:
        object.__setattr__(self, "_wrapped", wrapped)

    @property  # type: ignore[misc]
    def __class__(self):
        return type(object.__getattribute__(self, "_wrapped"))


# covers: C-3
def test_what_a_type_is_found_to_be_follows_later_abc_registrations():
    # The walk remembers per type what it found; registering the type with an ABC afterwards
    # must still be seen.
    from durable_core.codecs.persistable import find_unpersistable

    assert find_unpersistable([_Countdown()]) is None
    collections.abc.Iterator.register(_Countdown)
    found = find_unpersistable([_Countdown()])
    assert found is not None
    assert found.kind == "an iterator"
    assert found.path == ("[0]",)


# covers: C-3
def test_a_proxy_is_judged_by_what_it_stands_for_not_by_its_type():
    from durable_core.codecs.persistable import find_unpersistable

    for _ in range(2):  # each call could answer from what the one before remembered
        found = find_unpersistable([_Proxy(threading.Lock())])
        assert found is not None
        assert found.kind == "a lock"
        assert find_unpersistable([_Proxy(object())]) is None


# covers: C-3
def test_a_reference_cycle_is_refused(codecs):
    cyclic: list[object] = [1]
    cyclic.append(cyclic)
    with pytest.raises(CodecError, match=r"at \[1\]: a reference cycle"):
        codecs.encode_value(list[object], cyclic)
    shared = [1, 2]
    assert codecs.encode_value(list[list[int]], [shared, shared]).data == b"[[1,2],[1,2]]"


# covers: C-4
@pytest.mark.parametrize(
    ("declared", "value", "path"),
    [
        (str, "a\ud800b", "the top level"),
        (str, "\udfff", "the top level"),
        (list[str], ["ok", "x\udc80"], "[1]"),
        (dict[str, int], {"k\ud800": 1}, "(key)"),
        (Line, Line("\ud83d", 1), "name"),
        (object, "\ud800", "the top level"),
    ],
)
def test_strings_with_lone_surrogates_are_refused(codecs, declared, value, path):
    with pytest.raises(CodecError, match=r"lone surrogate U\+D[89A-F][0-9A-F]{2}") as info:
        codecs.encode_value(declared, value)
    assert path in str(info.value)
    assert "store arbitrary data as bytes" in str(info.value)


# covers: C-4
def test_valid_unicode_including_astral_characters_is_kept(codecs):
    value = "é 漢字 😀 \u2028 \x00"
    encoded = codecs.encode_value(str, value)
    assert encoded.data == json.dumps(value, ensure_ascii=False).encode("utf-8")
    assert codecs.decode_value(str, *encoded) == value


# covers: C-4
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize(
    ("declared", "wrap", "path"),
    [
        (float, lambda x: x, "the top level"),
        (float | None, lambda x: x, "the top level"),
        (list[float], lambda x: [1.0, x], "[1]"),
        (dict[str, tuple[float, ...]], lambda x: {"a": (0.5, x)}, "['a'][1]"),
        (Line, lambda x: Line("n", 1, x), "price"),
        (object, lambda x: x, "the top level"),
    ],
)
def test_nan_and_infinity_are_refused(codecs, bad, declared, wrap, path):
    with pytest.raises(CodecError, match="NaN and ±Infinity are refused") as info:
        codecs.encode_value(declared, wrap(bad))
    assert path in str(info.value)
    assert repr(bad) in str(info.value)


def _decode(codecs, declared, data):
    codec = codecs.lookup(declared)
    return codecs.decode_value(declared, codec.id, codec.version, data, sha(data))


# covers: C-4
@pytest.mark.parametrize(
    ("declared", "data", "problem"),
    [
        (int, b"1 2", "trailing content"),
        (int, b"1x", "trailing content"),
        (list[int], b"[1][2]", "trailing content"),
        (dict[str, int], b'{"a":1}{}', "trailing content"),
        (str, b'"\xff"', "not valid UTF-8"),
        (str, b'"\xc3"', "not valid UTF-8"),
        (str, b'"\xed\xa0\x80"', "not valid UTF-8"),  # an encoded surrogate
        (str, b'"\\ud800"', "lone surrogate U\\+D800"),
        (dict[str, int], b'{"\\udc00":1}', "lone surrogate U\\+DC00"),
        (float, b"NaN", "NaN is not a JSON number"),
        (float, b"Infinity", "Infinity is not a JSON number"),
        (float, b"-Infinity", "-Infinity is not a JSON number"),
        (float, b"1e999", "overflows to inf"),
        (list[float], b"[1.0,NaN]", "NaN is not a JSON number"),
        (int, b"", "invalid JSON"),
        (int, b"\xef\xbb\xbf1", "invalid JSON"),  # a byte order mark
        (dict[str, int], b'{"a":1,"a":2}', "the key 'a' twice"),
        (bytes, b'"AAE"', "invalid base64"),
        (bytes, b'"AAF="', "non-canonical base64"),
        (bytes, b'"A A="', "invalid base64"),
    ],
)
def test_decoding_refuses_malformed_bytes(codecs, declared, data, problem):
    with pytest.raises(CodecError, match=problem):
        _decode(codecs, declared, data)


# covers: C-4
@pytest.mark.parametrize(
    ("declared", "data", "problem"),
    [
        (int, b"null", "expected a JSON integer for int, found null .the declared type is not Opt"),
        (str, b"null", "found null"),
        (bool, b"null", "found null"),
        (list[int], b"null", "expected a JSON array for list.int., found null"),
        (list[int], b"[1,null]", r"at \[1\]: expected a JSON integer for int, found null"),
        (dict[str, float], b'{"a":null}', r"at \['a'\]: .*found null"),
        (Line, b'{"name":null,"qty":1,"price":null}', "at name: .*found null"),
    ],
)
def test_null_is_refused_for_types_that_are_not_optional(codecs, declared, data, problem):
    with pytest.raises(CodecError, match=problem):
        _decode(codecs, declared, data)


# covers: C-4
def test_null_is_none_for_optional_types(codecs):
    assert _decode(codecs, int | None, b"null") is None
    assert _decode(codecs, list[int | None], b"[1,null]") == [1, None]
    assert _decode(codecs, Line, b'{"name":"a","price":null,"qty":1}') == Line("a", 1, None)


# covers: C-4
@pytest.mark.parametrize(
    ("declared", "data", "problem"),
    [
        (int, b"true", "expected a JSON integer for int, found true"),
        (int, b"1.0", "expected a JSON integer for int, found the JSON number 1.0"),
        (int, b'"1"', "found the JSON string '1'"),
        (float, b"1", "expected a JSON number with a fraction or exponent for float"),
        (bool, b"1", "expected a JSON boolean for bool, found the JSON number 1"),
        (bool, b'"true"', "expected a JSON boolean"),
        (str, b"1", "expected a JSON string for str"),
        (bytes, b"[1]", "expected a JSON string for bytes"),
        (list[int], b'{"a":1}', "expected a JSON array"),
        (list[int], b"[true]", r"at \[0\]: expected a JSON integer for int, found true"),
        (dict[str, int], b"[]", "expected a JSON object"),
        (tuple[int, str], b"[1]", "expected 2 items for tuple.int, str., found a JSON array of 1"),
        (tuple[int, str], b'[1,"a",2]', "expected 2 items"),
        (tuple[int, str], b'["a",1]', r"at \[0\]: expected a JSON integer"),
        (int | str, b"true", "expected a JSON integer or a JSON string for int | str"),
        (Line, b"[]", "expected a JSON object for tests.durable_core.codecs.models.Line"),
        (Line, b'{"name":"a","qty":true}', "at qty: expected a JSON integer for int, found true"),
    ],
)
def test_decoding_refuses_wrong_json_types(codecs, declared, data, problem):
    with pytest.raises(CodecError, match=problem):
        _decode(codecs, declared, data)


# covers: C-4
def test_decoding_refuses_unknown_fields_and_names_them(codecs):
    data = b'{"name":"a","qty":1,"colour":"red"}'
    with pytest.raises(
        CodecError, match=r"unknown field.*'colour' for tests.durable_core.codecs.models.Line"
    ):
        _decode(codecs, Line, data)
    nested = b'[{"name":"a","qty":1},{"name":"b","qty":2,"x":0}]'
    with pytest.raises(CodecError, match=r"at \[1\]: unknown field\(s\) 'x'"):
        _decode(codecs, list[Line], nested)


# covers: C-4
def test_decoding_refuses_missing_required_fields(codecs):
    with pytest.raises(
        CodecError, match=r"missing field.*'qty' for tests.durable_core.codecs.models.Line"
    ):
        _decode(codecs, Line, b'{"name":"a"}')
    # a field with a default may be absent
    assert _decode(codecs, Line, b'{"name":"a","qty":1}') == Line("a", 1)


# covers: C-4
def test_errors_name_type_codec_id_version_and_path(codecs):
    codecs.register_json(Invoice)
    data = (
        b'{"color":"red","lines":[{"name":"a","qty":1},{"name":"b","qty":"2"}],'
        b'"number":1,"tags":{}}'
    )
    with pytest.raises(CodecError) as info:
        codecs.decode_value(
            Invoice,
            "json:tests.durable_core.codecs.models.Invoice",
            "1",
            data,
            sha(data),
            name="invoice",
        )
    message = str(info.value)
    assert "key 'invoice'" in message
    assert "tests.durable_core.codecs.models.Invoice" in message
    assert "json:tests.durable_core.codecs.models.Invoice version 1" in message
    assert "at lines[1].qty: expected a JSON integer for int, found the JSON string '2'" in message


@dataclasses.dataclass
class _Note:
    text: str
    extra: list[int] = dataclasses.field(default_factory=list)


# covers: C-1, C-3
def test_a_value_of_exactly_its_declared_class_is_encoded_as_any_other_and_walked_each_time(
    codecs, unpersistable
):
    codecs.register_json(_Note)
    line = Line("n", 2)
    # The same codec, bytes and digest as the value reaches behind a broader declared type.
    exact = codecs.encode_value(Line, line, name="k")
    assert exact == codecs.encode_value(object, line, name="k")
    assert exact.codec_id == codecs.lookup(Line).id
    assert exact.digest == hashlib.sha256(exact.data).hexdigest()
    # Met again after a clean value of the same class, an unpersistable part is still found:
    # what is remembered of a class is its fields, never that its values were clean.
    codecs.encode_value(_Note, _Note("fine"), name="k")
    for kind, obj in unpersistable:
        for declared, value, path in (
            (_Note, _Note("x", [1, obj]), "at extra[1]:"),
            (Line, Line("n", obj), "at qty:"),
        ):
            with pytest.raises(CodecError) as info:
                codecs.encode_value(declared, value, name="k")
            message = str(info.value)
            assert f"{kind} (" in message and path in message and "key 'k'" in message, message
