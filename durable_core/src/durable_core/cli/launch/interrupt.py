"""Ctrl-C and SIGTERM while a launched run executes: the first signal cancels the run cleanly
(the record stays resumable), a second one stops waiting for running bodies."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from durable_core.cli.exitcodes import ExitCode

__all__ = ["Interrupt"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """SIGINT (Ctrl-C) or SIGTERM (what deploy tools and service managers send) while a run
    executes: the first signal cancels the run cleanly (the record stays resumable), a second
    one stops waiting for running bodies."""

    def __init__(self, token: Any, quiet: bool) -> None:
        self.token = token
        self.quiet = quiet
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = signum
        if not self.quiet:
            if signum == signal.SIGINT:
                name, again = "Ctrl-C", "Ctrl-C again"
            else:
                name = signal.Signals(signum).name
                again = f"send {name} again (or press Ctrl-C)"
            click.echo(
                f"\nstopping ({name}): waiting for running nodes to end ({again} to stop at once)",
                err=True,
            )
        self.token.cancel()

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (or a second signal), 143 after SIGTERM: 128 + the signal."""
        if self.signal == signal.SIGTERM:
            return ExitCode.TERMINATED
        return ExitCode.INTERRUPTED

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
