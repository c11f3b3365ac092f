"""Classes used by the codec tests (module level, so that their annotations resolve)."""

from __future__ import annotations

import abc
import dataclasses
import enum
from typing import Any, Protocol

import attrs


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.define
class Line:
    name: str
    qty: int
    price: float | None = None


@attrs.frozen
class Address:
    street: str
    zip_code: str


@attrs.define
class Invoice:
    number: int
    lines: list[Line]
    tags: dict[str, str]
    color: Color
    billing: Address | None = None
    pair: tuple[int, str] = (0, "")
    blob: bytes = b""
    _secret: str = ""
    total: float = attrs.field(init=False, default=0.0)


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


@attrs.define
class Validated:
    positive: int = attrs.field(validator=attrs.validators.gt(0))


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self) -> float: ...


class HasName(Protocol):
    name: str


@attrs.define
class Animal:
    name: str


@attrs.define
class Cat(Animal):
    lives: int = 9


@attrs.define
class Dog(Animal):
    good: bool = True


@attrs.define
class WithAny:
    meta: Any


@attrs.define
class WithObject:
    meta: object


@attrs.define
class WithAbstract:
    shape: Shape


@attrs.define
class WithProtocol:
    named: HasName


@attrs.define
class WithUnionOfClasses:
    pet: Cat | Dog


@attrs.define
class Outer:
    inner: WithAny


@attrs.define
class WithSet:
    items: set[int]


@attrs.define
class WithIntKeys:
    scores: dict[int, str]


@attrs.define
class WithPlainClass:
    when: Plain


class Plain:
    """A class without a codec."""


@attrs.define
class Holder:
    """A field of a broader type with a concrete union of scalars."""

    value: int | str | None
    items: list[int | None]
