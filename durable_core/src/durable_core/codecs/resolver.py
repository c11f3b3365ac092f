"""Building JSON codecs for type forms from the registered codecs (:class:`Resolver`)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import pathlib
import typing
from abc import ABCMeta
from collections.abc import Callable
from typing import Any

import attrs
import cattrs

from durable_core._typeforms import (
    NoneType,
    is_union,
    normalize,
    type_name,
)
from durable_core.codecs.canonical import (
    ResolveProblem,
)
from durable_core.codecs.classes import (
    ClassCodec,
    EnumCodec,
    init_fields,
)
from durable_core.codecs.containers import (
    DictCodec,
    EmbeddedCodec,
    ListCodec,
    OptionalCodec,
    TupleCodec,
    UnionCodec,
)
from durable_core.codecs.jsoncodec import (
    JSONCodec,
)

# --- building codecs for type forms --------------------------------------------------------


def is_abstract(tp: type) -> bool:
    """Abstract classes, protocols and the abstract collections of ``collections.abc``."""
    if inspect.isabstract(tp) or getattr(tp, "_is_protocol", False):
        return True
    return isinstance(tp, ABCMeta) and tp.__module__ in ("collections.abc", "numbers", "typing")


def serves_as_class(tp: Any) -> bool:
    """True for the classes :meth:`Codecs.register_json` can serve: attrs, dataclass, enum."""
    return isinstance(tp, type) and (
        attrs.has(tp) or dataclasses.is_dataclass(tp) or issubclass(tp, enum.Enum)
    )


def default_class_id(cls: type) -> str:
    return f"json:{cls.__module__}.{cls.__qualname__}"


class Resolver:
    """Builds JSON codecs for normalised type forms from the registered codecs.

    Args:
        registered: returns the registered codec of a normalised type form, or ``None``.
        converter: the cattrs converter class codecs are generated with.
        serve_classes: also serve attrs classes, dataclasses and enums that have no registered
            codec, as part of the codec being built (``register_json``); ``lookup`` does not.
    """

    def __init__(
        self,
        registered: Callable[[Any], Any],
        converter: cattrs.Converter,
        *,
        serve_classes: bool,
    ) -> None:
        self._registered = registered
        self._converter = converter
        self._serve_classes = serve_classes
        self._classes: dict[type, JSONCodec] = {}

    def component(self, tp: Any) -> Any:
        """A JSON codec for ``tp`` usable inside containers (registered, built or embedded).

        Raises:
            ResolveProblem: no codec can serve ``tp``; the message says why and what to do.
        """
        reg = self._registered(tp)
        if reg is not None:
            return reg if isinstance(reg, JSONCodec) else EmbeddedCodec(reg)
        return self.build(tp)

    def build(self, tp: Any) -> Any:
        """Build a new codec for ``tp`` (a container form, or a class when serving classes)."""
        if tp is typing.Any or tp is object:
            raise ResolveProblem(
                f"{type_name(tp)} says nothing about how to rebuild the value: declare a "
                "concrete type, or a custom codec is needed"
            )
        if tp is NoneType:
            raise ResolveProblem("no codec for None is registered (Codecs.default() has one)")
        if is_union(tp):
            return self._union(tp)
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is list and args:
            return ListCodec(self.component(args[0]))
        if origin is dict and len(args) == 2:
            if args[0] is not str:
                raise ResolveProblem(
                    f"{type_name(tp)}: JSON object keys are strings; declare dict[str, ...] "
                    "(or a list of pairs), or a custom codec is needed"
                )
            return DictCodec(self.component(args[1]))
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return TupleCodec([self.component(args[0])], variadic=True)
            return TupleCodec([self.component(a) for a in args], variadic=False)
        if tp in (set, frozenset) or origin in (set, frozenset):
            raise ResolveProblem(
                f"{type_name(tp)}: sets are not stored as JSON (their order is not defined); "
                "declare list[T] or tuple[T, ...], or a custom codec is needed"
            )
        if tp in (list, dict, tuple):
            raise ResolveProblem(
                f"{type_name(tp)} has no codec: declare the element types, for example "
                "list[int], dict[str, float], tuple[str, ...]"
            )
        if origin is not None:
            raise ResolveProblem(
                f"{type_name(tp)} is abstract or not a type Durable can store; declare list[T], "
                "dict[str, T] or tuple[...], or a custom codec is needed"
            )
        if not isinstance(tp, type):
            raise ResolveProblem(f"{tp!r} is not a type Durable can store")
        if tp in self._classes:
            return self._classes[tp]
        if is_abstract(tp):
            raise ResolveProblem(
                f"{type_name(tp)} is abstract: JSON cannot tell which concrete class to "
                "rebuild; declare a concrete class, or a custom codec is needed"
            )
        if self._serve_classes and serves_as_class(tp):
            return self.build_class(tp, default_class_id(tp), "1")
        if serves_as_class(tp):
            raise ResolveProblem(
                f"no codec is registered for {type_name(tp)}: in the run's TOML file, name "
                f'it in [codecs] json = ["{tp.__module__}:{tp.__qualname__}"]; from Python, '
                f"call codecs.register_json({tp.__qualname__}) first (or, when an installed "
                "codec plugin provides it, build the registry with Codecs.from_plugins())"
            )
        if issubclass(tp, pathlib.PurePath):
            raise ResolveProblem(
                f"no codec is registered for {type_name(tp)}: declare the key str (a config's "
                "{ path = ... } input then gives the absolute path as a str) and build the "
                "Path in the body, or register a custom codec for it (codecs.register, see "
                "docs/codecs.md)"
            )
        raise ResolveProblem(
            f"no codec is registered for {type_name(tp)}: register a custom codec for it "
            "(codecs.register, see docs/codecs.md), install a codec plugin that provides one "
            "and build the registry with Codecs.from_plugins(), or convert the value to a "
            "stored type"
        )

    def _union(self, tp: Any) -> Any:
        members = list(typing.get_args(tp))
        optional = NoneType in members
        rest = [m for m in members if m is not NoneType]
        if len(rest) == 1:
            inner = self.component(rest[0])
        else:
            inner = UnionCodec([self.component(m) for m in rest])
        return OptionalCodec(inner) if optional else inner

    def build_class(self, cls: type, cid: str, version: str) -> JSONCodec:
        """The codec of an attrs class, dataclass or enum; nested unregistered classes are
        served as part of it, recursively (a class may refer to itself)."""
        if issubclass(cls, enum.Enum):
            codec: JSONCodec = EnumCodec(cls, cid, version)
            self._classes[cls] = codec
            return codec
        if is_abstract(cls):
            raise ResolveProblem(
                f"{type_name(cls)} is abstract: JSON cannot tell which concrete class to "
                "rebuild; a custom codec is needed"
            )
        class_codec = ClassCodec(cls, cid, version)
        self._classes[cls] = class_codec
        try:
            fields_info = init_fields(cls)
        except Exception as exc:  # unresolvable forward references
            raise ResolveProblem(
                f"the field types of {type_name(cls)} cannot be resolved ({type(exc).__name__}: "
                f"{exc}); define the classes it refers to at module level"
            ) from exc
        fields: dict[str, Any] = {}
        for name, ftp, _required in fields_info:
            try:
                fields[name] = self.component(normalize(ftp))
            except ResolveProblem as problem:
                raise problem.within(
                    f"field {type_name(cls)}.{name} (type {type_name(normalize(ftp))})"
                ) from None
        class_codec.finish(fields, self._converter)
        return class_codec
