"""Pausing Python's cyclic garbage collector while a large acyclic structure is built.

The collector runs whenever enough new container objects exist; building a record of 30,000
objects starts it many times, and each full collection walks every live object, so the time
grows with everything the process holds. Building a record makes no reference cycles, so
nothing is lost by pausing the collector until it is built (Mercurial's ``util.nogc`` does the
same for the same reason). The collector's state is process-wide: a thread that disables it
meanwhile finds it enabled again when the build ends.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["nogc"]

P = ParamSpec("P")
R = TypeVar("R")


def nogc(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` with the cyclic garbage collector paused while it runs (if it was enabled)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper
