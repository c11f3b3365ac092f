"""Container codecs built from the codecs of their parts: list, dict, tuple, optional, union.

A codec that is not a JSON codec (numpy arrays, any custom binary codec) takes part in a
container as a base64 string of its own bytes (:class:`EmbeddedCodec`).
"""

from __future__ import annotations

import base64
import typing
from typing import Any

from durable_core._typeforms import (
    InstanceMismatch,
    check_instance,
    type_name,
)
from durable_core.codecs.canonical import (
    ARRAY,
    KIND_TEXT,
    NULL,
    OBJECT,
    STRING,
    PathProblem,
    ResolveProblem,
    check_text,
    json_kind,
    mismatch,
)
from durable_core.codecs.jsoncodec import (
    JSONCodec,
    child_from_json,
    child_to_json,
    compose_version,
    from_json_checked,
    pins_of,
    ref_name,
    to_json_checked,
)
from durable_core.codecs.scalars import (
    FloatCodec,
    strict_b64decode,
)

# --- containers ------------------------------------------------------------------------------


class _Composite(JSONCodec):
    """A codec built from the codecs of its parts; version "1" plus their pins."""

    _base_version = "1"

    def _finish(self, tp: Any, cid: str, parts: list[Any]) -> None:
        self.type = tp
        self.id = cid
        deps: frozenset[str] = frozenset()
        for part in parts:
            deps |= pins_of(part)
        self._dep_pins = deps
        self.version = compose_version(self._base_version, deps)


class ListCodec(_Composite):
    json_kinds = frozenset({ARRAY})

    def __init__(self, item: Any) -> None:
        self.item = item
        self._finish(list[item.type], f"json:list[{ref_name(item)}]", [item])

    def accepts(self, value: Any) -> bool:
        return type(value) is list

    def to_json(self, value: list[Any]) -> list[Any]:
        fast = getattr(self.item, "fast_items", None)
        if fast is not None and fast(value):
            return value  # the JSON form of these items is the items themselves
        return [child_to_json(self.item, v, f"[{i}]") for i, v in enumerate(value)]

    def from_json(self, obj: list[Any]) -> list[Any]:
        fast = getattr(self.item, "fast_items", None)
        if fast is not None and fast(obj):
            return obj
        return [child_from_json(self.item, v, f"[{i}]") for i, v in enumerate(obj)]


class DictCodec(_Composite):
    json_kinds = frozenset({OBJECT})

    def __init__(self, value: Any) -> None:
        self.value = value
        self._finish(dict[str, value.type], f"json:dict[str,{ref_name(value)}]", [value])

    def accepts(self, value: Any) -> bool:
        return type(value) is dict

    def to_json(self, value: dict[Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in value.items():
            if type(k) is not str:
                raise mismatch(str, k).under(f"[{k!r}] (key)")
            try:
                check_text(k, "the key")
            except PathProblem as problem:
                raise problem.under(f"[{k!r}] (key)") from None
            out[k] = child_to_json(self.value, v, f"[{k!r}]")
        return out

    def from_json(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            try:
                check_text(k, "the key")
            except PathProblem as problem:
                raise problem.under(f"[{k!r}] (key)") from None
            out[k] = child_from_json(self.value, v, f"[{k!r}]")
        return out


class TupleCodec(_Composite):
    json_kinds = frozenset({ARRAY})

    def __init__(self, items: list[Any], variadic: bool) -> None:
        self.items = items
        self.variadic = variadic
        if variadic:
            tp: Any = tuple[items[0].type, ...]
            cid = f"json:tuple[{ref_name(items[0])},...]"
        elif items:
            tp = tuple[tuple(i.type for i in items)]
            cid = f"json:tuple[{','.join(ref_name(i) for i in items)}]"
        else:
            tp = tuple[()]
            cid = "json:tuple[()]"
        self._finish(tp, cid, items)

    def accepts(self, value: Any) -> bool:
        return type(value) is tuple

    def _pairs(self, seq: Any, what: str) -> list[tuple[Any, Any]]:
        if self.variadic:
            return [(self.items[0], v) for v in seq]
        if len(seq) != len(self.items):
            raise PathProblem(
                f"expected {len(self.items)} items for {type_name(self.type)}, found {what} of "
                f"{len(seq)} items"
            )
        return list(zip(self.items, seq, strict=True))

    def to_json(self, value: tuple[Any, ...]) -> list[Any]:
        return [
            child_to_json(c, v, f"[{i}]") for i, (c, v) in enumerate(self._pairs(value, "a tuple"))
        ]

    def from_json(self, obj: list[Any]) -> tuple[Any, ...]:
        return tuple(
            child_from_json(c, v, f"[{i}]")
            for i, (c, v) in enumerate(self._pairs(obj, "a JSON array"))
        )


class OptionalCodec(_Composite):
    def __init__(self, inner: Any) -> None:
        if NULL in inner.json_kinds:
            raise ResolveProblem(
                f"{type_name(inner.type)} | None cannot be told apart from None in JSON (codec "
                f"{inner.id} may write null): a custom codec is needed"
            )
        self.inner = inner
        self.json_kinds = inner.json_kinds | {NULL}
        self._finish(
            typing.Optional[inner.type],  # noqa: UP045 - built from a runtime type
            f"json:optional[{ref_name(inner)}]",
            [inner],
        )

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)

    def to_json(self, value: Any) -> Any:
        return None if value is None else to_json_checked(self.inner, value)

    def from_json(self, obj: Any) -> Any:
        return None if obj is None else from_json_checked(self.inner, obj)


class UnionCodec(_Composite):
    def __init__(self, members: list[Any]) -> None:
        members = sorted(members, key=ref_name)
        seen: dict[str, Any] = {}
        for m in members:
            for kind in m.json_kinds:
                if kind in seen:
                    other = seen[kind]
                    advice = (
                        "a union of classes cannot be told apart in JSON (no type tag is written)"
                        if kind == OBJECT
                        else "their JSON forms overlap"
                    )
                    raise ResolveProblem(
                        f"the union {' | '.join(type_name(x.type) for x in members)} is "
                        f"ambiguous: {type_name(other.type)} and {type_name(m.type)} both "
                        f"write {KIND_TEXT[kind]}; {advice}: a custom codec is needed"
                    )
                seen[kind] = m
        self.members = members
        # An int is also accepted by the float codec: try members that take a value as
        # itself first, so an int in an ``int | float`` key stays an int.
        self._encode_order = sorted(members, key=lambda m: isinstance(m, FloatCodec))
        self.json_kinds = frozenset(seen)
        self._by_kind = seen
        self._finish(
            typing.Union[tuple(m.type for m in members)],  # noqa: UP007
            f"json:union[{','.join(ref_name(m) for m in members)}]",
            members,
        )

    def accepts(self, value: Any) -> bool:
        return any(m.accepts(value) for m in self.members)

    def to_json(self, value: Any) -> Any:
        for m in self._encode_order:
            if m.accepts(value):
                return to_json_checked(m, value)
        raise mismatch(self.type, value)

    def from_json(self, obj: Any) -> Any:
        return from_json_checked(self._by_kind[json_kind(obj)], obj)


class EmbeddedCodec(JSONCodec):
    """A non-JSON codec inside a JSON value: its bytes as a base64 string."""

    json_kinds = frozenset({STRING})

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.type = codec.type
        self.id = codec.id
        self.version = codec.version

    def accepts(self, value: Any) -> bool:
        if isinstance(self.type, type):
            return type(value) is self.type
        try:
            check_instance(value, self.type)
        except InstanceMismatch:
            return False
        return True

    def to_json(self, value: Any) -> str:
        data = self.codec.encode(value)
        if not isinstance(data, bytes):
            raise PathProblem(f"codec {self.id} returned {type_name(type(data))}, not bytes")
        return base64.b64encode(data).decode("ascii")

    def from_json(self, obj: str) -> Any:
        return self.codec.decode(strict_b64decode(obj))
