"""The engine's own control flow between the scheduler, its checkpointer calls and the stream
ends (G-12): :class:`RunAborted`, :func:`settle` and :func:`direct_call`.

A checkpointer call that raises stops the whole run; whoever made the call raises
:class:`RunAborted`, which unwinds the scheduler without treating anything as a node failure. A
call in progress is never canceled: :func:`settle` waits for a future through cancellations.
This module imports only the standard library, so every module of the engine may use it (the
stream ends and processor nodes, which the checkpointer-call guard itself imports, included).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["Abortable", "RunAborted", "direct_call", "settle"]

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


async def direct_call(run: Abortable, coroutine: Coroutine[Any, Any, T]) -> T:
    """Await a checkpointer call in the caller's task (no task of its own), for calls that
    answer at once or only queue a save; a failure stops the run, like any checkpointer call.

    Raises:
        RunAborted: the run was already stopped (the call is not made), or the call raised
            (the run is stopped with its error, the cause of this one).
    """
    if run.aborted:
        coroutine.close()
        raise RunAborted
    try:
        return await coroutine
    except Exception as error:
        run.abort(error)
        raise RunAborted from error
