"""The worker threads of one run's plain bodies (G-6): a queue in, the event loop out.

A plain ``def`` body runs in a worker thread; its outcome comes back to the event loop with one
``call_soon_threadsafe``. This is what ``loop.run_in_executor`` does too, minus the two futures
it chains per call (a ``concurrent.futures.Future`` wrapped in an ``asyncio.Future``), which
cost more than a trivial body itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["BodyThreads"]

Done = Callable[[Any, BaseException | None], None]


class BodyThreads:
    """At most ``size`` worker threads (``durable-node-N``), started when needed.

    Args:
        loop: the event loop that receives each outcome.
        size: the most threads (the run's ``max_running``).
        name: the threads' names are ``{name}-N``.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, size: int, name: str = "durable-node"
    ) -> None:
        self._loop = loop
        self._size = size
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []

    def submit(self, body: Callable[..., Any], args: tuple[Any, ...], done: Done) -> None:
        """Run ``body(*args)`` in a worker thread, in a copy of the caller's context; then call
        ``done(result, None)`` or ``done(None, error)`` on the event loop (not at all when the
        loop is closed by then)."""
        self._jobs.put((contextvars.copy_context(), body, args, done))
        if self._idle.acquire(blocking=False):  # a thread is waiting for work
            return
        if len(self._threads) < self._size:
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Let every thread end once the jobs queued before are done (does not wait)."""
        for _ in self._threads:
            self._jobs.put(None)
        self._threads = []

    def _work(self) -> None:
        jobs, loop = self._jobs, self._loop
        while True:
            job = jobs.get()
            if job is None:
                return
            context, body, args, done = job
            job = None
            try:
                result, error = context.run(body, *args), None
            except BaseException as exc:  # handed to the waiting node, as a future would
                result, error = None, exc
            # Idle before the outcome is handed over: the next body, submitted as soon as
            # the loop has it, finds this thread instead of starting another.
            self._idle.release()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(done, result, error)
            del result, error, body, args, done, context
