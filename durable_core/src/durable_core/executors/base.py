"""The executor contract: where function-form node bodies run.

An executor runs the bodies of nodes declared with ``executor="default"`` (the function form,
see ``docs/executors.md``). The owner process keeps everything durable: it decides attempts,
Retry budgets and Timeouts, holds the ``max_running`` slots, checks the outputs against the
declared types and commits them. Only the body and its input values travel, pickled; its
return value comes back pickled.

A *local* executor (:class:`~durable_core.executors.ThreadExecutor`) runs bodies in the
owner's own worker threads: nothing is pickled. Every other executor receives a
:class:`~durable_core.executors.transport.RemoteCall` through :meth:`Executor.submit` and returns
a :class:`concurrent.futures.Future` of the pickled return value.
"""

from __future__ import annotations

import concurrent.futures
import pickle
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from durable_core.executors.transport import RemoteCall

__all__ = ["Executor"]


class Executor:
    """Base class of executors (thread, process, Dask, or a plugin's own).

    Subclasses that run bodies elsewhere set ``local = False`` and implement :meth:`submit`;
    they may override :meth:`dumps` (how bodies and values are pickled), :meth:`worker_lost`
    and :meth:`close`. An executor may serve several runs, one after the other or at once;
    it starts its workers on first use and stops them in :meth:`close`.

    Attributes:
        name: the name it is registered under (``durable_register_executors``).
        local: True when bodies run in the owner process's worker threads (nothing travels).
    """

    name: ClassVar[str] = "?"
    local: ClassVar[bool] = False
    cloudpickle: ClassVar[bool] = False
    """True: workers pickle return values with cloudpickle (classes defined in ``__main__``)."""

    def dumps(self, obj: object) -> bytes:
        """Pickle a body or a value for the trip to a worker (default: :func:`pickle.dumps`).

        Raises:
            Exception: whatever the pickler raises for an object it cannot pickle
                (``pickle.PicklingError``, ``TypeError``, ``AttributeError``); the engine turns
                it into a :class:`~durable_core.errors.NotPicklableError` naming the node.
        """
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def start(self) -> None:
        """Start the workers (or connect to them) before the first body of a run is submitted.

        Called by the engine in a worker thread, once per run that sends bodies here; it must
        be idempotent. The default does nothing (workers start on first :meth:`submit`).
        """

    def submit(self, call: RemoteCall) -> concurrent.futures.Future[bytes]:
        """Start running ``call`` on a worker: ``run_call(call)`` of
        :mod:`durable_core.executors.transport`, whose result is the pickled return value.

        The returned future's ``cancel()`` must drop the call when it has not started; it
        returns False for a call that is running (whose result is then ignored). The executor
        must not retry a call on its own: Retry is decided by the owner.

        Raises:
            NotImplementedError: a local executor (bodies never leave the owner).
        """
        raise NotImplementedError(f"the {self.name!r} executor runs bodies locally")

    def worker_lost(self, error: BaseException) -> bool:
        """True when ``error`` (raised by a future of :meth:`submit`) means that the worker
        running the body died, rather than the body raising it."""
        return False

    def close(self) -> None:
        """Stop the workers; bodies still running are abandoned. Idempotent; an executor used
        again after ``close`` starts anew."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
