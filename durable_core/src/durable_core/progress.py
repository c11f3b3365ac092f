"""Progress of a durable run, counted from its recovery events (for the ``durable`` command).

:class:`ProgressCounter` is a runtime observer: it counts nodes confirmed and restored, Retry
tries and failed attempts. :class:`StatusLine` redraws one line on a terminal from a counter
while a run executes (elapsed time included), and erases it when the run ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO

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
        retries: Retry tries started after a first try.
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

    @property
    def done(self) -> int:
        """Nodes settled so far: confirmed plus restored (never more than the total)."""
        done = self.confirmed + self.restored
        return min(done, self.total_nodes) if self.total_nodes else done


class ProgressCounter:
    """Counts recovery events; thread-safe. Call it as ``counter(event)``.

    Args:
        clock: the monotonic clock in seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
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
            elif kind == EventKind.RUN_FINISHED:
                self._status = event.status

    def snapshot(self) -> ProgressSnapshot:
        """The counts now."""
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
            )


def describe(snapshot: ProgressSnapshot) -> str:
    """One line: ``12/22 nodes · 3 restored · 1 retry · 4.2 s``."""
    total = snapshot.total_nodes or "?"
    parts = [f"{snapshot.done}/{total} nodes"]
    if snapshot.restored:
        parts.append(f"{snapshot.restored} restored from checkpoint")
    if snapshot.retries:
        parts.append(f"{snapshot.retries} {'retry' if snapshot.retries == 1 else 'retries'}")
    if snapshot.failed_attempts:
        n = snapshot.failed_attempts
        parts.append(f"{n} failed {'attempt' if n == 1 else 'attempts'}")
    parts.append(f"{snapshot.elapsed:.1f} s")
    return " · ".join(parts)


class StatusLine:
    """Redraws ``describe(counter.snapshot())`` on one terminal line until stopped.

    Args:
        counter: the counter to show.
        stream: the terminal (a text stream).
        interval: seconds between redraws.
        label: text before the counts (for example the run id).
    """

    def __init__(
        self, counter: ProgressCounter, stream: IO[str], interval: float = 0.2, label: str = ""
    ) -> None:
        self._counter = counter
        self._stream = stream
        self._interval = interval
        self._label = label
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    def _draw(self) -> None:
        text = describe(self._counter.snapshot())
        if self._label:
            text = f"{self._label}: {text}"
        pad = max(self._width - len(text), 0)
        self._width = len(text)
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._draw()

    def start(self) -> StatusLine:
        """Draw now and keep redrawing in a daemon thread."""
        self._draw()
        self._thread = threading.Thread(target=self._loop, name="durable-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop redrawing and erase the line. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
