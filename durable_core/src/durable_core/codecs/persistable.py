"""Values that can never be persisted (SPEC C-3).

A callable, a generator or coroutine, a lock, an open file, a socket or a module has no
meaning outside the process that holds it. :func:`find_unpersistable` walks a value — through
lists, tuples, sets, dicts (keys and values), attrs instances and dataclass instances — and
reports the first such object with its path, whatever type the key declares (the value may
hide behind ``object``, ``Any`` or ``list[object]``).
"""

from __future__ import annotations

import abc
import asyncio
import collections.abc
import dataclasses
import inspect
import io
import socket
import threading
import types
from typing import Any, NamedTuple

import attrs

_LOCK_TYPES: tuple[type, ...] = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
    threading.Event,
    threading.Barrier,
    asyncio.Lock,
    asyncio.Semaphore,
    asyncio.Condition,
    asyncio.Event,
)

_SCALARS = (bool, int, float, str, bytes, type(None))
_PLAIN_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


# What _kind_of_type says about each type seen, valid while the ABC registry's token is
# unchanged (a later ``register()`` on any ABC may change what ``isinstance`` answers). Every
# test in _kind_of_type depends on the value's type only, except for an object whose
# ``__class__`` is not its type (a proxy: ``isinstance`` also asks ``__class__``), which is
# never looked up or kept here. Bounded: cleared when it grows large.
_KIND_BY_TYPE: dict[type, str | None] = {}
_KIND_TOKEN: list[object] = [abc.get_cache_token()]
_KIND_CACHE_LIMIT = 4096


def _kind(value: Any) -> str | None:
    """What makes ``value`` impossible to persist, or ``None`` when nothing does."""
    cls = type(value)
    if value.__class__ is not cls:
        return _kind_of_type(value)
    token = abc.get_cache_token()
    if _KIND_TOKEN[0] != token:
        _KIND_BY_TYPE.clear()
        _KIND_TOKEN[0] = token
    try:
        return _KIND_BY_TYPE[cls]
    except KeyError:
        pass
    kind = _kind_of_type(value)
    if len(_KIND_BY_TYPE) >= _KIND_CACHE_LIMIT:
        _KIND_BY_TYPE.clear()
    # kept only if no ABC registration happened while it was worked out (another thread's)
    if abc.get_cache_token() == token == _KIND_TOKEN[0]:
        _KIND_BY_TYPE[cls] = kind
    return kind


def _kind_of_type(value: Any) -> str | None:
    """What makes ``value`` impossible to persist, found from its type alone."""
    if isinstance(value, _SCALARS) or type(value) in _PLAIN_CONTAINERS:
        return None
    if isinstance(value, types.ModuleType):
        return "a module"
    if inspect.isgenerator(value) or isinstance(value, collections.abc.Generator):
        return "a generator"
    if inspect.iscoroutine(value) or isinstance(value, collections.abc.Coroutine):
        return "a coroutine"
    if inspect.isasyncgen(value) or isinstance(value, collections.abc.AsyncGenerator):
        return "an async generator"
    if isinstance(value, _LOCK_TYPES):
        return "a lock"
    if isinstance(value, threading.Thread):
        return "a thread"
    if isinstance(value, io.IOBase):
        return "an open file"
    if isinstance(value, socket.socket):
        return "a socket"
    if isinstance(value, types.FrameType | types.TracebackType):
        return "a stack frame"
    if isinstance(value, type):
        return "a class object"
    if inspect.isroutine(value) or isinstance(value, types.MethodType):
        return "a function"
    if callable(value) and not (attrs.has(type(value)) or dataclasses.is_dataclass(value)):
        return "a callable object"
    if isinstance(value, collections.abc.Iterator):
        return "an iterator"
    return None


_ADVICE = {
    "a module": "store the data it provides instead",
    "a generator": "store list(...) of what it yields instead",
    "a coroutine": "await it and store its result instead",
    "an async generator": "collect what it yields into a list and store that instead",
    "a lock": "locks belong to one process; keep them out of stored values",
    "a thread": "threads belong to one process; store what the thread produced instead",
    "an open file": "store the file's path or its contents (bytes/str) instead",
    "a socket": "store the address or the data received instead",
    "a stack frame": "store a description (str) instead",
    "a class object": "store a name (str) and look the class up again instead",
    "a function": "store a name (str) and look the function up again, or store its result",
    "a callable object": "store the data it holds instead",
    "an iterator": "store list(...) of its items instead",
}


class Unpersistable(NamedTuple):
    """The first part of a value that can never be persisted."""

    path: tuple[str, ...]
    """Segments of the path inside the value: ``("items", "[3]", ".handler")``."""
    kind: str
    """What it is: ``"a function"``, ``"a lock"``, ``"a reference cycle"`` …"""
    advice: str
    """What to store instead."""
    obj: Any
    """The offending object itself."""


def find_unpersistable(value: Any) -> Unpersistable | None:
    """Find the first part of ``value`` that can never be persisted (C-3).

    Args:
        value: any value about to be encoded.

    Returns:
        The first offending part, or ``None`` when every part may be persisted (whether a codec
        serves it is decided later). A reference cycle is reported as kind
        ``"a reference cycle"``.
    """
    # Iterative walk: deeply nested values must not hit the interpreter's recursion limit.
    # Paths are kept as links to the parent and only spelled out for the part reported.
    stack: list[tuple[Any, _Where, bool]] = [(value, None, False)]
    active: set[int] = set()
    while stack:
        item, where, leaving = stack.pop()
        if leaving:
            active.discard(id(item))
            continue
        kind = _kind(item)
        if kind is not None:
            return Unpersistable(_spell(where), kind, _ADVICE[kind], item)
        children = _children(item, where)
        if children is None:
            continue
        if id(item) in active:
            return Unpersistable(
                _spell(where),
                "a reference cycle",
                "a value that contains itself cannot be stored; break the cycle",
                item,
            )
        active.add(id(item))
        stack.append((item, where, True))
        stack.extend(reversed(children))
    return None


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}
"""The field names of each attrs or dataclass class met (``None``: neither); a class's fields
are fixed once it is made. Bounded: cleared when it grows large."""
_UNKNOWN: Any = object()


def _field_names(cls: type) -> tuple[str, ...] | None:
    if attrs.has(cls):
        names: tuple[str, ...] | None = tuple(a.name for a in attrs.fields(cls))
    elif dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls))
    else:
        names = None
    if len(_FIELD_NAMES) >= _KIND_CACHE_LIMIT:
        _FIELD_NAMES.clear()
    _FIELD_NAMES[cls] = names
    return names


# (parent, how, key): how is "[]" (index), "[k]" (dict value), "key" (dict key), "." (field),
# "{}" (set member).
_Where = tuple[Any, str, Any] | None


def _spell(where: _Where) -> tuple[str, ...]:
    segments: list[str] = []
    while where is not None:
        where, how, key = where
        if how == "[]":
            segments.append(f"[{key}]")
        elif how == "[k]":
            segments.append(f"[{key!r}]")
        elif how == "key":
            segments.append(f"[{key!r}] (key)")
        elif how == ".":
            segments.append(f".{key}")
        else:
            segments.append("{…}")
    return tuple(reversed(segments))


def _children(item: Any, where: _Where) -> list[tuple[Any, _Where, bool]] | None:
    # Scalars are skipped here already: large lists of numbers or strings are the common case.
    if isinstance(item, _SCALARS):
        return None
    if isinstance(item, list | tuple):
        return [
            (v, (where, "[]", i), False) for i, v in enumerate(item) if not isinstance(v, _SCALARS)
        ]
    if isinstance(item, dict):
        out: list[tuple[Any, _Where, bool]] = []
        for k, v in item.items():
            if not isinstance(k, _SCALARS):
                out.append((k, (where, "key", k), False))
            if not isinstance(v, _SCALARS):
                out.append((v, (where, "[k]", k), False))
        return out
    if isinstance(item, set | frozenset):
        return [(v, (where, "{}", None), False) for v in item if not isinstance(v, _SCALARS)]
    cls = type(item)
    names = _FIELD_NAMES.get(cls, _UNKNOWN)
    if names is _UNKNOWN:
        names = _field_names(cls)
    if names is None:
        return None
    out = []
    for name in names:
        v = getattr(item, name, None)
        if not isinstance(v, _SCALARS):
            out.append((v, (where, ".", name), False))
    return out
