"""The one way Durable runs a coroutine on a new event loop from synchronous code.

``asyncio.run`` turns Ctrl-C into a cancel of the main task, but only once the main thread
runs Python code again: a Python-level signal handler always runs in the main thread. Linux
may deliver a process's SIGINT to any of its threads, and when a worker thread (a plain body, a
save) receives it while the main thread waits in the event loop's ``select`` call, nothing
wakes that call until its next timer is due, which may be a minute away. :func:`run_main`
gives the loop a socket that the C-level signal handler writes to (``signal.set_wakeup_fd``),
so every signal wakes the loop at once, whichever thread received it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_main"]

T = TypeVar("T")


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a new event loop, like ``asyncio.run``, and return its result.

    In the main thread, a signal (Ctrl-C, SIGTERM) wakes the loop at once even when another
    thread received it, so its Python handler runs without delay: ``asyncio.run``'s own Ctrl-C
    handling (the main task is canceled, ``KeyboardInterrupt`` raised once it has ended), or
    one the caller installed. A wakeup descriptor someone else set (another loop's signal
    handlers) is left in place. Elsewhere than the main thread, where no Python signal handler
    runs, this is ``asyncio.run``.

    Raises:
        RuntimeError: called from a running event loop.
        Exception: whatever ``main`` raised.
    """
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        watching = previous == -1
        if watching:
            loop.add_reader(reader.fileno(), _drain, reader)
        else:  # someone else's descriptor: theirs stays
            signal.set_wakeup_fd(previous)
        try:
            return runner.run(main)
        finally:
            if watching:
                signal.set_wakeup_fd(-1)
                loop.remove_reader(reader.fileno())
            reader.close()
            writer.close()


def _drain(reader: socket.socket) -> None:
    """Empty the wakeup socket: the bytes are signal numbers, already handled by Python."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while reader.recv(4096):
            pass
