"""The ``dask`` executor: function-form bodies run on a Dask cluster (``distributed``)."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from typing import Any, ClassVar

import cloudpickle

from durable_core.errors import ConfigError
from durable_core.executors import Executor, RemoteCall
from durable_core.executors.transport import run_call

__all__ = ["DaskExecutor"]


class DaskExecutor(Executor):
    """Send function-form bodies to a Dask scheduler; the run stays with its owner.

    Either connect to a running scheduler (``address``) or start a cluster on this machine
    (``cluster="local"``, with ``n_workers`` worker processes). The client (and a local cluster)
    starts when the first run with a travelling body starts, and stops in :meth:`close`.

    Bodies are pickled with cloudpickle (closures and ``__main__`` functions travel by value);
    input values are pickled by cloudpickle too and return values come back pickled. Every
    submission is impure (never shared with an identical call) and has ``retries=0``: Retry
    belongs to the owner. A local cluster is started with the scheduler's ``allowed-failures``
    at 0, so a worker that dies fails the try at once (``WorkerLostError``) instead of being
    rescheduled; for a cluster given by ``address``, set
    ``distributed.scheduler.allowed-failures: 0`` in that scheduler's configuration for the
    same behaviour (otherwise the scheduler re-runs a task whose worker died, up to its own
    limit, before the owner hears of it).

    Args:
        address: the scheduler's address (``"tcp://10.0.0.5:8786"``).
        cluster: ``"local"`` to start a ``distributed.LocalCluster`` on this machine.
        n_workers: worker processes of a local cluster (>= 1; default 2).
        threads_per_worker: threads per worker of a local cluster (>= 1; default 1).
        connect_timeout: seconds to wait for the scheduler (> 0; default 30).

    Raises:
        ConfigError: neither or both of ``address`` and ``cluster``, an unknown ``cluster``,
            ``n_workers``/``threads_per_worker`` with ``address``, or a value out of range.
    """

    name: ClassVar[str] = "dask"
    local: ClassVar[bool] = False
    cloudpickle: ClassVar[bool] = True

    def __init__(
        self,
        address: str | None = None,
        cluster: str | None = None,
        n_workers: int | None = None,
        threads_per_worker: int | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        if (address is None) == (cluster is None):
            raise ConfigError(
                "dask executor: give either address (a running scheduler, such as "
                "'tcp://10.0.0.5:8786') or cluster = 'local' (start one on this machine)"
            )
        if address is not None and not (isinstance(address, str) and address):
            raise ConfigError(f"dask executor: address must be a non-empty string, got {address!r}")
        if cluster is not None and cluster != "local":
            raise ConfigError(f"dask executor: cluster must be 'local', got {cluster!r}")
        if address is not None and (n_workers is not None or threads_per_worker is not None):
            raise ConfigError(
                "dask executor: n_workers and threads_per_worker size a local cluster; a "
                "cluster given by address is sized where it runs"
            )
        for option, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(
                    f"dask executor: {option} must be a positive integer, got {value!r}"
                )
        if (
            isinstance(connect_timeout, bool)
            or not isinstance(connect_timeout, (int, float))
            or not connect_timeout > 0
        ):
            raise ConfigError(
                f"dask executor: connect_timeout must be a number of seconds > 0, got "
                f"{connect_timeout!r}"
            )
        self.address = address
        self.cluster = cluster
        self.n_workers = n_workers or 2
        self.threads_per_worker = threads_per_worker or 1
        self.connect_timeout = float(connect_timeout)
        self._lock = threading.Lock()
        self._client: Any = None
        self._local_cluster: Any = None
        self._submitter: Any = None

    def __repr__(self) -> str:
        where = self.address if self.address is not None else f"local x{self.n_workers}"
        return f"<DaskExecutor {where}>"

    def dumps(self, obj: object) -> bytes:
        return cloudpickle.dumps(obj, protocol=5)

    def start(self) -> None:
        """Connect to the scheduler, or start the local cluster. Idempotent.

        Raises:
            OSError, TimeoutError: the scheduler cannot be reached in ``connect_timeout``.
        """
        with self._lock:
            if self._client is not None:
                return
            import dask
            from distributed import Client, LocalCluster

            if self.cluster == "local":
                with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                    self._local_cluster = LocalCluster(
                        n_workers=self.n_workers,
                        threads_per_worker=self.threads_per_worker,
                        processes=True,
                        dashboard_address=None,
                    )
                target: Any = self._local_cluster
            else:
                target = self.address
            self._client = Client(
                target,
                timeout=self.connect_timeout,
                asynchronous=False,
                set_as_default=False,
            )
            self._submitter = self._client.get_executor(pure=False, retries=0)

    def submit(self, call: RemoteCall) -> concurrent.futures.Future[bytes]:
        """Submit ``call`` to the scheduler (connecting first if needed)."""
        if self._submitter is None:
            self.start()
        key = f"durable-{call.path.replace('/', '.')}-{uuid.uuid4().hex[:12]}"
        return self._submitter.submit(run_call, call, key=key)

    def worker_lost(self, error: BaseException) -> bool:
        from distributed.scheduler import KilledWorker

        return isinstance(error, KilledWorker)

    def close(self) -> None:
        """Disconnect; stop the local cluster if this executor started it. Idempotent; the
        next run that sends a body here connects (or starts a local cluster) again."""
        with self._lock:
            client, self._client = self._client, None
            cluster, self._local_cluster = self._local_cluster, None
            self._submitter = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
