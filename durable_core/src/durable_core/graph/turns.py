"""Whether anything else waits to run in the event loop before its next turn: :func:`alone_in_turn`.

A durable run gathers the commits made in one turn of the event loop into one save (nodes
finishing together share it): the first commit of a turn lets the loop run what is ready before
the save starts. When nothing is ready but the engine's own bookkeeping of finished nodes, no
other commit can join, and that wait only delays the save and suspends the committing node (a
task step and a turn of the loop, a few microseconds a node). The engine hands its checkpointer
the predicate made here (``Checkpointer.watch_turns``), so that such a save can start at once.

It reads the ready queue of asyncio's own event loops (``BaseEventLoop._ready``, where they have
always kept their ready handles); on a loop without one (uvloop, another implementation) it
always answers False, and every commit waits for the turn as before.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["alone_in_turn"]


def alone_in_turn(
    loop: asyncio.AbstractEventLoop, quiet: Iterable[Callable[..., Any]]
) -> Callable[[], bool]:
    """A function that says, on ``loop``'s thread, whether every handle ready to run on
    ``loop`` is canceled or calls one of the functions ``quiet`` (bookkeeping that steps no task
    and commits nothing; a bound method counts by its function).

    Answers False when it cannot tell: ``loop`` keeps no ready queue it can read, or another
    thread added a handle while it looked.
    """
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, deque):
        return _never
    known = frozenset(quiet)

    def alone() -> bool:
        try:
            for handle in ready:
                if handle._cancelled:
                    continue
                callback = handle._callback
                if getattr(callback, "__func__", callback) not in known:
                    return False
        except RuntimeError:  # deque mutated during iteration (call_soon_threadsafe)
            return False
        return True

    return alone


def _never() -> bool:
    return False
