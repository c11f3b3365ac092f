"""The normal form of declared types: what codecs are looked up by (C-2)."""

from __future__ import annotations

import enum
import typing
from types import NoneType
from typing import Annotated, NewType, Optional, Union

import attrs
import pytest

from durable_core._typeforms import normalize


@attrs.frozen
class Point:
    x: int = 0


class Color(enum.Enum):
    RED = 1


UserId = NewType("UserId", int)


# covers: C-2
@pytest.mark.parametrize("tp", [int, str, bytes, bool, float, Point, Color, object])
def test_a_class_is_its_own_normal_form(tp: type) -> None:
    assert normalize(tp) is tp


# covers: C-2
@pytest.mark.parametrize(
    ("tp", "normal"),
    [
        (None, NoneType),
        (typing.List, list),  # noqa: UP006
        (typing.Dict, dict),  # noqa: UP006
        (UserId, int),
        (Annotated[Point, "meta"], Point),
        (Optional[int], Union[int, None]),  # noqa: UP007, UP045
        (Union[int, Union[str, int]], Union[int, str]),  # noqa: UP007
        (list[UserId], list[int]),
        (dict[str, Annotated[int, 1]], dict[str, int]),
        (tuple[UserId, ...], tuple[int, ...]),
    ],
)
def test_forms_are_brought_to_their_normal_form(tp: object, normal: object) -> None:
    assert normalize(tp) == normal
    assert typing.get_args(normalize(tp)) == typing.get_args(normal)  # members in order
