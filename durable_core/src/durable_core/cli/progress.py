"""Progress of a durable run, counted from its recovery events (for the ``durable`` command).

:class:`ProgressCounter` is a runtime observer: it counts nodes confirmed and restored, Retry
tries and failed attempts. :class:`StatusLine` redraws one line on a terminal from a counter
while a run executes (elapsed time included), keeps other output of the process on lines of its
own, and erases the status when the run ends.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

import attrs

from durable_core.durable.events import EventKind, RecoveryEvent

__all__ = ["ProgressCounter", "ProgressSnapshot", "StatusLine", "describe"]


@attrs.frozen
class ProgressSnapshot:
    """Counts at one instant.

    Attributes:
        run_id: the run ("" before the first event).
        total_nodes: nodes of the root graph and every Sub graph (0 until the run started).
        confirmed: nodes confirmed by this process.
        restored: nodes restored from the record (confirmed by an earlier process; not run).
        retries: Retry tries started after a first try (a processor's message tries
            included).
        elements: stream elements sent so far (see
            :class:`~durable_core.durable.activity.RunActivity`; 0 without one).
        messages: processor messages committed so far (0 without an activity).
        failed_attempts: attempts recorded failed (each failed Retry try counts).
        revision: the record's revision after the latest save.
        status: the run's final status once it finished ("completed", "failed", "canceled").
        resumed: True when the run was resumed rather than started.
        started: True once the run started (its first record saved) or resumed (its record
            loaded and checked): before that, nothing was saved or changed.
        elapsed: seconds since the counter was created.
    """

    run_id: str
    total_nodes: int
    confirmed: int
    restored: int
    retries: int
    failed_attempts: int
    revision: int
    status: str
    resumed: bool
    started: bool
    elapsed: float
    elements: int = 0
    messages: int = 0

    @property
    def done(self) -> int:
        """Nodes settled so far: confirmed plus restored (never more than the total)."""
        done = self.confirmed + self.restored
        return min(done, self.total_nodes) if self.total_nodes else done


class ProgressCounter:
    """Counts recovery events; thread-safe. Call it as ``counter(event)``.

    Args:
        clock: the monotonic clock in seconds (injectable for tests).
        activity: the runtime's :class:`~durable_core.durable.activity.RunActivity`, whose
            stream elements and processor messages the snapshots report (``Runtime.activity``;
            :meth:`watch` sets it later).
    """

    def __init__(
        self, clock: Callable[[], float] | None = None, activity: Any | None = None
    ) -> None:
        self._activity = activity
        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._lock = threading.Lock()
        self._run_id = ""
        self._total = 0
        self._confirmed = 0
        self._restored = 0
        self._retries = 0
        self._failed = 0
        self._revision = 0
        self._status = ""
        self._resumed = False
        self._started = False

    def __call__(self, event: RecoveryEvent) -> None:
        with self._lock:
            self._run_id = event.run_id or self._run_id
            self._revision = max(self._revision, event.revision)
            kind = event.kind
            if kind in (EventKind.RUN_STARTED, EventKind.RUN_RESUMED):
                self._total = event.total_nodes
                self._resumed = kind == EventKind.RUN_RESUMED
                self._started = True
            elif kind == EventKind.NODE_CONFIRMED:
                self._confirmed += 1
            elif kind == EventKind.NODE_RESTORED:
                self._restored += 1
            elif kind == EventKind.ATTEMPT_STARTED:
                if event.attempt_index > 1:
                    self._retries += 1
            elif kind == EventKind.ATTEMPT_FAILED:
                self._failed += 1
            elif kind == EventKind.MESSAGE_FAILED:
                if event.attempt_index < event.attempt_limit:
                    self._retries += 1  # the message's next try follows
            elif kind == EventKind.RUN_FINISHED:
                self._status = event.status

    def watch(self, activity: Any) -> None:
        """Report the stream elements and messages of ``activity`` (``Runtime.activity``)."""
        self._activity = activity

    def snapshot(self) -> ProgressSnapshot:
        """The counts now."""
        activity = self._activity
        with self._lock:
            return ProgressSnapshot(
                run_id=self._run_id,
                total_nodes=self._total,
                confirmed=self._confirmed,
                restored=self._restored,
                retries=self._retries,
                failed_attempts=self._failed,
                revision=self._revision,
                status=self._status,
                resumed=self._resumed,
                started=self._started,
                elapsed=self._clock() - self._start,
                elements=activity.elements if activity is not None else 0,
                messages=activity.messages if activity is not None else 0,
            )


def describe(snapshot: ProgressSnapshot) -> str:
    """One line: ``12/22 nodes · 3 restored · 1 retry · 4.2 s``."""
    total = snapshot.total_nodes or "?"
    parts = [f"{snapshot.done}/{total} nodes"]
    if snapshot.restored:
        parts.append(f"{snapshot.restored} restored from checkpoint")
    if snapshot.elements:
        parts.append(f"{snapshot.elements} stream element{'s' if snapshot.elements != 1 else ''}")
    if snapshot.messages:
        parts.append(f"{snapshot.messages} message{'s' if snapshot.messages != 1 else ''}")
    if snapshot.retries:
        parts.append(f"{snapshot.retries} {'retry' if snapshot.retries == 1 else 'retries'}")
    if snapshot.failed_attempts:
        n = snapshot.failed_attempts
        parts.append(f"{n} failed {'attempt' if n == 1 else 'attempts'}")
    parts.append(f"{snapshot.elapsed:.1f} s")
    return " · ".join(parts)


class StatusLine:
    """Redraws ``describe(counter.snapshot())`` on one terminal line until stopped.

    While it runs, other output of the process goes through it: ``sys.stdout`` and
    ``sys.stderr`` are replaced by streams that erase the status line before they write, so a
    node's ``print`` lands on a line of its own, never glued after the status text. The status
    is drawn again at the next redraw, and not while another writer has left a line unfinished
    (``print(..., end="")``), so that line is never overwritten. ``stop`` puts the original
    streams back. Output written below ``sys.stdout``/``sys.stderr`` (by a child process, such
    as a ``process`` executor's worker, or straight to the file descriptors) is not seen.

    Args:
        counter: the counter to show.
        stream: the terminal (a text stream); kept as it is, even if it is ``sys.stderr``.
        interval: seconds between redraws.
        label: text before the counts (for example the run id).
        redirect: route ``sys.stdout`` and ``sys.stderr`` through the status line while it
            runs (see above).
    """

    def __init__(
        self,
        counter: ProgressCounter,
        stream: IO[str],
        interval: float = 0.2,
        label: str = "",
        *,
        redirect: bool = True,
    ) -> None:
        self._counter = counter
        self._stream = stream
        self._interval = interval
        self._label = label
        self._redirect = redirect
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._width = 0  # characters of the status now on the terminal (0: none)
        self._partial = False  # another writer left the cursor in the middle of a line
        self._saved: tuple[Any, Any] | None = None

    def _columns(self) -> int:
        """The terminal's width in characters (80 when it says nothing)."""
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        if columns <= 0:
            columns = shutil.get_terminal_size((80, 24)).columns
        return columns if columns > 0 else 80

    def _draw(self) -> None:
        text = describe(self._counter.snapshot())
        if self._label:
            text = f"{self._label}: {text}"
        # A line that wraps could not be redrawn in place with a carriage return.
        text = text[: max(self._columns() - 1, 1)]
        with self._lock:
            if self._partial or self._stop.is_set():
                return
            pad = max(self._width - len(text), 0)
            self._width = len(text)
            self._stream.write("\r" + text + " " * pad)
            self._stream.flush()

    def _erase(self) -> None:
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0

    def write_above(self, target: IO[str], text: str) -> None:
        """Write ``text`` to ``target`` (a stream on the same terminal) without mixing it with
        the status line: the status is erased first and drawn again at the next redraw."""
        with self._lock:
            self._erase()
            target.write(text)
            target.flush()
            if text:
                self._partial = not text.endswith("\n")

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._draw()

    def start(self) -> StatusLine:
        """Draw now and keep redrawing in a daemon thread (with ``redirect``, also route
        ``sys.stdout`` and ``sys.stderr`` through the status line)."""
        if self._redirect:
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout = _StatusAware(sys.stdout, self)  # type: ignore[assignment]
            sys.stderr = _StatusAware(sys.stderr, self)  # type: ignore[assignment]
        self._draw()
        self._thread = threading.Thread(target=self._loop, name="durable-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop redrawing, erase the line and put back the original streams. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._erase()
        if self._saved is not None:
            stdout, stderr = self._saved
            self._saved = None
            if isinstance(sys.stdout, _StatusAware) and sys.stdout.target is stdout:
                sys.stdout = stdout
            if isinstance(sys.stderr, _StatusAware) and sys.stderr.target is stderr:
                sys.stderr = stderr


class _StatusAware:
    """A text stream that writes through :meth:`StatusLine.write_above`; everything else
    (``fileno``, ``isatty``, ``encoding``, ``buffer`` …) is the wrapped stream's."""

    def __init__(self, target: IO[str], status: StatusLine) -> None:
        self.target = target
        self._status = status

    def write(self, text: str) -> int:
        self._status.write_above(self.target, text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        self.write("".join(lines))

    def flush(self) -> None:
        self.target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)
