"""Whether anything else waits to run in the event loop before its next turn: :func:`alone_in_turn`.

A durable run gathers the commits made in one turn of the event loop into one save (nodes
finishing together share it): the first commit of a turn lets the loop run what is ready before
the save starts. When nothing is ready but handles that cannot commit anything, no other commit
can join, and that wait only delays the save and suspends the committing node (a task step and
a turn of the loop, a few microseconds a node). The engine hands its checkpointer the predicate
made here (``Checkpointer.watch_turns``), so that such a save can start at once.

The engine counts the handles it queued that cannot commit: the first steps of node tasks whose
inputs are not all there yet (such a step only starts to wait for them) and the done callbacks
of node tasks that ended. When the loop's ready queue holds no more handles than that count,
nothing else is ready. So a chain whose nodes all start at once, and each wait for the one
before, confirms its nodes one after another without a turn of the loop between them, as the
engine alone runs them.

It reads the length of the ready queue of asyncio's own event loops (``BaseEventLoop._ready``,
where they have always kept their ready handles); on a loop without one (uvloop, another
implementation) it always answers False, and every commit waits for the turn as before.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["alone_in_turn"]


def alone_in_turn(loop: asyncio.AbstractEventLoop, quiet: Callable[[], int]) -> Callable[[], bool]:
    """A function that says, on ``loop``'s thread, whether nothing but quiet handles is ready
    to run on ``loop``: its ready queue holds at most ``quiet()`` handles.

    ``quiet()`` counts the queued handles known to commit nothing when they run. A count that
    is too low only makes the answer False more often (a commit then waits for the turn, as it
    would without this); a count too high would let a save start before a commit ready in the
    same turn could join it, which costs that commit a save of its own, nothing else.

    Answers False when it cannot tell: ``loop`` keeps no ready queue it can read.
    """
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, deque):
        return _never

    def alone() -> bool:
        return len(ready) <= quiet()

    return alone


def _never() -> bool:
    return False
