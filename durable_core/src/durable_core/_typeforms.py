"""Declared key types: normalising type forms, naming them, and checking values against them.

A key's declared type is a Python class (``int``, ``myapp.Invoice``) or a type form built from
classes (``int | None``, ``Optional[int]``, ``list[str]``, ``dict[str, int]``,
``tuple[int, ...]``). :func:`normalize` turns equivalent spellings into one hashable form, so
that ``Optional[int]``, ``int | None`` and ``typing.Union[int, None]`` share one codec, and
``typing.List[int]`` is ``list[int]``.
"""

from __future__ import annotations

import reprlib
import types
import typing
from typing import Any

NoneType = type(None)

_UNION_ORIGINS = (typing.Union, types.UnionType)
_CONTAINER_ALIASES = {typing.List: list, typing.Dict: dict, typing.Tuple: tuple}  # noqa: UP006


class TypeFormError(TypeError):
    """A declared type is not a type form Durable understands (internal)."""


def normalize(tp: Any) -> Any:
    """Return the canonical form of a declared type.

    ``None`` becomes ``NoneType``; ``Annotated`` metadata and ``NewType`` wrappers are dropped
    (their underlying type is what gets stored); unions are flattened and deduplicated;
    ``typing.List``/``Dict``/``Tuple`` become ``list``/``dict``/``tuple``. Unknown forms are
    returned unchanged (lookup then reports that no codec serves them).
    """
    if type(tp) is type and not hasattr(tp, "__supertype__"):
        return tp  # a plain class is its own normal form: the common case, answered at once
    if tp is None:
        return NoneType
    if tp in _CONTAINER_ALIASES:
        return _CONTAINER_ALIASES[tp]
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None and callable(tp):  # typing.NewType
        return normalize(supertype)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return normalize(args[0])
    if origin in _UNION_ORIGINS:
        members: list[Any] = []
        for arg in args:
            norm = normalize(arg)
            inner = norm_union_members(norm)
            for member in inner:
                if member not in members:
                    members.append(member)
        if len(members) == 1:
            return members[0]
        return typing.Union[tuple(members)]  # noqa: UP007 - built from a runtime tuple
    if origin is list and args:
        return list[normalize(args[0])]
    if origin is dict and len(args) == 2:
        return dict[normalize(args[0]), normalize(args[1])]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple[normalize(args[0]), ...]
        if not args:
            return tuple[()]
        return tuple[tuple(normalize(a) for a in args)]
    return tp


def norm_union_members(tp: Any) -> tuple[Any, ...]:
    """The members of a normalised union, or ``(tp,)`` for anything else."""
    if typing.get_origin(tp) in _UNION_ORIGINS:
        return typing.get_args(tp)
    return (tp,)


def is_union(tp: Any) -> bool:
    """True for a (normalised) union form, including ``T | None``."""
    return typing.get_origin(tp) in _UNION_ORIGINS


def type_name(tp: Any) -> str:
    """A readable name of a type or type form: ``int``, ``None``, ``myapp.models.Invoice``,
    ``list[str]``, ``dict[str, int]``, ``tuple[int, ...]``, ``int | None``."""
    if tp is NoneType or tp is None:
        return "None"
    if tp is typing.Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in _UNION_ORIGINS:
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        if origin is tuple and not args:
            return "tuple[()]"
        base = type_name(origin)
        if args:
            return f"{base}[{', '.join(type_name(a) for a in args)}]"
        return base
    if isinstance(tp, type):
        if tp.__module__ == "builtins":
            return tp.__qualname__
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


class _ShortRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # more digits than int -> str may convert
            return f"<an int of {x.bit_length()} bits>"


_short = _ShortRepr()
_short.maxstring = 40
_short.maxother = 40
_short.maxlist = 4
_short.maxdict = 4
_short.maxtuple = 4
_short.maxlevel = 2


def describe_value(value: Any) -> str:
    """``int 5``, ``str 'abc'``, ``function <function f at 0x…>``: the type and a short repr."""
    return f"{type_name(type(value))} {_short.repr(value)}"


def mismatch_text(expected: Any, value: Any) -> str:
    """``expected int, found str 'x'``, with a hint for the bool/int/float confusions and for
    subclasses (which JSON containers cannot tag)."""
    hint = ""
    if expected in (int, float) and type(value) is bool:
        hint = f" (a bool is not {'an int' if expected is int else 'a float'} for Durable)"
    elif isinstance(expected, type) and type(value) is not expected and isinstance(value, expected):
        hint = (
            f" (a subclass of {type_name(expected)}: inside a JSON value only the exact class "
            "is stored, since no type tag is written; declare the subclass or register a "
            "custom codec)"
        )
    return f"expected {type_name(expected)}, found {describe_value(value)}{hint}"


_EXACT_SCALARS = frozenset({bool, int, float, str, bytes, NoneType})


class InstanceMismatch(Exception):
    """``value`` is not an instance of a type form (internal; carries the path)."""

    def __init__(self, problem: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path


def check_instance(value: Any, tp: Any, path: tuple[str, ...] = ()) -> None:
    """Check that ``value`` is an instance of the normalised type form ``tp``, deeply.

    ``bool`` is not accepted for ``int`` or ``float`` (Durable stores them as different
    types); an ``int`` is accepted for ``float`` (the float codec stores it as a float).
    ``Any`` and ``object`` accept everything; forms this module cannot check (protocols
    without runtime support, type variables) are accepted.

    Raises:
        InstanceMismatch: with the path to the first element that does not fit.
    """
    if tp is typing.Any or tp is object:
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in _UNION_ORIGINS:
        for member in args:
            try:
                check_instance(value, member, path)
            except InstanceMismatch:
                continue
            return
        raise InstanceMismatch(f"expected {type_name(tp)}, found {describe_value(value)}", path)
    if origin is list:
        if not isinstance(value, list):
            raise InstanceMismatch(f"expected {type_name(tp)}, found {describe_value(value)}", path)
        if args[0] in _EXACT_SCALARS and all(type(item) is args[0] for item in value):
            return  # one pass for the common list of scalars
        for i, item in enumerate(value):
            check_instance(item, args[0], (*path, f"[{i}]"))
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise InstanceMismatch(f"expected {type_name(tp)}, found {describe_value(value)}", path)
        for k, v in value.items():
            check_instance(k, args[0], (*path, f"[{k!r}] (key)"))
            check_instance(v, args[1], (*path, f"[{k!r}]"))
        return
    if origin is tuple:
        if not isinstance(value, tuple):
            raise InstanceMismatch(f"expected {type_name(tp)}, found {describe_value(value)}", path)
        if len(args) == 2 and args[1] is Ellipsis:
            items = [(i, item, args[0]) for i, item in enumerate(value)]
        else:
            if len(value) != len(args):
                raise InstanceMismatch(
                    f"expected {type_name(tp)} ({len(args)} items), found a tuple of "
                    f"{len(value)} items",
                    path,
                )
            items = [(i, item, a) for i, (item, a) in enumerate(zip(value, args, strict=True))]
        for i, item, a in items:
            check_instance(item, a, (*path, f"[{i}]"))
        return
    if origin is not None:
        tp = origin
    if not isinstance(tp, type):
        return
    if tp is int and type(value) is bool:
        raise InstanceMismatch(mismatch_text(int, value), path)
    if tp is float and type(value) is int:
        return
    try:
        ok = isinstance(value, tp)
    except TypeError:  # e.g. a Protocol without @runtime_checkable
        return
    if not ok:
        raise InstanceMismatch(mismatch_text(tp, value), path)


def admits(declared: Any, actual: type) -> bool:
    """True when a value whose class is ``actual`` may stand behind the declared type form.

    Used to accept a stored value encoded with the codec of its actual class (a subclass of a
    declared class, a member of a declared union, anything behind ``object``/``Any``).
    """
    if declared is typing.Any or declared is object:
        return True
    if is_union(declared):
        return any(admits(m, actual) for m in typing.get_args(declared))
    if not isinstance(declared, type) or not isinstance(actual, type):
        return declared == actual
    if declared is int and actual is bool:
        return False
    return issubclass(actual, declared)


def format_path(path: tuple[str, ...]) -> str:
    """``("items", "[3]", ".name")`` -> ``items[3].name``; the empty path is ``the top level``."""
    if not path:
        return "the top level"
    text = "".join(path)
    return text[1:] if text.startswith(".") else text
