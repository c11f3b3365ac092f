"""The ``process`` executor: bodies run in a pool of worker processes on this machine."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Any, ClassVar

from durable_core.errors import ConfigError, WorkerLostError
from durable_core.executors.base import Executor
from durable_core.executors.transport import RemoteCall, run_call

__all__ = ["ProcessExecutor"]

START_METHODS = ("spawn", "forkserver")
"""Start methods safe in a process that runs threads (the owner always does)."""


_OWNER_POLL = 0.2
"""Seconds between a worker's checks that the process that started it is still alive."""


def _watch_owner(owner: int) -> None:
    """Pool initializer: end this worker soon after the owner (process ``owner``) or its parent
    (the owner, or the fork server that dies with it) is gone, even in the middle of a body.
    Otherwise a killed owner leaves workers behind that hold its pipes and keep running
    abandoned bodies — also a worker that the pool was still starting when the owner died,
    whose parent is already gone when it starts."""
    parent = os.getppid()

    def gone() -> bool:
        if os.getppid() != parent:
            return True
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive, but not ours to signal
            return False
        return False

    def watch() -> None:
        while True:
            if gone():
                os._exit(70)
            time.sleep(_OWNER_POLL)

    threading.Thread(target=watch, name="durable-owner-watch", daemon=True).start()


_QUIET_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"
"""The warning filter the resource tracker starts with (``-W``, as Python passes this
process's ``sys.warnoptions`` on to it)."""


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if it is not running yet, without its warning
    about "leaked semaphore objects". The pool's queues use named semaphores that the tracker
    removes when the owner ends; after a ``kill -9`` of the owner it still removes them, but
    also warns, on the terminal, of a leak that it has just cleaned up. Only the tracker's own
    warnings are silenced, and only in the tracker."""
    import sys
    from multiprocessing import resource_tracker

    if _QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(_QUIET_TRACKER)
    resource_tracker.ensure_running()


def _warm_up() -> int:
    """Runs once per worker at start: the imports are done; the short sleep lets each
    worker take one (so that all of them start)."""
    time.sleep(0.05)
    return os.getpid()


class ProcessExecutor(Executor):
    """Run function-form bodies in a :class:`concurrent.futures.ProcessPoolExecutor`.

    For CPU-bound pure-Python bodies: each worker process has its own interpreter and GIL.
    Bodies, inputs and outputs are pickled; a body must be importable by name in a worker
    (defined at module level in an importable module: workers get the owner's ``sys.path``).
    The pool starts when a run with a travelling body starts (:meth:`start`, before any body is
    submitted and outside any Timeout), so a graph without function-form bodies starts no
    process. It stays up until :meth:`close`.

    A worker that dies while a body runs (killed, crashed) breaks the pool: every body running
    in it fails its try with :class:`~durable_core.errors.WorkerLostError` (Retry applies), and
    the next body starts a fresh pool. A body abandoned by a Timeout or a canceled run keeps its
    worker until it returns; :meth:`close` terminates the workers still busy. A worker ends by
    itself soon after the owner process dies (killed, crashed).

    Args:
        max_workers: worker processes (>= 1); None: the machine's CPU count.
        start_method: ``"spawn"`` (default) or ``"forkserver"``. ``"fork"`` is refused: forking
            a process that runs threads can deadlock the child.

    Raises:
        ConfigError: an option is out of range.
    """

    name: ClassVar[str] = "process"
    local: ClassVar[bool] = False

    def __init__(self, max_workers: int | None = None, start_method: str = "spawn") -> None:
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise ConfigError(
                f"process executor: max_workers must be a positive integer (worker processes), "
                f"got {max_workers!r}"
            )
        if start_method not in START_METHODS:
            raise ConfigError(
                f"process executor: start_method must be one of {list(START_METHODS)}, got "
                f"{start_method!r} ('fork' is unsafe in a process that runs threads)"
            )
        self.max_workers = max_workers or os.cpu_count() or 1
        self.start_method = start_method
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._outstanding: set[concurrent.futures.Future[Any]] = set()

    def __repr__(self) -> str:
        return (
            f"<ProcessExecutor max_workers={self.max_workers} start_method={self.start_method!r}>"
        )

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        _quiet_resource_tracker()
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.max_workers,
            mp_context=multiprocessing.get_context(self.start_method),
            initializer=_watch_owner,
            initargs=(os.getpid(),),
        )

    def start(self) -> None:
        """Start the pool and wait until every worker process is up (imports done), so that
        start-up time is not counted in a body's Timeout. Idempotent.

        Raises:
            WorkerLostError: the workers died while starting (most often: the owner's main
                module starts runs without an ``if __name__ == "__main__":`` guard).
        """
        warm = [self._submit(_warm_up) for _ in range(self.max_workers)]
        concurrent.futures.wait(warm)
        for future in warm:
            error = future.exception()
            if error is not None:
                raise WorkerLostError(
                    f"process executor: its worker processes died while starting "
                    f"({type(error).__name__}: {error}). Workers import the owner's main "
                    "module again: a script that starts runs with the process executor must do "
                    "so under if __name__ == '__main__': (see the worker's traceback above)"
                ) from error

    def submit(self, call: RemoteCall) -> concurrent.futures.Future[bytes]:
        """Queue ``call`` in the pool (started, or restarted after a worker died, here)."""
        future = self._submit(run_call, call)
        with self._lock:
            self._outstanding.add(future)
        future.add_done_callback(self._done)
        return future

    def _submit(self, fn: Any, *args: Any) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = self._new_pool()
            try:
                return self._pool.submit(fn, *args)
            except BrokenProcessPool:
                # A worker died earlier: the bodies that ran in it have failed; start afresh.
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                return self._pool.submit(fn, *args)

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._outstanding.discard(future)

    def worker_lost(self, error: BaseException) -> bool:
        return isinstance(error, BrokenProcessPool)

    def close(self) -> None:
        """Stop the pool: idle workers exit; workers still running an abandoned body are
        terminated. Idempotent; the next submitted body starts a new pool."""
        with self._lock:
            pool, self._pool = self._pool, None
            busy = any(not f.done() for f in self._outstanding)
        if pool is None:
            return
        if busy:
            # Private, but the only handle on a worker stuck in a body nobody waits for.
            processes = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                if process.is_alive():
                    process.terminate()
            for process in processes:
                process.join(5)
        else:
            pool.shutdown(wait=True, cancel_futures=True)
