"""The function form of a node body: inputs as parameters, outputs as the return value.

A node declared with ``executor=`` (``"default"``: the run's executor; ``"local"``: always the
owner's worker threads) has a plain function as its body. It is called with the values of its
``requires``, positionally in declared order, and returns its ``provides``:

* no provided key: return None;
* one provided key: return its value (or :data:`SKIP` to skip it);
* several: return a tuple (or list) with one value per provided key, in declared order; an
  element may be :data:`SKIP`.

Raising :class:`~durable_core.graph.SkipNode` skips the whole node. A required key that was
skipped is passed as the parameter's default value when the parameter has one; without a
default, the try fails with :class:`~durable_core.errors.SlotError` (as ``rc.get(key)`` would).
When every required key was skipped the node is skipped without running (as for any node).
The owner checks every returned value against its key's declared type.

A function-form body does not see the run context: it cannot use streams, and it can travel to
another process (see :mod:`durable_core.executors`).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from durable_core.errors import GraphError, SlotError
from durable_core.graph.checkpoint import read_slot
from durable_core.graph.keys import Key

__all__ = ["EXECUTOR_CHOICES", "SKIP", "analyse_function", "call_args", "function_outputs"]

EXECUTOR_CHOICES = ("default", "local")
"""What a function-form node may name as its executor."""

_NO_DEFAULT: Any = inspect.Parameter.empty


class _Skip(enum.Enum):
    SKIP = "SKIP"

    def __repr__(self) -> str:
        return "SKIP"


SKIP = _Skip.SKIP
"""Return this (alone, or as one element of the tuple) to skip a provided key."""


def analyse_function(
    where: str,
    body: Callable[..., Any],
    executor: object,
    requires: tuple[Key[Any], ...],
    provides: tuple[Key[Any], ...],
) -> tuple[Any, ...]:
    """Check a function-form body at assembly; return the default of each positional input
    (``inspect.Parameter.empty`` where there is none).

    Raises:
        GraphError: an unknown executor name, an ``async def`` body, a stream key, or a
            signature that does not take one positional argument per required key.
    """
    if executor not in EXECUTOR_CHOICES:
        raise GraphError(
            f"{where}: executor must be one of {list(EXECUTOR_CHOICES)} ('default': the "
            f"run's executor; 'local': the owner's worker threads), got {executor!r}"
        )
    if inspect.iscoroutinefunction(body) or inspect.iscoroutinefunction(
        getattr(body, "__call__", None)  # noqa: B004
    ):
        raise GraphError(
            f"{where}: a function-form body (executor={executor!r}) must be a plain def; an "
            "async body takes the run context instead: drop executor= and write "
            "async def body(rc)"
        )
    streams = [key.name for key in (*requires, *provides) if key.stream]
    if streams:
        raise GraphError(
            f"{where}: a function-form body (executor={executor!r}) cannot use stream keys "
            f"{streams}; streams need the run context: drop executor= and write body(rc)"
        )
    try:
        signature = inspect.signature(body)
    except (TypeError, ValueError):  # builtins without a signature: trust the declaration
        return (_NO_DEFAULT,) * len(requires)
    names = [key.name for key in requires]
    try:
        bound = signature.bind(*names)
    except TypeError as exc:
        raise GraphError(
            f"{where}: its body {getattr(body, '__qualname__', body)!r}{signature} must take "
            f"one positional argument per required key, in declared order ({names}): {exc}"
        ) from None
    defaults: list[Any] = []
    for name, _ in bound.arguments.items():
        parameter = signature.parameters[name]
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            defaults.extend([_NO_DEFAULT] * (len(requires) - len(defaults)))
            break
        defaults.append(parameter.default)
    return tuple(defaults)


def call_args(
    path: str,
    requires: tuple[Key[Any], ...],
    defaults: tuple[Any, ...],
    ready: Mapping[str, Any],
) -> list[Any]:
    """The positional arguments of a function-form body.

    Raises:
        SlotError: a required key was skipped and its parameter has no default.
    """
    args = []
    for key, default in zip(requires, defaults, strict=True):
        if key.name in ready:
            args.append(read_slot(ready[key.name]))  # a private copy where the slot says so
        elif default is not _NO_DEFAULT:
            args.append(default)
        else:
            raise SlotError(
                f"node {path!r}: required key {key.name!r} was skipped and the body's parameter "
                "for it has no default; give that parameter a default value"
            )
    return args


def function_outputs(
    path: str, provides: tuple[Key[Any], ...], returned: Any
) -> tuple[dict[str, Any], list[str]]:
    """Map a function-form body's return value to ready and skipped provided keys.

    Raises:
        SlotError: the shape of the return value does not match ``provides``, or a value is
            not of its key's declared type.
    """
    count = len(provides)
    if count == 0:
        if returned is not None:
            raise SlotError(
                f"node {path!r}: its body returned {type(returned).__name__} {returned!r:.80} "
                "but the node provides no key; return None"
            )
        return {}, []
    if count == 1:
        values: Any = (returned,)
    elif isinstance(returned, (tuple, list)) and len(returned) == count:
        values = returned
    else:
        raise SlotError(
            f"node {path!r}: its body must return a tuple of {count} values, one per provided "
            f"key {[key.name for key in provides]}, got {type(returned).__name__} "
            f"{returned!r:.80}"
        )
    ready: dict[str, Any] = {}
    skipped: list[str] = []
    for key, value in zip(provides, values, strict=True):
        if value is SKIP:
            skipped.append(key.name)
        elif key.accepts(value):
            ready[key.name] = value
        else:
            raise SlotError(
                f"node {path!r}: key {key.name!r} takes {key!r} values, its body returned "
                f"{type(value).__name__} {value!r:.80}"
            )
    return ready, skipped
