"""The ``thread`` executor: bodies run in the owner's worker threads (the default)."""

from __future__ import annotations

from typing import ClassVar

from durable_core.executors.base import Executor

__all__ = ["ThreadExecutor"]


class ThreadExecutor(Executor):
    """Run function-form bodies where ``def (rc)`` bodies run: in the run's pool of
    ``max_running`` worker threads, in the owner process.

    Nothing is pickled: the body receives the very input objects, and returns its outputs
    directly. This is what every run does when no executor is given. It suits I/O-bound bodies
    and bodies that release the GIL (NumPy, compression, hashing); CPU-bound pure-Python bodies
    share one core (use :class:`~durable_core.executors.ProcessExecutor`). It takes no options.
    """

    name: ClassVar[str] = "thread"
    local: ClassVar[bool] = True
