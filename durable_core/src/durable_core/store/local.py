"""Helpers for stores on a local file system: cancel requests as marker files beside a run's lock.

The file and SQLite stores ask a run's owner to stop by leaving ``<key>.cancel`` beside the run's
lock file (:class:`~durable_core.store.capabilities.CancelRequests`); the owner polls for it.
The per-run OS locks themselves are in :mod:`durable_core.store.locks`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

__all__ = ["watch_marker_file", "write_marker_file"]


def watch_marker_file(path: str, on_request: Callable[[], None]) -> Callable[[], None]:
    """Poll for ``path`` every 0.2 s in a daemon thread; when it appears, remove it and call
    ``on_request``. Returns the function that stops the watching (and waits for the thread).

    A marker already there is removed first: it was left by a request for an earlier run."""

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            if os.path.exists(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                on_request()

    thread = threading.Thread(target=poll, name="durable-cancel-watch", daemon=True)
    thread.start()

    def stop_watching() -> None:
        stop.set()
        thread.join()

    return stop_watching


def write_marker_file(path: str) -> None:
    """Create ``path`` (0600) as a cancel request; it is fine if it is already there."""

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
