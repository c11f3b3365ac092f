"""How a function-form body and its values cross to a worker and back.

The owner pickles the body once per run and node (:func:`dump_body`) and each input value when
the node is about to run (:func:`dump_inputs`), so that what cannot travel is reported naming
the node and the key before anything is submitted. A worker runs :func:`run_call`: it loads the
body and the inputs, calls the body, and pickles the return value itself, so that a value that
cannot come back is reported naming the node too. An exception of the body keeps its type and
message when it pickles; one that does not is replaced by
:class:`~durable_core.errors.RemoteBodyError` naming the original type.

Values travel pickled, never encoded by the run's codecs: only the owner encodes values, when it
commits them.
"""

from __future__ import annotations

import enum
import pickle
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from durable_core._words import a
from durable_core.errors import NotPicklableError, RemoteBodyError
from durable_core.outcomes import SkipNode

__all__ = ["NODE_SKIPPED", "RemoteCall", "dump_body", "dump_inputs", "load_result", "run_call"]

_LOCAL_HINT = (
    "define it at module level (a worker imports it by name), or declare the node with "
    "executor='local' to keep it in the owner process"
)


class _Signal(enum.Enum):
    NODE_SKIPPED = "node skipped"


NODE_SKIPPED = _Signal.NODE_SKIPPED
"""What :func:`run_call` returns (pickled) when the body raised ``SkipNode``."""


@attrs.frozen
class RemoteCall:
    """One body call for a worker: everything pickled, nothing else needed.

    Attributes:
        path: the node's path (for error messages).
        body: the pickled body (a function taking the inputs positionally).
        args: each input value, pickled, in ``requires`` order.
        provides: the provided key names (for error messages).
        cloudpickle: pickle the return value with cloudpickle (Dask) instead of pickle.
    """

    path: str
    body: bytes
    args: tuple[bytes, ...]
    provides: tuple[str, ...] = ()
    cloudpickle: bool = False


def _problem(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def dump_body(dumps: Callable[[object], bytes], where: str, body: object, executor: str) -> bytes:
    """Pickle ``body`` with ``dumps``; ``where`` names the node (``"graph 'g', node 'n'"``).

    Raises:
        NotPicklableError: the body cannot be pickled; names the node and the executor.
    """
    try:
        return dumps(body)
    except Exception as exc:
        raise NotPicklableError(
            f"{where}: its body {getattr(body, '__qualname__', repr(body))} cannot be "
            f"sent to the {executor!r} executor ({_problem(exc)}); {_LOCAL_HINT}"
        ) from exc


def dump_inputs(
    dumps: Callable[[object], bytes], path: str, names: Sequence[str], values: Sequence[Any]
) -> tuple[bytes, ...]:
    """Pickle each input value with ``dumps``.

    Raises:
        NotPicklableError: a value cannot be pickled; names the node and the key.
    """
    out = []
    for name, value in zip(names, values, strict=True):
        try:
            out.append(dumps(value))
        except Exception as exc:
            raise NotPicklableError(
                f"node {path!r}: the value of its input {name!r} ({a(type(value).__name__)}) "
                f"cannot be pickled for the worker ({_problem(exc)}); make it picklable, or "
                "declare the node with executor='local'"
            ) from exc
    return tuple(out)


def load_result(path: str, data: bytes) -> Any:
    """Unpickle what :func:`run_call` returned, in the owner.

    Raises:
        NotPicklableError: the owner cannot load it (a class it cannot import).
    """
    try:
        return pickle.loads(data)
    except Exception as exc:
        raise NotPicklableError(
            f"node {path!r}: the value its body returned cannot be loaded in the owner process "
            f"({_problem(exc)}); its classes must be importable where the run is owned"
        ) from exc


def run_call(call: RemoteCall) -> bytes:
    """Run one body call in a worker and return its pickled return value.

    Raises:
        NotPicklableError: the body or an input cannot be loaded here, or the return value
            cannot be pickled.
        BaseException: the body's own exception (type and message kept), or a
            :class:`RemoteBodyError` standing in for one that does not pickle.
    """
    try:
        body = pickle.loads(call.body)
    except Exception as exc:
        raise NotPicklableError(
            f"node {call.path!r}: its body cannot be loaded in the worker ({_problem(exc)}); "
            "the worker must be able to import the body's module"
        ) from None
    args = []
    for index, data in enumerate(call.args):
        try:
            args.append(pickle.loads(data))
        except Exception as exc:
            raise NotPicklableError(
                f"node {call.path!r}: input number {index + 1} cannot be loaded in the worker "
                f"({_problem(exc)}); its class must be importable there"
            ) from None
    try:
        returned = body(*args)
    except SkipNode:
        # Sent back as a value: some clusters only ship exceptions derived from Exception.
        returned = NODE_SKIPPED
    except Exception as exc:
        raise _portable(call.path, exc) from None
    try:
        if call.cloudpickle:
            import cloudpickle

            return cloudpickle.dumps(returned, protocol=pickle.HIGHEST_PROTOCOL)
        return pickle.dumps(returned, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        keys = ", ".join(repr(n) for n in call.provides) or "none"
        raise NotPicklableError(
            f"node {call.path!r}: the value its body returned ({a(type(returned).__name__)}, "
            f"for provided keys {keys}) cannot be pickled back to the owner ({_problem(exc)})"
        ) from None


def _portable(path: str, exc: BaseException) -> BaseException:
    """``exc`` when it survives a pickle round trip, else a RemoteBodyError describing it."""
    try:
        copy = pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        if type(copy) is type(exc) and str(copy) == str(exc):
            return exc
        problem = f"it comes back as {type(copy).__name__}: {copy}"
    except Exception as pickling:
        problem = _problem(pickling)
    kind = type(exc)
    type_name = f"{kind.__module__}.{kind.__qualname__}"
    error = RemoteBodyError(
        f"node {path!r}: its body raised {type_name}: {exc} (the exception cannot be pickled "
        f"back to the owner: {problem}). Remote traceback:\n"
        + "".join(traceback.format_exception(exc)),
        type_name,
    )
    return error
