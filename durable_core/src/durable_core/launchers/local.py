"""The ``local`` launcher: a bounded pool of worker processes on this machine, each running one
run at a time (X-LAUNCH).

``local:N`` keeps N worker slots. Each slot is a one-process
:class:`concurrent.futures.ProcessPoolExecutor` (``spawn`` start method), so that a worker that
dies breaks its own slot only: the slot gets a fresh process and the other runs go on. A
worker process lives on between runs (the graph module is imported once per worker).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import queue
import signal
import threading
from typing import Any, ClassVar

from durable_core.errors import ConfigError
from durable_core.launchers.base import Launcher, RunJob, RunOutcome

__all__ = ["LocalLauncher", "local_launcher"]


def _ignore_interrupts() -> None:
    """A worker ignores Ctrl-C: the submitter decides (it stops the workers on a second one)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _job_in_worker(job: RunJob) -> RunOutcome:
    from durable_core.launchers.job import run_job

    return run_job(job)


class LocalLauncher(Launcher):
    """Run each job in one of ``workers`` processes on this machine.

    Args:
        workers: worker processes, one run each at a time (>= 1; default: the CPUs).

    Raises:
        ConfigError: ``workers`` is not a positive integer.
    """

    name: ClassVar[str] = "local"
    detached: ClassVar[bool] = False

    def __init__(self, workers: int | None = None) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"local:N takes N >= 1 worker processes, found {workers!r}")
        self.workers = workers
        self._context = multiprocessing.get_context("spawn")
        self._queue: queue.Queue[Any] = queue.Queue()
        self._pools: list[concurrent.futures.ProcessPoolExecutor | None] = [None] * workers
        self._lock = threading.Lock()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._slot, args=(i,), name=f"durable-local-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def capacity(self) -> int | None:
        return self.workers

    def single_host(self) -> bool:
        return True

    def describe(self) -> str:
        return f"local:{self.workers}"

    def submit(self, job: RunJob) -> concurrent.futures.Future[RunOutcome]:
        if self._closed:
            raise ConfigError("the local launcher is closed: make a new one")
        future: concurrent.futures.Future[RunOutcome] = concurrent.futures.Future()
        self._queue.put((job, future))
        return future

    def _pool(self, slot: int) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            pool = self._pools[slot]
            if pool is None:
                pool = concurrent.futures.ProcessPoolExecutor(
                    max_workers=1, mp_context=self._context, initializer=_ignore_interrupts
                )
                self._pools[slot] = pool
            return pool

    def _slot(self, slot: int) -> None:
        """One slot's loop: take a job, run it in the slot's process, hand the outcome back."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                outcome = self._pool(slot).submit(_job_in_worker, job).result()
            except BaseException as exc:  # the worker died (BrokenProcessPool) or was stopped
                with self._lock:
                    broken, self._pools[slot] = self._pools[slot], None
                if broken is not None:
                    broken.shutdown(wait=False, cancel_futures=True)
                future.set_exception(exc)
            else:
                future.set_result(outcome)

    def close(self, *, cancel: bool = False) -> None:
        """Stop the slots; ``cancel`` terminates runs still running (each stays resumable,
        as after ``kill``), else waits for them."""
        if self._closed:
            return
        self._closed = True
        if cancel:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[1].cancel()
            with self._lock:
                pools = [p for p in self._pools if p is not None]
            for pool in pools:
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        with self._lock:
            pools = [p for p in self._pools if p is not None]
            self._pools = [None] * self.workers
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def local_launcher(address: str = "") -> LocalLauncher:
    """The factory of ``--on local[:N]``: ``address`` is ``N`` (default: the CPUs).

    Raises:
        ConfigError: ``N`` is not a positive integer.
    """
    if address == "":
        return LocalLauncher()
    try:
        workers = int(address)
    except ValueError:
        raise ConfigError(
            f"--on local:{address}: N must be a whole number of worker processes (local:4)"
        ) from None
    return LocalLauncher(workers)
