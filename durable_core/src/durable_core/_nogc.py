"""Pausing Python's cyclic garbage collector while a large acyclic structure is built.

The collector runs whenever enough new container objects exist; building a record of 30,000
objects starts it many times, and each full collection walks every live object, so the time
grows with everything the process holds. Building a record makes no reference cycles, so
nothing is lost by pausing the collector until it is built (Mercurial's ``util.nogc`` does the
same for the same reason). The collector's state is process-wide: a thread that disables it
meanwhile finds it enabled again when the build ends.

Pausing alone only defers the work: every object made meanwhile is still young, and the first
collections after the pause walk them all, twice (9 ms of a 10,000-node resume). So a pause
that made :data:`LARGE` young objects or more ends by moving the young objects to the oldest
generation (``gc.freeze()`` then ``gc.unfreeze()``: the lists are spliced, not walked). Objects
moved so skip the collector's count of survivors, which is what starts a full collection; so
that cycles moved with them (a pause may move another part of the program's young garbage) are
freed all the same, a full collection runs once :data:`FULL_AFTER` objects were moved since the
last one. A process that keeps objects frozen itself (``gc.get_freeze_count()`` above zero, say
before ``fork``) keeps them frozen: its pauses end without the move.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["nogc"]

P = ParamSpec("P")
R = TypeVar("R")

LARGE = 10_000
"""Young objects a pause must have made for its end to move them to the oldest generation."""

FULL_AFTER = 2_000_000
"""Objects moved to the oldest generation after which a full collection runs."""

_moved = [0]  # objects moved since the last full collection a pause ran


def nogc(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` with the cyclic garbage collector paused while it runs (if it was enabled); a
    run that made :data:`LARGE` objects or more leaves them in the oldest generation."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            young = gc.get_count()[0]
            if young >= LARGE and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
                _moved[0] += young
                if _moved[0] >= FULL_AFTER:
                    _moved[0] = 0
                    gc.collect()
            gc.enable()

    return wrapper
