"""Class codecs: attrs classes, dataclasses and enums, through a private cattrs converter (C-4)."""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from durable_core._typeforms import (
    type_name,
)
from durable_core.codecs.canonical import (
    INTEGER,
    OBJECT,
    STRING,
    PathProblem,
    ResolveProblem,
    describe_json,
)
from durable_core.codecs.jsoncodec import (
    JSONCodec,
    child_from_json,
    child_to_json,
    compose_version,
    pins_of,
    ref_name,
)

# --- classes (attrs, dataclasses, enums) -----------------------------------------------------


def make_converter() -> cattrs.Converter:
    """The private cattrs converter class codecs are generated with.

    Every field gets its own hooks (the field codec), so the converter only contributes the
    generated dict <-> class functions; ``forbid_extra_keys`` refuses unknown fields (C-4), and
    without detailed validation our own path-carrying problems pass through unchanged.
    """
    return cattrs.Converter(detailed_validation=False, forbid_extra_keys=True)


class ClassCodec(JSONCodec):
    """An attrs class or dataclass as a JSON object of its ``__init__`` fields (C-4)."""

    json_kinds = frozenset({OBJECT})

    def __init__(self, cls: type, cid: str, version: str) -> None:
        self.type = cls
        self.id = cid
        self._base_version = version
        self._dep_pins: frozenset[str] = frozenset()
        self.version = version
        self.fields: dict[str, Any] = {}

    def finish(self, fields: dict[str, Any], converter: cattrs.Converter) -> None:
        cls = self.type
        self.fields = fields
        overrides = {
            name: override(
                unstruct_hook=_field_unstructure(codec, name),
                struct_hook=_field_structure(codec, name),
            )
            for name, codec in fields.items()
        }
        self._unstructure = make_dict_unstructure_fn(cls, converter, **overrides)
        self._structure = make_dict_structure_fn(
            cls,
            converter,
            _cattrs_forbid_extra_keys=True,
            _cattrs_detailed_validation=False,
            **overrides,
        )
        self._required = frozenset(_required_fields(cls))
        deps: frozenset[str] = frozenset()
        for codec in fields.values():
            if codec is not self:
                deps |= pins_of(codec)
        deps -= {f"{ref_name(self)}@{self._base_version}"}
        self._dep_pins = deps
        self.version = compose_version(self._base_version, deps)

    def to_json(self, value: Any) -> dict[str, Any]:
        return self._unstructure(value)

    def from_json(self, obj: dict[str, Any]) -> Any:
        unknown = sorted(set(obj) - set(self.fields))
        if unknown:
            raise PathProblem(
                f"unknown field(s) {', '.join(map(repr, unknown))} for {type_name(self.type)}; "
                f"its fields are {', '.join(map(repr, self.fields)) or 'none'}"
            )
        missing = sorted(self._required - set(obj))
        if missing:
            raise PathProblem(
                f"missing field(s) {', '.join(map(repr, missing))} for {type_name(self.type)}"
            )
        try:
            return self._structure(obj, self.type)
        except PathProblem:
            raise
        except ForbiddenExtraKeysError as exc:
            raise PathProblem(
                f"unknown field(s) {', '.join(map(repr, sorted(exc.extra_fields)))} for "
                f"{type_name(self.type)}"
            ) from None
        except Exception as exc:
            raise PathProblem(
                f"{type_name(self.type)} refused the decoded fields: {type(exc).__name__}: {exc}"
            ) from exc


def _field_unstructure(codec: Any, name: str) -> Callable[[Any], Any]:
    def hook(value: Any) -> Any:
        return child_to_json(codec, value, f".{name}")

    return hook


def _field_structure(codec: Any, name: str) -> Callable[[Any, Any], Any]:
    def hook(obj: Any, _type: Any) -> Any:
        return child_from_json(codec, obj, f".{name}")

    return hook


def init_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(name, declared type, required)`` of every field passed to ``__init__``."""
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any, bool]] = []
    if attrs.has(cls):
        for a in attrs.fields(cls):
            if not a.init:
                continue
            tp = hints.get(a.name, a.type)
            out.append((a.name, tp, a.default is attrs.NOTHING))
        return out
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, hints.get(f.name, f.type), required))
    return out


def _required_fields(cls: type) -> list[str]:
    return [name for name, _, required in init_fields(cls) if required]


class EnumCodec(JSONCodec):
    """An enum as the JSON form of its member's value (values must be str or int)."""

    def __init__(self, cls: type[enum.Enum], cid: str, version: str) -> None:
        self.type = cls
        self.id = cid
        self.version = version
        self._base_version = version
        by_value: dict[tuple[type, Any], enum.Enum] = {}
        kinds: set[str] = set()
        for member in cls:
            value = member.value
            if type(value) not in (str, int):
                raise ResolveProblem(
                    f"enum {type_name(cls)} has the member {member.name} with a value of type "
                    f"{type_name(type(value))}; JSON enums need str or int values: a custom "
                    "codec is needed"
                )
            kinds.add(STRING if type(value) is str else INTEGER)
            by_value[(type(value), value)] = member
        self._by_value = by_value
        self.json_kinds = frozenset(kinds)

    def to_json(self, value: enum.Enum) -> Any:
        return value.value

    def from_json(self, obj: Any) -> Any:
        try:
            return self._by_value[(type(obj), obj)]
        except (KeyError, TypeError):
            values = ", ".join(repr(m.value) for m in self.type)
            raise PathProblem(
                f"{describe_json(obj)} is not a value of {type_name(self.type)} ({values})"
            ) from None
