"""Cancelling a run from outside, from any thread (G-6)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

__all__ = ["CancelToken"]


class CancelToken:
    """Cancels a run from outside, from any thread (G-6).

    Pass it as ``execute(..., cancel=token)``; ``token.cancel()`` cancels every body
    (cooperatively) and the run ends with status ``"canceled"``. A token may serve several runs;
    once canceled it stays canceled, and a run given a canceled token ends canceled at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._canceled = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def canceled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._canceled

    def cancel(self) -> None:
        """Cancel every run using this token. Idempotent; safe from any thread."""
        with self._lock:
            if self._canceled:
                return
            self._canceled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def _subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            if not self._canceled:
                self._callbacks.append(callback)
                return lambda: self._unsubscribe(callback)
        callback()
        return lambda: None

    def _unsubscribe(self, callback: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)
