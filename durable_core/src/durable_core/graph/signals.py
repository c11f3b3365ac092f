"""The engine's own control flow between the scheduler, its checkpointer calls and the stream
ends (G-12): :class:`RunAborted`, :func:`settle`, :func:`direct_call` and :func:`eager_call`.

A checkpointer call that raises stops the whole run; whoever made the call raises
:class:`RunAborted`, which unwinds the scheduler without treating anything as a node failure. A
call in progress is never canceled: :func:`settle` waits for a future through cancellations.
This module imports only the standard library, so every module of the engine may use it (the
stream ends and processor nodes, which the checkpointer-call guard itself imports, included).
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["Abortable", "NodeCall", "RunAborted", "direct_call", "eager_call", "settle"]

T = TypeVar("T")


class RunAborted(BaseException):
    """A checkpointer call failed: unwind without treating anything as a node failure."""


class Abortable(Protocol):
    """A run that a failed checkpointer call stops (the engine's run, a ``CheckpointCalls``)."""

    @property
    def aborted(self) -> bool:
        """True once a call failed: no further calls are made."""
        ...

    def abort(self, error: BaseException) -> None:
        """Stop the run with ``error`` (the first one counts)."""
        ...


async def settle(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancellations arrive meanwhile."""
    while not future.done():
        with contextlib.suppress(BaseException):
            await asyncio.shield(future)


class NodeCall(Protocol):
    """The part of a node's run flagged while a checkpointer call of that node is in progress."""

    in_call: bool
    cancel_pending: bool


async def direct_call(
    run: Abortable, coroutine: Coroutine[Any, Any, T], nr: NodeCall | None = None
) -> T:
    """Await a checkpointer call in the caller's task (no task of its own), for calls that
    answer at once or only queue a save; a failure stops the run, like any checkpointer call.

    With ``nr`` (a node's call outside its aspect chain), ``nr.in_call`` is true during the
    call: a scope's ``cancel_all`` then sets ``nr.cancel_pending`` instead of canceling the
    node, and the node is canceled here once the call has returned.

    Raises:
        RunAborted: the run was already stopped (the call is not made), or the call raised
            (the run is stopped with its error, the cause of this one).
        asyncio.CancelledError: ``nr`` was canceled during the call.
    """
    if run.aborted:
        coroutine.close()
        raise RunAborted
    if nr is None:
        try:
            return await coroutine
        except Exception as error:
            run.abort(error)
            raise RunAborted from error
    nr.in_call = True
    try:
        result = await coroutine
    except Exception as error:
        run.abort(error)
        raise RunAborted from error
    finally:
        nr.in_call = False
    if nr.cancel_pending:  # the node was canceled during the call
        nr.cancel_pending = False
        raise asyncio.CancelledError()
    return result


def eager_call(run: Abortable, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    """:func:`direct_call` without a task when the call does not wait: run ``coroutine`` at
    once; a call that returns without suspending (the durable checkpointer's per-element
    calls, which only queue a save) answers with a finished future, and one that suspends
    goes on in a task of its own, as it would have from the start.

    Returns:
        A future of the call's result; its exception is ``RunAborted`` when the run was
        already stopped or the call raised (the run is then stopped with that error).
    """
    loop = asyncio.get_running_loop()
    if run.aborted:
        coroutine.close()
        future = loop.create_future()
        future.set_exception(RunAborted())
        return future
    try:
        yielded = coroutine.send(None)
    except StopIteration as stop:
        future = loop.create_future()
        future.set_result(stop.value)
        return future
    except Exception as error:
        run.abort(error)
        future = loop.create_future()
        aborted = RunAborted()
        aborted.__cause__ = error
        future.set_exception(aborted)
        return future
    return asyncio.ensure_future(_finish(run, coroutine, yielded))


async def _finish(run: Abortable, coroutine: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    try:
        return await _resume(coroutine, yielded)
    except Exception as error:
        run.abort(error)
        raise RunAborted from error


@types.coroutine
def _resume(coroutine: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    # The rest of a coroutine that already ran up to its first suspension (``yielded``): what
    # the task sends or throws in goes on to it, as if the task had driven it from the start.
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # everything the task throws goes on
            try:
                yielded = coroutine.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coroutine.send(sent)
            except StopIteration as stop:
                return stop.value
