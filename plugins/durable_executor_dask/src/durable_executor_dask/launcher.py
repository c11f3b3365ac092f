"""The ``dask`` launcher: each run is one task on a Dask cluster (``distributed``), X-LAUNCH.

``durable submit --on dask://HOST:PORT`` connects a client to the scheduler and submits one
task per run: :func:`durable_core.launchers.job.run_job`, which starts or resumes the run in the
worker. The task is impure (``pure=False``: never shared with an identical call), its key is
derived from the run id (``durable-run-<run id>-<8 hex>``: one launch, one task), and it has
``retries=0``: a run that fails is the run's own end, not a task to retry.

A worker that dies while it runs a run is Dask's to handle: the scheduler runs the task again
on another worker, up to its ``distributed.scheduler.allowed-failures`` (3 by default); the new
try resumes what the dead one confirmed. Past that limit the task fails with ``KilledWorker``
and the submitter launches the run again itself (``relaunches``). Runs go on on the cluster
when the submitter exits (``fire_and_forget``), so the launcher is ``detached``.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
import threading
import urllib.parse
import uuid
from typing import Any, ClassVar

from durable_core.errors import ConfigError
from durable_core.launchers import Launcher, RunJob, RunOutcome

__all__ = ["DaskLauncher", "dask_launcher", "task_key"]

_LOOPBACK_NAMES = {"localhost", ""}


def task_key(run_id: str) -> str:
    """The key of one launch of ``run_id``: derived from it, unique per launch."""
    return f"durable-run-{run_id}-{uuid.uuid4().hex[:8]}"


class DaskLauncher(Launcher):
    """Submit each run as one task to the Dask scheduler at ``address``.

    Args:
        address: the scheduler's address (``"tcp://10.0.0.5:8786"``, or ``"10.0.0.5:8786"``).
        connect_timeout: seconds to wait for the scheduler (> 0; default 30).
        runs: at most this many runs of a submission on the cluster at once (>= 1); the
            submitter hands out the others as runs end, so it stays until the last one is
            handed out. None (default): all at once, bounded by the cluster's worker threads.

    Raises:
        ConfigError: no address, a bad timeout or bound, or the scheduler cannot be reached.
    """

    name: ClassVar[str] = "dask"
    detached: ClassVar[bool] = True

    def __init__(
        self, address: str, connect_timeout: float = 30.0, runs: int | None = None
    ) -> None:
        if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
            raise ConfigError(f"runs must be a whole number >= 1, found {runs!r}")
        self.runs = runs
        if not address:
            raise ConfigError(
                "--on dask://HOST:PORT needs the scheduler's address (dask://10.0.0.5:8786)"
            )
        if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
            raise ConfigError(f"connect_timeout must be > 0 seconds, found {connect_timeout!r}")
        import distributed

        self.address = address if "://" in address else f"tcp://{address}"
        try:
            self._client = distributed.Client(
                self.address, timeout=connect_timeout, set_as_default=False
            )
        except (OSError, TimeoutError) as exc:
            raise ConfigError(
                f"cannot reach the Dask scheduler at {self.address} within {connect_timeout} s "
                f"({type(exc).__name__}: {exc}); start it ('dask scheduler') or check the address"
            ) from exc
        self._futures: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def capacity(self) -> int | None:
        return self.runs

    def describe(self) -> str:
        bound = "" if self.runs is None else f"?runs={self.runs}"
        return f"dask://{self.address.removeprefix('tcp://')}{bound}"

    def single_host(self) -> bool:
        hosts = {_host(self.address)}
        hosts.update(_host(worker) for worker in self._client.scheduler_info()["workers"])
        return all(_is_this_machine(host) for host in hosts)

    def submit(self, job: RunJob) -> concurrent.futures.Future[RunOutcome]:
        from durable_core.launchers.job import run_job

        if self._closed:
            raise ConfigError("the dask launcher is closed: make a new one")
        task = self._client.submit(run_job, job, key=task_key(job.run_id), pure=False, retries=0)
        with self._lock:
            self._futures.append(task)
        out: concurrent.futures.Future[RunOutcome] = concurrent.futures.Future()
        out.set_running_or_notify_cancel()

        def settle(done: Any) -> None:
            try:
                out.set_result(done.result())
            except BaseException as exc:  # KilledWorker, a canceled task: the worker is lost
                out.set_exception(exc)

        task.add_done_callback(settle)
        return out

    def detach(self) -> None:
        import distributed

        with self._lock:
            futures = list(self._futures)
        if futures:
            distributed.fire_and_forget(futures)

    def close(self, *, cancel: bool = False) -> None:
        """Disconnect; ``cancel`` cancels the tasks not yet ended (a run already running on a
        worker goes on to its end there: Dask cannot stop a running task)."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            futures, self._futures = self._futures, []
        if cancel and futures:
            self._client.cancel(futures)
        self._client.close()


def _host(address: str) -> str:
    return (urllib.parse.urlsplit(address).hostname or "").lower()


def _is_this_machine(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    try:
        own = {socket.gethostname().lower(), socket.getfqdn().lower()}
        own.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        return False
    return host in own


def dask_launcher(address: str = "") -> DaskLauncher:
    """The factory of ``--on dask://HOST:PORT[?runs=N]`` (``address`` is what follows
    ``dask://``).

    Raises:
        ConfigError: an option other than ``runs``, or a ``runs`` that is not a whole number.
    """
    where, _, query = address.partition("?")
    options = urllib.parse.parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"runs"})
    if unknown:
        raise ConfigError(
            f"--on dask://{address}: unknown option {', '.join(unknown)}; the one option is "
            "runs=N (at most N runs at once)"
        )
    runs = None
    if "runs" in options:
        try:
            runs = int(options["runs"][-1])
        except ValueError:
            raise ConfigError(
                f"--on dask://{address}: runs must be a whole number (dask://HOST:PORT?runs=4)"
            ) from None
    return DaskLauncher(where, runs=runs)
