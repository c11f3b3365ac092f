"""Keys: name + type, value and stream kinds, shallow type checks (G-1)."""

import typing
from typing import Any, NewType, Optional

import pytest

from durable_core import GraphError, Key
from durable_core.graph import type_name

UserId = NewType("UserId", int)


# covers: G-1
def test_keys_compare_by_name_type_and_kind():
    assert Key("n", int) == Key("n", int)
    assert hash(Key("n", int)) == hash(Key("n", int))
    assert Key("n", int) != Key("n", str)
    assert Key("n", int) != Key("m", int)
    assert Key("lines", str, stream=True) != Key("lines", str)
    assert Key("words", list[str]) == Key("words", list[str])
    assert Key("words", list[str]) != Key("words", list[int])
    # capacity tunes a stream; it is not part of the key's identity
    assert Key("lines", str, stream=True, capacity=4) == Key("lines", str, stream=True)


# covers: G-1
def test_stream_keys_have_a_capacity_and_value_keys_none():
    assert Key("lines", str, stream=True).capacity == 16
    assert Key("lines", str, stream=True, capacity=3).capacity == 3
    with pytest.raises(GraphError, match="capacity only applies to stream keys"):
        Key("n", int, capacity=3)
    with pytest.raises(GraphError, match="positive integer"):
        Key("lines", str, stream=True, capacity=-1)


# covers: G-1
@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_key_names_are_refused(bad):
    with pytest.raises(GraphError, match="non-empty string"):
        Key(bad, int)


# covers: G-1
@pytest.mark.parametrize("bad", [3, "int", [int]])
def test_a_key_type_must_be_a_type(bad):
    with pytest.raises(GraphError, match="expected a type"):
        Key("n", bad)


# covers: G-1
@pytest.mark.parametrize(
    ("tp", "good", "bad"),
    [
        (int, 3, "3"),
        (str, "", b""),
        (float, 3, "3.0"),  # int is accepted for float, as type checkers do
        (list[str], ["a"], ("a",)),
        (dict[str, int], {}, []),
        (int | None, None, 1.5),
        (Optional[str], None, 1),  # noqa: UP045 - the typing spelling must work too
        (UserId, UserId(3), "3"),
        (type(None), None, 0),
        (typing.Literal["a"], "anything", None),  # Literal is not checked: good and "bad" pass
    ],
)
def test_values_are_checked_shallowly(tp, good, bad):
    key = Key("k", tp)
    assert key.accepts(good)
    if typing.get_origin(tp) is typing.Literal:
        assert key.accepts(bad)
    else:
        assert not key.accepts(bad)


# covers: G-1
def test_any_is_not_checked():
    assert Key("k", Any).accepts(object())


# covers: G-1
def test_type_names_are_canonical():
    assert type_name(int) == "builtins.int"
    assert type_name(list[str]) == "builtins.list[builtins.str]"
    assert type_name(typing.List[str]) == "builtins.list[builtins.str]"  # noqa: UP006
    assert type_name(int | str) == type_name(str | int) == "typing.Union[builtins.int,builtins.str]"
    assert type_name(Optional[int]) == type_name(int | None)  # noqa: UP045
    assert type_name(UserId).endswith(".UserId")
    assert type_name(typing.Callable[[int], str]) == (
        "collections.abc.Callable[[builtins.int],builtins.str]"
    )
    assert repr(Key("lines", str, stream=True)) == "Key('lines', builtins.str, stream=True)"
