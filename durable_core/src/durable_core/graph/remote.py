"""Function-form bodies sent to a remote executor (a process pool, a Dask cluster) for one run.

The engine keeps every rule for them: a body holds a ``max_running`` slot from submission until
it returns, Timeout and Retry are the owner's aspects, cancelling the run cancels the futures
that have not started, and the owner checks and commits the outputs. A body abandoned while it
runs (a Timeout, a canceled run) cannot be stopped from here: its result is ignored, and it
keeps its slot until its future ends (a Dask future ends when canceled; a process-pool body
when it returns).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any

from durable_core.errors import WorkerLostError
from durable_core.executors.base import Executor
from durable_core.executors.transport import (
    NODE_SKIPPED,
    RemoteCall,
    dump_body,
    dump_inputs,
    load_result,
)
from durable_core.graph.definition import Graph, Node
from durable_core.outcomes import SkipNode

__all__ = ["RemoteBodies", "dump_bodies", "travels"]


def travels(node: Node, executor: Executor | None) -> bool:
    """True when ``node``'s body is sent to ``executor`` (a function-form body declared with
    ``executor="default"`` and an executor that is not local)."""
    return node.executor == "default" and executor is not None and not executor.local


def dump_bodies(graph: Graph, executor: Executor) -> dict[int, bytes]:
    """Pickle every body of ``graph`` (Sub graphs included) that travels to ``executor``.

    Returns:
        The pickled bodies by ``id(node)``; empty when no body travels.

    Raises:
        NotPicklableError: a body cannot be pickled; names the graph and the node.
    """
    bodies: dict[int, bytes] = {}
    if executor.local:
        return bodies
    for sub_graph in graph.graphs().values():
        for node in sub_graph.nodes.values():
            if travels(node, executor):
                where = f"graph {sub_graph.name!r}, node {node.id!r}"
                bodies[id(node)] = dump_body(executor.dumps, where, node.body, executor.name)
    return bodies


class RemoteBodies:
    """The remote side of one run: pickled bodies, submissions, slots.

    Args:
        executor: a non-local executor.
        sem: the run's ``max_running`` semaphore.
        bodies: the pickled bodies (:func:`dump_bodies`).
    """

    def __init__(
        self, executor: Executor, sem: asyncio.Semaphore, bodies: dict[int, bytes]
    ) -> None:
        self.executor = executor
        self.sem = sem
        self.loop = asyncio.get_running_loop()
        self._bodies = bodies

    async def run(self, path: str, node: Node, args: list[Any], started: Callable[[], None]) -> Any:
        """Run ``node``'s body remotely with ``args`` and return what it returned.

        Raises:
            NotPicklableError: an input or the returned value cannot travel.
            WorkerLostError: the worker died while running the body.
            SkipNode: the body skipped the node.
            Exception: the body's own exception.
        """
        executor = self.executor
        call = RemoteCall(
            path=path,
            body=self._bodies[id(node)],
            args=dump_inputs(executor.dumps, path, [k.name for k in node.requires], args),
            provides=tuple(key.name for key in node.provides),
            cloudpickle=executor.cloudpickle,
        )
        await self.sem.acquire()
        try:
            started()
            future = executor.submit(call)
        except BaseException:
            self.sem.release()
            raise
        try:
            data = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel() or future.done():
                self.sem.release()
            else:  # running: the slot stays taken until the body returns
                future.add_done_callback(self._release_later)
            raise
        except BaseException as exc:
            self.sem.release()
            if executor.worker_lost(exc):
                raise WorkerLostError(
                    f"node {path!r}: the {executor.name!r} worker running its body died "
                    f"({type(exc).__name__}: {exc}); this try failed"
                ) from exc
            raise
        self.sem.release()
        returned = load_result(path, data)
        if returned is NODE_SKIPPED:
            raise SkipNode(path)
        return returned

    def _release_later(self, future: concurrent.futures.Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop has no slot left to give back
            self.loop.call_soon_threadsafe(self.sem.release)
