"""The Codecs registry: registration, defaults, lookup of declared types, plugins (C-1, C-2)."""

from __future__ import annotations

import pathlib
import typing
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, NewType, Optional

import pytest

from durable_core import CodecError, ConflictError, PluginError, hookimpl, make_plugin_manager
from durable_core.codecs import Codec, Codecs, JSONCodec, register_builtin_codecs
from tests.durable_core.codecs.models import Animal, Cat, Dog, HasName, Point, Shape

BUILTIN_IDS = ["json:bool", "json:int", "json:float", "json:str", "json:bytes", "json:none"]


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents


class MoneyCodec:
    type = Money
    id = "test:money"
    version = "1"

    def encode(self, value: Money) -> bytes:
        return value.cents.to_bytes(8, "big", signed=True)

    def decode(self, data: bytes) -> Money:
        return Money(int.from_bytes(data, "big", signed=True))


def make_codec(**overrides):
    codec = MoneyCodec()
    for key, value in overrides.items():
        setattr(codec, key, value)
    return codec


# covers: C-2
def test_an_empty_registry_accepts_custom_codecs():
    codecs = Codecs()
    assert list(codecs) == []
    assert len(codecs) == 0
    with pytest.raises(CodecError, match="no codec"):
        codecs.lookup(int)
    codec = codecs.register(MoneyCodec())
    assert list(codecs) == [codec]
    assert Money in codecs
    assert codecs.lookup(Money) is codec
    assert codecs.by_id("test:money") is codec


# covers: C-2
def test_default_registers_the_builtin_json_codecs_at_version_1():
    codecs = Codecs.default()
    assert [c.id for c in codecs] == BUILTIN_IDS
    assert {c.version for c in codecs} == {"1"}
    assert [c.type for c in codecs] == [bool, int, float, str, bytes, type(None)]
    for codec in codecs:
        assert isinstance(codec, Codec)
        assert isinstance(codec, JSONCodec)


# covers: C-2
def test_default_and_the_builtin_plugin_share_one_definition():
    via_function = Codecs()
    register_builtin_codecs(via_function)
    via_plugin = Codecs.from_plugins(make_plugin_manager(autoload=False))
    assert [(c.id, c.version) for c in via_function] == [(c.id, c.version) for c in via_plugin]
    assert [(c.id, c.version) for c in Codecs.default()] == [(c.id, c.version) for c in via_plugin]


# covers: C-2
@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"type": None}, "empty type"),
        ({"type": ""}, "empty type"),
        ({"type": "Money"}, "not a class or a type form"),
        ({"id": ""}, "invalid id ''"),
        ({"id": None}, "invalid id None"),
        ({"id": "has space"}, "invalid id 'has space'"),
        ({"version": ""}, "invalid version ''"),
        ({"version": 1}, "invalid version 1"),
        ({"encode": None}, "no callable encode"),
        ({"decode": "x"}, "no callable decode"),
    ],
)
def test_register_refuses_empty_type_id_or_version(overrides, problem):
    codecs = Codecs()
    with pytest.raises(CodecError, match=problem):
        codecs.register(make_codec(**overrides))
    assert list(codecs) == []


# covers: C-2
def test_a_duplicate_type_raises_conflict_and_keeps_the_first_entry():
    codecs = Codecs()
    first = codecs.register(MoneyCodec())
    with pytest.raises(ConflictError, match=r"tests?.*Money already has the codec test:money"):
        codecs.register(make_codec(id="test:money2"))
    assert list(codecs) == [first]
    assert codecs.lookup(Money) is first
    with pytest.raises(CodecError):
        codecs.by_id("test:money2")


# covers: C-2
def test_a_duplicate_id_raises_conflict_and_keeps_the_first_entry():
    codecs = Codecs.default()
    with pytest.raises(
        ConflictError, match="codec id 'json:int' is already registered for type int"
    ):
        codecs.register(make_codec(id="json:int"))
    assert codecs.by_id("json:int").type is int
    assert Money not in codecs


# covers: C-2
def test_registering_a_builtin_type_twice_conflicts():
    codecs = Codecs.default()
    with pytest.raises(ConflictError, match="type bool already has the codec json:bool"):
        register_builtin_codecs(codecs)
    assert [c.id for c in codecs] == BUILTIN_IDS


@pytest.mark.parametrize(
    ("declared", "codec_id"),
    [
        (int, "json:int"),
        (None, "json:none"),
        (type(None), "json:none"),
        (int | None, "json:optional[int]"),
        (Optional[int], "json:optional[int]"),  # noqa: UP045 - the spelling under test
        (typing.Union[int, None], "json:optional[int]"),  # noqa: UP007
        (list[str], "json:list[str]"),
        (typing.List[str], "json:list[str]"),  # noqa: UP006
        (dict[str, float], "json:dict[str,float]"),
        (typing.Dict[str, bytes], "json:dict[str,bytes]"),  # noqa: UP006
        (tuple[int, str], "json:tuple[int,str]"),
        (tuple[int, ...], "json:tuple[int,...]"),
        (tuple[()], "json:tuple[()]"),
        (list[dict[str, tuple[int, ...] | None]], "json:list[dict[str,optional[tuple[int,...]]]]"),
        (int | str, "json:union[int,str]"),
        (str | int, "json:union[int,str]"),
        (str | int | None, "json:optional[union[int,str]]"),
        (Annotated[int, "meta"], "json:int"),
        (NewType("UserId", int), "json:int"),
    ],
)
def test_lookup_builds_codecs_for_declared_type_forms(declared, codec_id):
    codecs = Codecs.default()
    codec = codecs.lookup(declared)
    assert codec.id == codec_id
    assert codec.version == "1"
    assert codecs.lookup(declared) is codec  # cached
    assert len(codecs) == 6  # built codecs are not registered


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (list, "declare the element types"),
        (dict, "declare the element types"),
        (tuple, "declare the element types"),
        (set[int], "sets are not stored"),
        (typing.Any, "Any says nothing about how to rebuild the value"),
        (object, "object says nothing"),
        (dict[int, str], "JSON object keys are strings"),
        (str | bytes, "ambiguous: .*write a JSON string"),
        (list[int] | tuple[int, ...], "ambiguous"),
        (Money, "no codec is registered for .*Money: register a custom codec"),
        (list[Money], "no codec is registered for .*Money"),
        (typing.Sequence[int], "abstract"),
    ],
)
def test_lookup_refuses_types_without_codec_and_says_why(declared, problem):
    codecs = Codecs.default()
    with pytest.raises(CodecError, match=problem):
        codecs.lookup(declared)


def test_lookup_embeds_a_binary_codec_inside_containers():
    codecs = Codecs.default()
    codecs.register(MoneyCodec())
    codec = codecs.lookup(list[Money | None])
    assert codec.id == "json:list[optional[test:money]]"
    encoded = codecs.encode_value(list[Money | None], [Money(5), None])
    assert encoded.data == b'["AAAAAAAAAAU=",null]'
    assert codecs.decode_value(list[Money | None], *encoded) == [Money(5), None]


def test_a_registered_codec_wins_over_a_built_one_and_resets_the_cache():
    codecs = Codecs.default()
    built = codecs.lookup(list[int])
    assert built.id == "json:list[int]"

    class IntListCodec:
        type = list[int]
        id = "test:intlist"
        version = "1"

        def encode(self, value):
            return ",".join(map(str, value)).encode()

        def decode(self, data):
            return [int(x) for x in data.decode().split(",") if x]

    codecs.register(IntListCodec())
    assert codecs.lookup(typing.List[int]).id == "test:intlist"  # noqa: UP006
    assert codecs.lookup(dict[str, list[int]]).id == "json:dict[str,test:intlist]"


# covers: C-1
def test_versions_other_than_1_are_carried_into_containing_codecs():
    codecs = Codecs.default()
    codecs.register(make_codec(version="3"))
    assert codecs.lookup(Money).version == "3"
    assert codecs.lookup(list[Money]).version == "1+test:money@3"
    assert codecs.lookup(dict[str, tuple[Money, int]]).version == "1+test:money@3"


# covers: C-1
def test_codecs_are_thread_safe():
    codecs = Codecs.default()
    forms = [list[int], dict[str, int], tuple[int, ...], int | None, list[list[str]]] * 20
    values = [[1, 2], {"a": 1}, (1, 2), None, [["x"]]] * 20

    def work(i):
        encoded = codecs.encode_value(forms[i], values[i])
        return codecs.decode_value(forms[i], *encoded), encoded

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(len(forms))))
    for i, (decoded, encoded) in enumerate(results):
        assert decoded == values[i]
        assert encoded == codecs.encode_value(forms[i], values[i])


# covers: C-2
def test_from_plugins_collects_codecs_of_plugins_registered_in_process():
    class Plugin:
        @hookimpl
        def durable_register_codecs(self, codecs):
            codecs.register(MoneyCodec())

    pm = make_plugin_manager(autoload=False, plugins=[("money", Plugin())])
    codecs = Codecs.from_plugins(pm)
    assert [c.id for c in codecs] == [*BUILTIN_IDS, "test:money"]
    infos = {i.name: i for i in pm.describe()}
    assert infos["money"].codecs == ("test:money@1",)
    assert infos["memory"].codecs == tuple(f"{i}@1" for i in BUILTIN_IDS)


# covers: C-2
def test_a_plugin_registering_a_builtin_type_conflicts_and_names_the_plugin():
    class Greedy:
        @hookimpl
        def durable_register_codecs(self, codecs):
            codecs.register(make_codec(type=int, id="greedy:int"))

    pm = make_plugin_manager(autoload=False, plugins=[("greedy", Greedy())])
    with pytest.raises(
        ConflictError, match=r"plugin 'greedy'.*type int already has the codec json:int"
    ):
        Codecs.from_plugins(pm)


def test_a_plugin_failing_while_registering_codecs_is_a_plugin_error():
    class Broken:
        @hookimpl
        def durable_register_codecs(self, codecs):
            raise RuntimeError("numpy missing")

    pm = make_plugin_manager(autoload=False, plugins=[("broken", Broken())])
    with pytest.raises(PluginError, match=r"plugin 'broken'.*RuntimeError: numpy missing"):
        Codecs.from_plugins(pm)


def test_blocking_the_core_plugin_leaves_an_empty_registry():
    pm = make_plugin_manager(autoload=False, block=["memory"])
    assert list(Codecs.from_plugins(pm)) == []


# covers: C-2, C-4, R-VAL-1
@pytest.mark.parametrize(
    "declared",
    [
        int,
        list[int],
        typing.Any,
        object,
        typing.TypeVar("T"),
        Shape,  # abstract: each value is stored with its own class's codec
        HasName,  # a protocol
        Shape | None,
        Cat | Dog,  # a union of registered classes JSON cannot tell apart
        Cat | Dog | None,
        Animal,  # a concrete base class with a registered subclass
    ],
)
def test_check_declared_accepts_served_and_intentionally_broad_types(declared):
    codecs = Codecs.default()
    codecs.register_json(Cat)
    codecs.register_json(Dog)
    codecs.check_declared(declared)


# covers: C-2, C-4
@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (Money, r"^no codec is registered for .*Money: register a custom codec"),
        (list[Money], r"^no codec for list\[.*Money\]: no codec is registered for .*Money"),
        (Point, r"call codecs.register_json\(Point\) first"),
        (list[Cat | Dog], "ambiguous"),  # inside a container only the declared form is used
        (list[int] | tuple[int, ...], "ambiguous"),  # a list's own class has no codec
        (Cat | Point, r"codecs.register_json\(Point\)"),  # one member without codec
        (set[int], r"^no codec for set\[int\]: sets are not stored"),
        (typing.Sequence[int], "abstract"),
        (pathlib.Path, r"^no codec is registered for pathlib.Path: declare the key str"),
        (list[pathlib.PurePosixPath], r"PurePosixPath: declare the key str"),
    ],
)
def test_check_declared_refuses_types_no_value_could_be_stored_with(declared, problem):
    codecs = Codecs.default()
    codecs.register_json(Cat)
    codecs.register_json(Dog)
    with pytest.raises(CodecError, match=problem):
        codecs.check_declared(declared)


# covers: C-2
def test_the_no_codec_message_says_it_once_and_mentions_codec_plugins():
    with pytest.raises(CodecError) as caught:
        Codecs.default().encode_value(Money, Money(1), name="price")
    message = str(caught.value)
    assert message.count("no codec") == 1, message
    assert "Codecs.from_plugins()" in message


@pytest.mark.parametrize(
    "declared",
    [
        list[int],
        dict[str, float],
        Optional[str],  # noqa: UP045 - the spelling under test
        int | str,
        tuple[int, ...],
        tuple[str, int, bytes],
        tuple[()],
        list[dict[str, int | None]],
        Optional[int | str],  # noqa: UP045
        dict[str, list[tuple[Point, ...]]],
        list[Money],
    ],
)
def test_by_stored_id_builds_a_container_codec_from_its_id(declared):
    # covers: C-1 (a stored value names its codec; a reader without the graph finds it again)
    writer = Codecs.default()
    writer.register_json(Point)
    writer.register(MoneyCodec())
    written = writer.lookup(declared)
    reader = Codecs.default()
    reader.register_json(Point)
    reader.register(MoneyCodec())
    codec = reader.by_stored_id(written.id)
    assert (codec.id, codec.version) == (written.id, written.version)


@pytest.mark.parametrize(
    "codec_id",
    [
        "json:list[myapp.Unknown]",  # a part no codec serves
        "json:set[int]",  # not a form Durable writes
        "json:list[int",
        "json:list[int]]",
        "json:dict[int,str]",
        "json:list[]",
        "json:union[int]",
        "test:other",
    ],
)
def test_by_stored_id_refuses_what_no_registered_codec_serves(codec_id):
    with pytest.raises(CodecError, match=r"no codec with id .* is registered"):
        Codecs.default().by_stored_id(codec_id)
