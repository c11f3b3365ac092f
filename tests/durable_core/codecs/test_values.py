"""encode_value / decode_value: codec ids, digests, and the checks made on resume
(R-VAL-1, R-VAL-2, R-VAL-3)."""

from __future__ import annotations

import hashlib
import typing

import pytest

from durable_core import CodecError, CorruptRecordError, EncodedValue
from durable_core.codecs import Codecs, digest_of
from tests.durable_core.codecs.models import Animal, Cat, Dog, Line


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def codecs():
    return Codecs.default()


# covers: R-VAL-1
def test_encode_value_returns_codec_id_version_data_and_sha256_digest(codecs):
    encoded = codecs.encode_value(list[int], [3, 1, 2])
    assert isinstance(encoded, EncodedValue)
    codec_id, version, data, digest = encoded
    assert (codec_id, version, data) == ("json:list[int]", "1", b"[3,1,2]")
    assert digest == sha(b"[3,1,2]") == digest_of(data)
    assert codecs.decode_value(list[int], codec_id, version, data, digest) == [3, 1, 2]


# covers: R-VAL-1, C-1
def test_digests_differ_for_one_in_every_type(codecs):
    values = [(int, 1), (str, "1"), (bool, True), (float, 1.0), (bytes, b"1"), (type(None), None)]
    own = [codecs.encode_value(tp, v) for tp, v in values]
    behind_object = [codecs.encode_value(object, v) for _, v in values]
    assert len({e.digest for e in own}) == len(values)
    assert len({e.codec_id for e in own}) == len(values)
    assert own == behind_object  # the actual type's codec, whatever is declared
    for (tp, v), e in zip(values, own, strict=True):
        decoded = codecs.decode_value(tp, *e)
        assert decoded == v and type(decoded) is type(v)
        assert type(codecs.decode_value(object, *e)) is type(v)


# covers: R-VAL-1, C-1
@pytest.mark.parametrize(
    ("declared", "a", "b"),
    [
        (dict[str, list[dict[str, int]]], {"a": [{"b": 2}]}, {"a": [{"b": 3}]}),
        (dict[str, list[dict[str, int]]], {"a": [{"b": 2}]}, {"a": [{"c": 2}]}),
        (list[list[list[str | None]]], [[["x", None]]], [[[None, "x"]]]),
        (list[list[list[str | None]]], [[["x", None]]], [[["x"], [None]]]),
        (tuple[int, tuple[float, ...]], (1, (0.5, 0.0)), (1, (0.5, -0.0))),
        (list[bytes], [b"\x00" * 100 + b"\x01"], [b"\x00" * 100 + b"\x02"]),
    ],
)
def test_digests_differ_for_values_differing_deep_inside(codecs, declared, a, b):
    ea = codecs.encode_value(declared, a)
    eb = codecs.encode_value(declared, b)
    assert ea.codec_id == eb.codec_id
    assert ea.digest != eb.digest


# covers: R-VAL-2
@pytest.mark.parametrize(
    ("declared", "value", "data"),
    [
        (int | None, None, b"null"),
        (str, "", b'""'),
        (bytes, b"", b'""'),
        (int, 0, b"0"),
        (float, 0.0, b"0.0"),
        (bool, False, b"false"),
        (list[int], [], b"[]"),
        (dict[str, int], {}, b"{}"),
        (tuple[()], (), b"[]"),
        (list[int] | None, [], b"[]"),
    ],
)
def test_zero_and_empty_values_are_ready_and_stay_distinct(codecs, declared, value, data):
    encoded = codecs.encode_value(declared, value)
    assert encoded.data == data
    assert encoded.digest == sha(data)
    decoded = codecs.decode_value(declared, *encoded)
    assert decoded == value and type(decoded) is type(value)


# covers: R-VAL-2
def test_empty_values_of_different_types_keep_their_types(codecs):
    pairs = [
        (int | None, None),
        (str, ""),
        (bytes, b""),
        (int, 0),
        (list[int], []),
        (dict[str, int], {}),
    ]
    encoded = [codecs.encode_value(tp, v) for tp, v in pairs]
    assert len({e.codec_id for e in encoded}) == len(pairs)
    for (tp, v), e in zip(pairs, encoded, strict=True):
        decoded = codecs.decode_value(tp, *e)
        assert type(decoded) is type(v)
    # "" and b"" share their bytes; the codec id tells them apart
    assert encoded[1].data == encoded[2].data
    with pytest.raises(CodecError, match="stored with codec json:bytes"):
        codecs.decode_value(str, *encoded[2])


class Unit:
    """A value with nothing to store: its codec writes zero bytes."""

    def __eq__(self, other):
        return isinstance(other, Unit)


class UnitCodec:
    type = Unit
    id = "test:unit"
    version = "1"

    def encode(self, value):
        return b""

    def decode(self, data):
        if data:
            raise ValueError(f"expected no bytes, found {len(data)}")
        return Unit()


# covers: R-VAL-2, R-VAL-3
def test_a_custom_codec_may_write_zero_bytes_and_their_digest_is_checked(codecs):
    codecs.register(UnitCodec())
    encoded = codecs.encode_value(Unit, Unit())
    assert encoded == ("test:unit", "1", b"", sha(b""))
    assert codecs.decode_value(Unit, *encoded) == Unit()
    with pytest.raises(CorruptRecordError, match=r"has SHA-256 .* but the record says"):
        codecs.decode_value(Unit, "test:unit", "1", b"\x00", encoded.digest)


# covers: R-VAL-3
@pytest.mark.parametrize(
    "digest",
    ["", "abc", sha(b"5").upper(), sha(b"5")[:-1], sha(b"5") + "0", "g" * 64, None, 5],
)
def test_a_malformed_digest_is_a_corrupt_record(codecs, digest):
    with pytest.raises(CorruptRecordError, match="not a SHA-256 hex digest"):
        codecs.decode_value(int, "json:int", "1", b"5", digest)


# covers: R-VAL-3
def test_a_digest_mismatch_is_a_corrupt_record(codecs):
    encoded = codecs.encode_value(dict[str, int], {"a": 1})
    with pytest.raises(CorruptRecordError, match=r"stored data \(7 bytes\) has SHA-256"):
        codecs.decode_value(
            dict[str, int], encoded.codec_id, encoded.version, b'{"a":2}', encoded.digest
        )
    with pytest.raises(CorruptRecordError, match="lost or damaged"):
        codecs.decode_value(dict[str, int], encoded.codec_id, encoded.version, b"", encoded.digest)


# covers: R-VAL-3
@pytest.mark.parametrize(("codec_id", "version"), [("", "1"), ("json:int", "")])
def test_an_empty_codec_id_or_version_is_a_corrupt_record(codecs, codec_id, version):
    with pytest.raises(CorruptRecordError, match="always names its codec"):
        codecs.decode_value(int, codec_id, version, b"5", sha(b"5"))


# covers: R-VAL-3
def test_a_changed_codec_version_is_a_codec_error_saying_the_codec_changed(codecs):
    with pytest.raises(
        CodecError, match=r"stored with codec json:int version 2.*has version 1: the codec changed"
    ):
        codecs.decode_value(int, "json:int", "2", b"5", sha(b"5"))
    with pytest.raises(CodecError, match="the codec changed"):
        codecs.decode_value(list[int], "json:list[int]", "0", b"[5]", sha(b"[5]"))


# covers: R-VAL-3
def test_a_changed_codec_id_is_a_codec_error_saying_the_codec_changed(codecs):
    with pytest.raises(
        CodecError,
        match=r"stored with codec json:list\[str\] version 1, but list\[int\] now uses codec "
        r"json:list\[int\] version 1: the codec changed",
    ):
        codecs.decode_value(list[int], "json:list[str]", "1", b"[]", sha(b"[]"))
    with pytest.raises(CodecError, match="serves str, not the declared type int"):
        codecs.decode_value(int, "json:str", "1", b'"5"', sha(b'"5"'))


# covers: R-VAL-3
def test_an_unknown_codec_id_behind_a_broad_type_names_what_to_install(codecs):
    with pytest.raises(CodecError, match=r"no registered codec has that id.*install or register"):
        codecs.decode_value(object, "numpy:ndarray", "1", b"", sha(b""))


class BrokenUnitCodec(UnitCodec):
    id = "test:broken"

    def decode(self, data):
        return "not a unit"


# covers: R-VAL-3, C-1
def test_a_decoded_value_that_is_not_an_instance_of_the_declared_type_is_refused(codecs):
    codecs.register(BrokenUnitCodec())
    with pytest.raises(
        CodecError, match=r"not an instance of the declared type.*expected .*Unit, found str"
    ):
        codecs.decode_value(Unit, "test:broken", "1", b"", sha(b""))


# covers: R-VAL-1, R-VAL-3
def test_a_value_behind_a_base_class_is_stored_with_its_actual_class_codec(codecs):
    for cls in (Animal, Cat, Dog):
        codecs.register_json(cls)
    cat = Cat("Tom", 7)
    encoded = codecs.encode_value(Animal, cat, name="pet")
    assert encoded.codec_id == "json:tests.durable_core.codecs.models.Cat"
    assert codecs.decode_value(Animal, *encoded) == cat
    assert type(codecs.decode_value(Animal, *encoded)) is Cat
    assert (
        codecs.encode_value(Animal, Animal("x")).codec_id
        == "json:tests.durable_core.codecs.models.Animal"
    )
    # a union of classes has no single codec; each value uses its own class's codec
    dog = Dog("Rex")
    encoded = codecs.encode_value(Cat | Dog, dog)
    assert encoded.codec_id == "json:tests.durable_core.codecs.models.Dog"
    assert codecs.decode_value(Cat | Dog, *encoded) == dog
    assert codecs.decode_value(typing.Any, *encoded) == dog
    with pytest.raises(
        CodecError,
        match=r"serves tests.durable_core.codecs.models.Dog, "
        r"not the declared type tests.durable_core.codecs.models.Cat",
    ):
        codecs.decode_value(Cat, *encoded)


# covers: R-VAL-1
def test_a_subclass_without_codec_is_refused_rather_than_stored_as_its_base(codecs):
    codecs.register_json(Animal)
    with pytest.raises(
        CodecError,
        match=r"key 'pet'.*tests.durable_core.codecs.models.Cat.*call codecs.register_json",
    ):
        codecs.encode_value(Animal, Cat("Tom"), name="pet")


# covers: R-VAL-1, C-4
@pytest.mark.parametrize(
    ("declared", "value", "problem"),
    [
        (int, True, "expected int, found bool True"),
        (float, True, r"expected float, found bool True \(a bool is not a float"),
        (int, "1", "expected int, found str '1'"),
        (list[int], (1,), r"expected list\[int\], found tuple"),
        (tuple[int, int], (1, 2, 3), "expected 2 items"),
        (dict[str, int], {1: 1}, r"at \[1\] \(key\): expected str, found int 1"),
        (int | None, "x", "expected int | None, found str 'x'"),
        (str, b"x", "expected str, found bytes b'x'"),
        (bytes, bytearray(b"x"), "expected bytes, found bytearray"),
    ],
)
def test_a_value_that_does_not_fit_the_declared_type_is_refused(codecs, declared, value, problem):
    with pytest.raises(CodecError, match=problem):
        codecs.encode_value(declared, value, name="k")


# covers: R-VAL-1
def test_a_subclass_inside_a_container_is_refused_since_no_type_tag_is_written(codecs):
    codecs.register_json(Animal)
    codecs.register_json(Cat)
    with pytest.raises(
        CodecError,
        match=r"at \[1\]: expected tests.durable_core.codecs.models.Animal, "
        r"found .*Cat.*no type tag",
    ):
        codecs.encode_value(list[Animal], [Animal("a"), Cat("b")])


def test_error_messages_name_the_key_type_codec_and_path(codecs):
    codecs.register_json(Line)
    with pytest.raises(CodecError) as info:
        codecs.encode_value(list[Line], [Line("a", 1), Line("b", 2, float("inf"))], name="lines")
    message = str(info.value)
    for part in (
        "key 'lines'",
        "list[tests.durable_core.codecs.models.Line]",
        "json:list[tests.durable_core.codecs.models.Line]",
        "version 1",
        "[1].price",
        "inf",
    ):
        assert part in message


# covers: C-1, C-4, R-VAL-3
@pytest.mark.parametrize(
    ("declared", "value", "data", "decoded"),
    [
        (float, 1, b"1.0", 1.0),
        (float, -3, b"-3.0", -3.0),
        (float | None, 2, b"2.0", 2.0),
        (list[float], [1, 2.5], b"[1.0,2.5]", [1.0, 2.5]),
        (dict[str, float], {"a": 0}, b'{"a":0.0}', {"a": 0.0}),
        (tuple[float, int], (1, 1), b"[1.0,1]", (1.0, 1)),
        # in a union with int, an int stays an int and a float a float
        (int | float, 1, b"1", 1),
        (int | float, 1.0, b"1.0", 1.0),
        (float | str, 7, b"7.0", 7.0),
    ],
)
def test_an_int_for_a_float_is_stored_as_a_float(codecs, declared, value, data, decoded):
    encoded = codecs.encode_value(declared, value)
    assert encoded.data == data
    back = codecs.decode_value(declared, *encoded)
    assert back == decoded
    assert type(back) is type(decoded)
    if isinstance(decoded, list):
        assert [type(x) for x in back] == [type(x) for x in decoded]


# covers: C-4
def test_an_int_too_large_for_a_float_is_refused_with_advice(codecs):
    with pytest.raises(CodecError, match=r"too large for a float; declare the key int"):
        codecs.encode_value(float, 2**1100, name="big")


# covers: C-4
def test_a_bool_is_neither_an_int_nor_a_float(codecs):
    for declared, value in ((float, True), (list[float], [1.0, False])):
        with pytest.raises(CodecError, match=r"found bool .*a bool is not a float for Durable"):
            codecs.encode_value(declared, value)
    with pytest.raises(CodecError, match=r"expected float \| None, found bool True"):
        codecs.encode_value(float | None, True)


class _Unserved:
    """A class no codec serves."""


# covers: R-VAL-1, C-2
@pytest.mark.parametrize("declared", [object, typing.Any, _Unserved | int])
def test_a_value_whose_class_has_no_codec_is_explained_once(codecs, declared):
    with pytest.raises(CodecError) as caught:
        codecs.encode_value(declared, _Unserved(), name="k")
    message = str(caught.value)
    assert (
        message.count("no codec is registered for tests.durable_core.codecs.test_values._Unserved")
        == 1
    ), message
    assert "says nothing" not in message  # a broad declared type has no codec on purpose
    assert "Codecs.from_plugins()" in message
