"""register_json: attrs classes, dataclasses and enums as JSON, through cattrs (C-4)."""

from __future__ import annotations

import copy

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import CodecError, ConflictError
from durable_core.codecs import Codecs
from tests.durable_core.codecs.models import (
    Address,
    Animal,
    Cat,
    Color,
    Dog,
    Holder,
    Invoice,
    Level,
    Line,
    Node,
    Outer,
    Plain,
    Point,
    Validated,
    WithAbstract,
    WithAny,
    WithIntKeys,
    WithObject,
    WithPlainClass,
    WithProtocol,
    WithSet,
    WithUnionOfClasses,
)

finite = st.floats(allow_nan=False, allow_infinity=False)
text = st.text(max_size=10)

lines = st.builds(Line, name=text, qty=st.integers(), price=st.none() | finite)
addresses = st.builds(Address, street=text, zip_code=text)
invoices = st.builds(
    Invoice,
    number=st.integers(),
    lines=st.lists(lines, max_size=3),
    tags=st.dictionaries(text, text, max_size=3),
    color=st.sampled_from(Color),
    billing=st.none() | addresses,
    pair=st.tuples(st.integers(), text),
    blob=st.binary(max_size=10),
    secret=text,
)
nodes = st.recursive(
    st.builds(Node, value=st.integers(), children=st.just([])),
    lambda children: st.builds(Node, value=st.integers(), children=st.lists(children, max_size=3)),
    max_leaves=8,
)
points = st.builds(Point, x=finite, y=finite)
holders = st.builds(
    Holder,
    value=st.none() | st.integers() | text,
    items=st.lists(st.none() | st.integers(), max_size=4),
)


def make_codecs():
    codecs = Codecs.default()
    for cls in (Line, Invoice, Node, Point, Holder, Color, Level):
        codecs.register_json(cls)
    return codecs


CODECS = make_codecs()


# covers: C-4, C-1, R-VAL-3
@settings(max_examples=150)
@given(
    st.one_of(
        st.tuples(st.just(Invoice), invoices),
        st.tuples(st.just(Node), nodes),
        st.tuples(st.just(Point), points),
        st.tuples(st.just(Line), lines),
        st.tuples(st.just(Holder), holders),
        st.tuples(st.just(list[Invoice]), st.lists(invoices, max_size=2)),
        st.tuples(st.just(dict[str, Node | None]), st.dictionaries(text, st.none() | nodes)),
        st.tuples(st.just(tuple[Point, Color]), st.tuples(points, st.sampled_from(Color))),
        st.tuples(st.just(Level), st.sampled_from(Level)),
    )
)
def test_register_json_classes_round_trip(pair):
    declared, value = pair
    before = copy.deepcopy(value)
    encoded = CODECS.encode_value(declared, value)
    assert value == before
    decoded = CODECS.decode_value(declared, *encoded)
    assert decoded == value
    assert type(decoded) is type(value)
    assert CODECS.encode_value(declared, copy.deepcopy(value)) == encoded


# covers: C-4, C-1
@settings(max_examples=100)
@given(invoices, invoices)
def test_different_class_values_encode_to_different_bytes(a, b):
    ea = CODECS.encode_value(Invoice, a)
    eb = CODECS.encode_value(Invoice, b)
    assert (ea.digest == eb.digest) == (a == b)


# covers: C-4
def test_ids_versions_and_json_layout_of_a_class():
    codec = CODECS.lookup(Invoice)
    assert (codec.id, codec.version) == ("json:tests.durable_core.codecs.models.Invoice", "1")
    invoice = Invoice(7, [Line("pen", 2, 1.5)], {"b": "2", "a": "1"}, Color.GREEN, secret="s")
    assert CODECS.encode_value(Invoice, invoice).data == (
        b'{"_secret":"s","billing":null,"blob":"","color":"green",'
        b'"lines":[{"name":"pen","price":1.5,"qty":2}],"number":7,"pair":[0,""],'
        b'"tags":{"a":"1","b":"2"}}'
    )
    # init=False fields are not stored; they are rebuilt by __init__
    assert "total" not in codec.fields
    assert CODECS.lookup(list[Invoice]).id == "json:list[tests.durable_core.codecs.models.Invoice]"
    assert CODECS.lookup(Node | None).id == "json:optional[tests.durable_core.codecs.models.Node]"
    assert CODECS.lookup(Level).id == "json:tests.durable_core.codecs.models.Level"
    assert CODECS.encode_value(Level, Level.HIGH).data == b"2"


# covers: C-4
def test_nested_classes_are_served_by_the_outer_codec_without_registration():
    codecs = Codecs.default()
    codecs.register_json(Invoice)
    assert Line not in codecs and Address not in codecs and Color not in codecs
    with pytest.raises(CodecError, match=r"call codecs.register_json\(Line\)"):
        codecs.lookup(Line)


# covers: C-4
def test_custom_id_and_version_and_versions_carried_into_containing_classes():
    codecs = Codecs.default()
    address = codecs.register_json(Address, id="json:shop.Address", version="2")
    assert (address.id, address.version) == ("json:shop.Address", "2")
    invoice = codecs.register_json(Invoice, version="5")
    assert invoice.version == "5+shop.Address@2"
    encoded = codecs.encode_value(Invoice, Invoice(1, [], {}, Color.RED, Address("s", "z")))
    assert encoded.version == "5+shop.Address@2"
    with pytest.raises(CodecError, match="the codec changed"):
        codecs.decode_value(Invoice, encoded.codec_id, "5", encoded.data, encoded.digest)


# covers: C-2, C-4
def test_register_json_twice_conflicts_and_keeps_the_first():
    codecs = Codecs.default()
    first = codecs.register_json(Point)
    with pytest.raises(
        ConflictError, match=r"already has the codec json:tests.durable_core.codecs.models.Point"
    ):
        codecs.register_json(Point, id="json:other.Point")
    assert codecs.lookup(Point) is first


# covers: C-4
@pytest.mark.parametrize(
    ("cls", "field", "problem"),
    [
        (WithAny, "WithAny.meta (type Any)", "Any says nothing"),
        (WithObject, "WithObject.meta (type object)", "object says nothing"),
        (WithAbstract, "WithAbstract.shape", "Shape is abstract"),
        (WithProtocol, "WithProtocol.named", "HasName is abstract"),
        (WithUnionOfClasses, "WithUnionOfClasses.pet", "a union of classes cannot be told apart"),
        (WithSet, "WithSet.items", "sets are not stored"),
        (WithIntKeys, "WithIntKeys.scores", "JSON object keys are strings"),
        (
            WithPlainClass,
            "WithPlainClass.when (type tests.durable_core.codecs.models.Plain)",
            "register a custom",
        ),
        (
            Outer,
            "WithAny.meta (type Any) in field tests.durable_core.codecs.models.Outer.inner",
            "Any says nothing",
        ),
    ],
)
def test_fields_json_cannot_rebuild_are_refused_naming_the_field(cls, field, problem):
    codecs = Codecs.default()
    with pytest.raises(CodecError) as info:
        codecs.register_json(cls)
    message = str(info.value)
    assert f"field tests.durable_core.codecs.models.{field}" in message, message
    assert problem in message, message
    assert "custom codec" in message, message
    assert cls not in codecs


# covers: C-4
def test_register_json_refuses_classes_it_cannot_serve():
    codecs = Codecs.default()
    with pytest.raises(CodecError, match="Plain is none of these: a custom codec is needed"):
        codecs.register_json(Plain)
    with pytest.raises(CodecError, match="a union of classes cannot be told apart"):
        codecs.register_json(list[Cat | Dog])


# covers: C-4
def test_register_json_serves_container_forms_of_unregistered_classes():
    codecs = Codecs.default()
    codec = codecs.register_json(list[Animal])
    assert codec.id == "json:list[tests.durable_core.codecs.models.Animal]"
    value = [Animal("a"), Animal("b")]
    assert codecs.decode_value(list[Animal], *codecs.encode_value(list[Animal], value)) == value


# covers: C-4
def test_a_class_validator_refusing_decoded_fields_is_a_codec_error():
    codecs = Codecs.default()
    codecs.register_json(Validated)
    data = b'{"positive":-1}'
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    with pytest.raises(CodecError, match="Validated refused the decoded fields: ValueError"):
        codecs.decode_value(
            Validated, "json:tests.durable_core.codecs.models.Validated", "1", data, digest
        )


# covers: C-4
def test_enum_values_must_match_exactly():
    import hashlib

    for data, problem in [
        (
            b'"blue"',
            "the JSON string 'blue' is not a value of tests.durable_core.codecs.models.Color",
        ),
        (b"1", "expected a JSON string for tests.durable_core.codecs.models.Color"),
    ]:
        with pytest.raises(CodecError, match=problem):
            CODECS.decode_value(
                Color,
                "json:tests.durable_core.codecs.models.Color",
                "1",
                data,
                hashlib.sha256(data).hexdigest(),
            )
    with pytest.raises(
        CodecError, match=r"expected tests.durable_core.codecs.models.Level, found int 1"
    ):
        CODECS.encode_value(Level, 1)


@attrs.define
class Local:
    """A class of a test module whose annotations are strings resolved at registration."""

    point: Point
    points: list[Point]


def test_string_annotations_resolve_at_registration():
    codecs = Codecs.default()
    codecs.register_json(Local)
    value = Local(Point(1.0, 2.0), [Point(0.0, -0.0)])
    assert codecs.decode_value(Local, *codecs.encode_value(Local, value)) == value
