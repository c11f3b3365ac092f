"""Keys: the typed names of slots (G-1).

A :class:`Key` names one slot of a graph and declares the Python type of what it carries. A value
key carries one value per run; a stream key (``stream=True``) carries an ordered sequence of
elements of its type (G-10). Keys compare (and hash) by name, type and kind; the stream capacity
is a tuning parameter, not part of a key's identity, but it is part of a graph's fingerprint.

Types are checked shallowly when a value is set: ``Key("n", int)`` refuses ``"3"``,
``Key("words", list[str])`` checks that the value is a ``list`` (not its elements). ``int`` is
accepted where ``float`` is declared (and ``int``/``float`` where ``complex`` is), as type
checkers do. ``typing.Any``, type variables, ``Literal`` and protocols that are not
runtime-checkable are not checked.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Generic, TypeVar

import attrs

from durable_core.errors import GraphError

__all__ = ["DEFAULT_STREAM_CAPACITY", "Key", "type_name"]

T = TypeVar("T")

DEFAULT_STREAM_CAPACITY = 16
"""Elements a stream buffers per reading group before its producer waits (G-10)."""


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise GraphError(f"a key name must be a non-empty string, got {name!r}")
    return name


@attrs.frozen(repr=False)
class Key(Generic[T]):
    """A typed slot name (G-1).

    Args:
        name: the key's name (non-empty); unique per graph: one graph never holds two different
            keys with the same name.
        type: the Python type of the value (of each element for a stream key), for example
            ``int``, ``list[str]``, ``MyRecord | None``.
        stream: True for a stream key (G-10).
        capacity: for a stream key, how many elements each reading group may buffer before the
            producer waits (back-pressure); default :data:`DEFAULT_STREAM_CAPACITY`.
        inbox: for a stream key, True when the stream is fed from outside the run: messages
            posted to the run (``Runtime.send``, ``durable send``) are its elements, taken in
            by a built-in intake node (X-INBOX-1; see :mod:`durable_core.graph.inbox`).

    Raises:
        GraphError: empty name, a ``type`` that is not a type, or a capacity on a value key / a
            capacity below 1, or ``inbox`` on a value key.

    Example:
        >>> TEXT = Key("text", str)
        >>> LINES = Key("lines", str, stream=True, capacity=64)
    """

    name: str = attrs.field(converter=_check_name)
    type: Any = attrs.field()
    stream: bool = attrs.field(default=False, kw_only=True)
    capacity: int = attrs.field(default=0, kw_only=True, eq=False)
    inbox: bool = attrs.field(default=False, kw_only=True)
    _accepts: tuple[type, ...] | None = attrs.field(init=False, eq=False, default=None)

    def __attrs_post_init__(self) -> None:
        tp = self.type
        if not (isinstance(tp, type) or tp is None or typing.get_origin(tp) is not None) and not (
            tp is Any or isinstance(tp, (TypeVar, typing.NewType))
        ):
            raise GraphError(
                f"key {self.name!r}: expected a type such as int or list[str] as its type, "
                f"got {tp!r}"
            )
        if self.stream:
            capacity = self.capacity or DEFAULT_STREAM_CAPACITY
            if not isinstance(capacity, int) or capacity < 1:
                raise GraphError(
                    f"stream key {self.name!r}: capacity must be a positive integer, "
                    f"got {self.capacity!r}"
                )
            object.__setattr__(self, "capacity", capacity)
        elif self.capacity:
            raise GraphError(
                f"key {self.name!r}: capacity only applies to stream keys (stream=True)"
            )
        if self.inbox and not self.stream:
            raise GraphError(
                f"key {self.name!r}: an inbox is a stream fed from outside; declare it with "
                "stream=True and inbox=True"
            )
        object.__setattr__(self, "_accepts", _accepted_classes(tp))

    def __repr__(self) -> str:
        kind = ", stream=True" if self.stream else ""
        if self.inbox:
            kind += ", inbox=True"
        return f"Key({self.name!r}, {type_name(self.type)}{kind})"

    def accepts(self, value: object) -> bool:
        """Return whether ``value`` may be set on this key (a shallow ``isinstance`` check)."""
        accepts = self._accepts
        return accepts is None or isinstance(value, accepts)

    def describe(self, names: dict[type, str] | None = None) -> dict[str, Any]:
        """The canonical, JSON-ready description of the key used by graph fingerprints.

        Args:
            names: the :func:`type_name` of the plain classes already named while describing
                one graph (filled in here), so that a graph of many keys of one type names
                it once.
        """
        tp = self.type
        if names is not None and type(tp) is type:
            named = names.get(tp)
            if named is None:
                named = names[tp] = type_name(tp)
        else:
            named = type_name(tp)
        description: dict[str, Any] = {"name": self.name, "type": named}
        if self.stream:
            description["stream"] = True
            description["capacity"] = self.capacity
        if self.inbox:
            description["inbox"] = True
        return description


def _accepted_classes(tp: Any) -> tuple[type, ...] | None:
    """The classes ``isinstance`` checks for ``tp``; None when the type is not checkable."""
    if tp is None or tp is type(None):
        return (type(None),)
    if tp is Any or tp is object or isinstance(tp, TypeVar):
        return None
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:  # typing.NewType
        return _accepted_classes(supertype)
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        accepted: list[type] = []
        for arg in typing.get_args(tp):
            classes = _accepted_classes(arg)
            if classes is None:
                return None
            accepted.extend(classes)
        return tuple(accepted)
    if origin is typing.Annotated:
        return _accepted_classes(typing.get_args(tp)[0])
    if origin is not None:
        return (origin,) if isinstance(origin, type) else None
    if not isinstance(tp, type):
        return None
    if getattr(tp, "_is_protocol", False) and not getattr(tp, "_is_runtime_protocol", False):
        return None
    if tp is float:
        return (float, int)
    if tp is complex:
        return (complex, float, int)
    return (tp,)


def type_name(tp: Any) -> str:
    """A canonical, process-independent name of a type, used in fingerprints.

    Classes are ``module.qualname`` (``builtins.int``); generic aliases add their arguments
    (``builtins.list[builtins.str]``); union members are sorted so ``int | str`` and
    ``str | int`` name the same type.

    Args:
        tp: a class or typing construct.

    Returns:
        The canonical name.
    """
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        return "typing.Any"
    if isinstance(tp, TypeVar):
        return f"~{tp.__name__}"
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return f"{tp.__module__}.{tp.__qualname__}"
    origin = typing.get_origin(tp)
    if origin is not None:
        args = typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return "typing.Union[" + ",".join(sorted(type_name(a) for a in args)) + "]"
        if origin is typing.Literal:
            return "typing.Literal[" + ",".join(repr(a) for a in args) + "]"
        if origin is typing.Annotated:
            return type_name(args[0])
        base = type_name(origin)
        if not args:
            return base
        return base + "[" + ",".join(_arg_name(a) for a in args) + "]"
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


def _arg_name(arg: Any) -> str:
    if arg is Ellipsis:
        return "..."
    if isinstance(arg, (list, tuple)):  # Callable[[int, str], bool]
        return "[" + ",".join(_arg_name(a) for a in arg) + "]"
    return type_name(arg)
