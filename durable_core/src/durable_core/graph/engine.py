"""The scheduler: runs a validated graph on asyncio (G-3, G-4, G-6, G-7, G-9, G-11, G-12).

Every node of a scope gets one asyncio task when the scope starts. The task begins the node's
root attempt through the checkpointer, then runs the aspect chain whose innermost step waits for
the node's inputs (a future resolved when the last required slot arrives: the AND gate, linear
in the number of edges) and runs the body. A successful node's outputs are committed through the
checkpointer and only then published; publishing decrements the pending-input counters of the
node's consumers. Nothing in the scheduler is quadratic: 10,000 nodes cost 10,000 tasks, one
pass over the edges, and one cancel pass at most.

``max_running`` is one semaphore for the whole run (the root graph and every Sub level): a body
holds a slot while it runs, never while it waits for inputs. ``async def`` bodies run on the
event loop; plain bodies run in one thread pool of ``max_running`` workers per run. Function-form
bodies (``executor=`` on the node) run in that pool too, or travel to the run's executor (a
process pool, a Dask cluster: :mod:`durable_core.graph.remote`), holding their slot meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from durable_core._nogc import nogc
from durable_core.errors import (
    ConfigError,
    GraphError,
    NodeFailedError,
    SlotError,
    describe_error,
)
from durable_core.executors.base import Executor
from durable_core.graph.aspects import Aspect
from durable_core.graph.bodythreads import BodyThreads
from durable_core.graph.cancel import CancelToken
from durable_core.graph.checkpoint import Attempt, Checkpointer, NodeOutputs, Scope, Values
from durable_core.graph.context import RunContext
from durable_core.graph.definition import Graph, In, Node, Out, _Plan
from durable_core.graph.function import call_args, function_outputs
from durable_core.graph.guard import CheckpointCalls
from durable_core.graph.keys import Key
from durable_core.graph.mainloop import run_main
from durable_core.graph.observer import GraphEvent, NodeEvent, Observer
from durable_core.graph.remote import RemoteBodies, dump_bodies, travels
from durable_core.graph.results import RunResult, RunStatus
from durable_core.graph.signals import RunAborted, settle
from durable_core.graph.streams import Stream
from durable_core.graph.turns import alone_in_turn
from durable_core.outcomes import SkipNode
from durable_core.records import NodeReason

__all__ = ["DEFAULT_MAX_RUNNING", "execute", "execute_async"]

_log = logging.getLogger("durable_core.graph")

_QUIET = operator.attrgetter("quiet")
"""A run's count of quiet handles (``_Run.quiet``), read without a Python call."""

DEFAULT_MAX_RUNNING = 8
"""Bodies running at once when ``max_running`` is not given."""

_EMPTY: Mapping[str, Any] = Values().ready


class _CascadeSkip(SkipNode):
    """Every required input was skipped: the node is skipped without running (G-4)."""


class _Slots(asyncio.Semaphore):
    """The run's ``max_running`` slots, counting those held (``held``) for the checkpointer's
    ``watch_bodies``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.held = 0
        self.owed = 0
        """Slots taken back without waiting while none was free (:meth:`take_back`)."""

    async def acquire(self) -> bool:
        await super().acquire()
        self.held += 1
        return True

    def release(self) -> None:
        self.held -= 1
        if self.owed:  # the slot goes to the body that took one back beyond the limit
            self.owed -= 1
            return
        super().release()

    def running(self) -> int:
        """How many slots are held now."""
        return self.held

    def take_back(self) -> None:
        """Take a slot at once, for a body whose wait was canceled: a free one, or, when none
        is free, one beyond the limit that the next release pays back (no other body starts
        until then). Never waits: a canceled body must be able to end."""
        if not self.locked():
            step = self.acquire()
            try:
                step.send(None)  # a free slot is taken without suspending
            except StopIteration:
                return
            step.close()  # it would have waited after all: withdrawn
        self.owed += 1
        self.held += 1


class _Run(CheckpointCalls):
    """State shared by every scope of one run: checkpointer calls, observers, slots, threads."""

    def __init__(
        self,
        checkpointer: Checkpointer | None,
        observers: Iterable[Observer],
        max_running: int,
    ) -> None:
        super().__init__(checkpointer)
        self.loop = asyncio.get_running_loop()
        self.observers = tuple(observers)
        self.max_running = max_running
        self.sem = _Slots(max_running)
        self.threads: BodyThreads | None = None
        self.jobs: set[asyncio.Future[Any]] = set()
        self.idle: asyncio.Future[None] | None = None
        self.cancel_requested = False
        # The token that cancels the run from outside (read by worker threads: a processor's
        # hop stops at the message during which it was canceled).
        self.token: CancelToken | None = None
        self.root: _ScopeRun | None = None
        self.remote: RemoteBodies | None = None
        self.quiet = 0
        """How many handles in the loop's ready queue are known to commit nothing when they
        run: the first steps of node tasks whose inputs are not all there yet (they only wait
        for them), and the done callbacks of node tasks that ended (bookkeeping). The
        checkpointer's ``watch_turns`` predicate compares it with the queue's length."""

    # -- observers --------------------------------------------------------------------------

    def emit(self, method: str, event: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, method)(event)
            except Exception:
                _log.exception("observer %r raised in %s; ignored", observer, method)

    # -- cancellation -----------------------------------------------------------------------

    def cancel(self) -> None:
        """Cancel the run from outside (a CancelToken)."""
        self.cancel_requested = True
        if self.root is not None:
            self.root.cancel(outside=True)

    def _stop(self) -> None:
        if self.root is not None:
            self.loop.call_soon(self.root.cancel_all)

    # -- plain bodies -----------------------------------------------------------------------

    async def run_sync(
        self,
        body: Callable[..., Any],
        args: tuple[Any, ...],
        path: str,
        started: Callable[[], None],
        keep: Callable[[], None] | None = None,
    ) -> Any:
        """Run ``body(*args)`` in a worker thread, holding a ``max_running`` slot; return what
        it returned.

        A plain body cannot be interrupted, so the run waits for it when it is canceled. With
        ``keep`` (a node's own body, not a processor's handler), what such a body returns
        after the run was canceled from outside (a ``CancelToken``, Ctrl-C) is kept: ``keep()``
        is called to tell the body, and the node goes on to its confirmation instead of
        dropping the work (G-6)."""
        await self.sem.acquire()
        waiter: asyncio.Future[Any] = self.loop.create_future()

        def done(returned: Any, error: BaseException | None) -> None:
            # On the loop, once the thread returned: the slot is free again even when the
            # node stopped waiting (a plain body cannot be interrupted: a Timeout or a
            # canceled run leaves it its slot and worker until then).
            self._release_job(waiter)
            if waiter.done():
                return
            if error is None:
                waiter.set_result(returned)
            elif isinstance(error, StopIteration):  # a future cannot carry it: as a coroutine
                waiter.set_exception(RuntimeError(f"{type(error).__name__}: {error}"))
            else:
                waiter.set_exception(error)

        try:
            started()
            threads = self.threads
            if threads is None:
                threads = self.threads = BodyThreads(self.loop, self.max_running)
            threads.submit(body, args, done)
        except BaseException:
            self.sem.release()
            raise
        self.jobs.add(waiter)
        if keep is None:
            returned = await waiter
        else:
            try:
                returned = await asyncio.shield(waiter)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not self.cancel_requested or waiter.cancelled() or task is None:
                    # a Timeout, a failure elsewhere, or the run stopping at once: nobody waits
                    # for what the body returns any more
                    waiter.cancel()
                    raise
                task.uncancel()  # the run was canceled: keep what the body returns
                keep()
                returned = await waiter
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            raise GraphError(
                f"node {path!r}: its plain body returned an awaitable ({returned!r}); the "
                "engine runs plain bodies in worker threads and never awaits what they return. "
                "Declare the body with async def"
            )
        return returned

    def _release_job(self, job: asyncio.Future[Any]) -> None:
        if job not in self.jobs:
            return
        self.jobs.discard(job)
        self.sem.release()
        if not self.jobs and self.idle is not None and not self.idle.done():
            self.idle.set_result(None)

    async def wait_threads(self) -> None:
        """Wait until no plain body is running in a worker thread; then let the threads go."""
        while self.jobs:
            self.idle = self.loop.create_future()
            await settle(self.idle)
        if self.threads is not None:
            self.threads.shutdown()
            self.threads = None


class _NodeRun:
    """One node's execution in one scope: its root attempt and the streams it opened."""

    __slots__ = (
        "attempt",
        "cancel_pending",
        "ended",
        "holder",
        "holding",
        "in_call",
        "index",
        "node",
        "opening",
        "path",
        "running",
        "scope",
        "streams",
        "task",
    )

    def __init__(self, scope: _ScopeRun, index: int) -> None:
        self.scope = scope
        self.index = index
        self.node: Node = scope.plan.nodes[index]
        self.path = f"{scope.path}/{self.node.id}" if scope.path else self.node.id
        self.attempt: Attempt | None = None
        self.streams: dict[str, Stream[Any]] = {}
        self.opening: dict[str, asyncio.Future[None]] = {}
        self.running = False
        self.holding = False
        self.holder: object | None = None
        """The try of the async body holding the slot (its context), None between tries."""
        self.task: asyncio.Task[Any] | None = None
        """The task running that try's body."""
        self.in_call = False
        self.cancel_pending = False
        self.ended = False
        """``node_main`` has ended: the task's done callback is queued (counted in
        ``_Run.quiet`` until it runs)."""

    async def open_stream(self, key: Key[Any]) -> Stream[Any]:
        name = key.name
        stream = self.streams.get(name)
        if stream is not None:
            waiter = self.opening.get(name)
            if waiter is not None:
                await asyncio.shield(waiter)
            return stream
        stream = Stream(key)
        self.streams[name] = stream
        waiter = self.scope.run.loop.create_future()
        self.opening[name] = waiter
        try:
            assert self.attempt is not None
            await self.scope.run.open_stream(self.attempt, key, stream)
            self.scope.publish_stream(name, stream)
        finally:
            del self.opening[name]
            waiter.set_result(None)
        return stream

    async def idle(self, waiting: Any) -> Any:
        """Await ``waiting`` without holding a ``max_running`` slot (async bodies); return
        what it returned.

        When the try ended meanwhile (a task the body started was the one waiting), no slot
        is taken back: the try's end already let it go. When the wait is canceled (the
        node's end, or a timeout the body set around it and may go on after), the slot is
        taken back at once (:meth:`_Slots.take_back`): a canceled body never waits for one."""
        if not self.holding:
            return await waiting
        run = self.scope.run
        holder = self.holder
        self.holding = False
        run.sem.release()
        try:
            result = await waiting
        except BaseException:
            if self.holder is holder and not self.holding:
                run.sem.take_back()
                self.holding = True
            raise
        if self.holder is not holder or self.holding:
            return result  # the try ended, or another wait of it took the slot back already
        await run.sem.acquire()
        if self.holder is not holder or self.holding:  # the same, while this waited for it
            run.sem.release()
            return result
        self.holding = True
        return result

    def may_idle(self, holder: object) -> bool:
        """True when the running task is the body's own, in the try ``holder``, holding its
        slot: its waits may give the slot back (a task the body started may not: the body
        may be working meanwhile)."""
        return self.holding and self.holder is holder and asyncio.current_task() is self.task


class _Call:
    """The :class:`~durable_core.graph.AspectCall` handed to one aspect of a node."""

    __slots__ = ("attempt", "boundary", "chain", "level", "node_id", "nr", "path", "scope")

    def __init__(
        self,
        scope: _ScopeRun,
        nr: _NodeRun,
        chain: tuple[tuple[Aspect, str], ...],
        level: int,
        attempt: Attempt,
    ) -> None:
        self.scope = scope
        self.nr = nr
        self.chain = chain
        self.level = level
        self.attempt = attempt
        self.boundary = chain[level][1]
        self.node_id = nr.node.id
        self.path = nr.path

    async def run(self) -> NodeOutputs:
        return await self.chain[self.level][0].around(self)

    async def proceed(self, attempt: Attempt | None = None) -> NodeOutputs:
        attempt = attempt if attempt is not None else self.attempt
        level = self.level + 1
        if level == len(self.chain):
            return await self.scope.core(self.nr, attempt)
        return await _Call(self.scope, self.nr, self.chain, level, attempt).run()

    async def begin_try(self, index: int, limit: int) -> Attempt:
        return await self.scope.run.begin_try(self.attempt, self.boundary, index, limit)

    async def fail_try(self, attempt: Attempt, error: BaseException) -> None:
        self.scope.requeue_reader(self.nr)
        await self.scope.run.fail_attempt(attempt, error)


class _ScopeRun:
    """One graph run in one scope: the slots, the pending-input counters and the node tasks."""

    def __init__(
        self,
        run: _Run,
        graph: Graph,
        path: str,
        handle: Scope,
        parent: _ScopeRun | None,
        sub_index: int,
    ) -> None:
        plan = graph._plan
        assert isinstance(plan, _Plan)
        self.run = run
        self.plan = plan
        self.graph = graph
        self.path = path
        self.handle = handle
        self.parent = parent
        self.sub_index = sub_index
        self.loop = run.loop
        self.ready: dict[str, Any] = {}
        self.skipped: set[str] = set()
        self.remaining = [len(names) for names in plan.requires]
        self.skipped_in = [0] * len(plan.nodes)
        self.waiters: list[asyncio.Future[None] | None] = [None] * len(plan.nodes)
        self.quiet_start = [False] * len(plan.nodes)
        """By node index: its task's first step is queued and its inputs are not all there,
        so that step only waits for them (counted in ``_Run.quiet``)."""
        self.tasks: list[asyncio.Task[None] | None] = []
        self.node_runs: list[_NodeRun | None] = []
        """None for a node restored at once without one (see _start_nodes)."""
        self.unfinished = 0
        self.done: asyncio.Future[None] = run.loop.create_future()
        self.error: NodeFailedError | None = None
        self.canceled = False
        self.cancel_done = False

    # -- slots ------------------------------------------------------------------------------

    def _arrive(self, name: str, skipped: bool) -> None:
        remaining = self.remaining
        for j in self.plan.consumers.get(name, ()):
            if skipped:
                self.skipped_in[j] += 1
            left = remaining[j] - 1
            remaining[j] = left
            if left == 0:
                if self.quiet_start[j]:  # its first step, still queued, may now commit
                    self.quiet_start[j] = False
                    self.run.quiet -= 1
                waiter = self.waiters[j]
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)

    def publish_value(self, name: str, value: Any) -> None:
        self.ready[name] = value
        self._arrive(name, False)

    def publish_skip(self, name: str) -> None:
        self.skipped.add(name)
        self._arrive(name, True)

    def publish_stream(self, name: str, stream: Stream[Any]) -> None:
        """Publish a stream: attach every reader's group first, then propagate through Out."""
        if name in self.ready or name in self.skipped:
            where = f"scope {self.path!r}" if self.path else "the root graph"
            raise SlotError(
                f"stream {name!r} already arrived in {where}; a stream is opened once per run "
                "of its graph (a Sub re-run by a Retry cannot publish a stream through Out "
                "again)"
            )
        prefix = f"{self.path}/" if self.path else ""
        tasks, index = self.tasks, self.plan.index
        for reader, anchor, retried in self.plan.stream_roles(name):
            # A reader that already ended (restored from a checkpoint, skipped, failed) never
            # reads: attaching it would hold the producer back once its buffer is full. A node
            # restored as its scope started has no task (None).
            i = index[reader.split("/", 1)[0]]
            if i < len(tasks) and (tasks[i] is None or tasks[i].done()):
                continue
            stream.attach(prefix + reader, anchor=anchor and prefix + anchor, keep=retried)
        self.publish_value(name, stream)
        parent = self.parent
        if parent is not None:
            target = parent.plan.out_of[self.sub_index].get(name)
            if target is not None:
                parent.publish_stream(target, stream)

    def publish_outputs(self, nr: _NodeRun, outputs: NodeOutputs) -> None:
        ready = outputs.ready
        keys = self.plan.prov_maps[nr.index]
        for name in self.plan.provides[nr.index]:
            if name in ready:
                if keys[name].stream:
                    if self.ready.get(name) is not ready[name]:
                        self.publish_stream(name, ready[name])
                else:
                    self.publish_value(name, ready[name])
            else:
                self.publish_skip(name)

    def _publish_inputs(self, inputs: Values) -> None:
        keys = self.graph.keys
        for key in self.graph.inputs:
            name = key.name
            if name in inputs.ready:
                value = inputs.ready[name]
                if keys[name].stream and self.parent is None:
                    self.publish_stream(name, value)
                else:  # a child's stream input: its groups were attached by the parent
                    self.publish_value(name, value)
            else:
                self.publish_skip(name)

    # -- running ----------------------------------------------------------------------------

    async def execute(self, inputs: Values) -> RunStatus:
        run = self.run
        if run.observers:
            run.emit("graph_started", GraphEvent(self.graph.name, self.path, self.handle))
        self._publish_inputs(inputs)
        count = len(self.plan.nodes)
        self.unfinished = count
        if count == 0:
            self.done.set_result(None)
        self._start_nodes(count)
        if self.unfinished == 0 and not self.done.done():
            self.done.set_result(None)
        if self.parent is None and run.cancel_requested:
            self.cancel(outside=True)
        try:
            await asyncio.shield(self.done)
        except asyncio.CancelledError:
            self.cancel_all()
            await settle(self.done)
            await self._finish(RunStatus.CANCELED)
            raise
        if self.error is not None:
            status = RunStatus.FAILED
        elif self.canceled or run.aborted:
            status = RunStatus.CANCELED
        else:
            status = RunStatus.COMPLETED
        await self._finish(status)
        return status

    @nogc
    def _start_nodes(self, count: int) -> None:
        """Restore at once every node the checkpointer has confirmed outputs for, and start a
        task for each other node. The cyclic garbage collector is paused meanwhile: a resume
        of many confirmed nodes allocates several objects per node, all of them alive
        afterwards, and each collection would walk everything the run holds."""
        run = self.run
        create_task = self.loop.create_task
        plan = self.plan
        node_runs: list[_NodeRun | None] = [None] * count
        self.node_runs = node_runs
        tasks = self.tasks
        quick = not run.noop
        restored = run.restore_nodes(self.handle, plan.nodes) if quick else None
        # The usual restored node (values checked and decoded by the checkpointer, none a
        # stream, handed on as they are: ``share`` would return them) is published right here,
        # without a _NodeRun or the calls of _restore_now, in a scope without streams and
        # with nobody watching the nodes.
        at_once = restored is not None and not run.observers and not plan.stream_keys
        values, arrive = self.ready, self._arrive
        prov_maps, provides = plan.prov_maps, plan.provides
        completed = NodeReason.COMPLETED
        for i in range(count):
            # After an abort nothing more is published: the node's task ends it canceled.
            attempt = None if restored is None or run.aborted else restored[i]
            if attempt is not None:
                outputs = attempt.restored
                if (
                    at_once
                    and outputs.as_is
                    and outputs.checked
                    and not outputs.skipped
                    and outputs.reason is completed
                    and outputs.ready.keys() == prov_maps[i].keys()
                ):
                    ready = outputs.ready
                    for name in provides[i]:
                        values[name] = ready[name]
                        arrive(name, False)
                else:
                    node_runs[i] = nr = _NodeRun(self, i)
                    self._restore_now(nr, attempt)
                tasks.append(None)
                self.unfinished -= 1
                continue
            node_runs[i] = nr = _NodeRun(self, i)
            task = create_task(self.node_main(nr))
            tasks.append(task)
            if not quick:  # no checkpointer asks what is queued: nothing to count
                task.add_done_callback(self._task_done)
                continue
            task.add_done_callback(functools.partial(self._counted_done, nr))
            if self.remaining[i]:
                self.quiet_start[i] = True
                run.quiet += 1

    async def _finish(self, status: RunStatus) -> None:
        run = self.run
        await run.close_scope(self.handle, status)
        if run.observers:
            error = self.error if status is RunStatus.FAILED else None
            run.emit(
                "graph_finished",
                GraphEvent(self.graph.name, self.path, self.handle, str(status), error),
            )

    def _counted_done(self, nr: _NodeRun, task: asyncio.Task[None]) -> None:
        """:meth:`_task_done`, keeping ``_Run.quiet`` (a run with a checkpointer)."""
        run = self.run
        if nr.ended:  # this callback was counted when node_main ended
            run.quiet -= 1
        if self.quiet_start[nr.index]:  # canceled before its first step ran
            self.quiet_start[nr.index] = False
            run.quiet -= 1
        self._task_done(task)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # pragma: no cover - a bug
            _log.error("internal error in a node task", exc_info=task.exception())
        self.unfinished -= 1
        if self.unfinished == 0 and not self.done.done():
            self.done.set_result(None)

    def cancel(self, outside: bool) -> None:
        if outside and self.error is None:
            self.canceled = True
        self.cancel_all()

    def cancel_all(self) -> None:
        if self.cancel_done:
            return
        self.cancel_done = True
        for task, nr in zip(self.tasks, self.node_runs, strict=True):
            if task is None or task.done():  # None: restored at once, nothing runs
                continue
            if nr.in_call:  # never cancel a checkpointer call: cancel when it returns
                nr.cancel_pending = True
            else:
                task.cancel()

    def node_failed(self, error: NodeFailedError) -> None:
        if self.error is None and not self.canceled:
            self.error = error
            # Cancel the others on the next loop turn, after readers of a failed stream had a
            # chance to see the failure.
            self.loop.call_soon(self.cancel_all)

    def _node_event(self, nr: _NodeRun, **fields: Any) -> NodeEvent:
        return NodeEvent(nr.node.id, nr.path, self.handle, **fields)

    def mark_running(self, nr: _NodeRun) -> None:
        if not nr.running:
            nr.running = True
            self.run.node_running(nr.attempt)
            if self.run.observers:
                self.run.emit("node_running", self._node_event(nr))

    def _restore_now(self, nr: _NodeRun, attempt: Attempt) -> None:
        """A node the checkpointer restored at once: publish its outputs, no task (see
        ``Checkpointer.restore_node``)."""
        run = self.run
        if run.observers:
            run.emit("node_waiting", self._node_event(nr))
        nr.attempt = attempt
        outcome = "canceled"
        try:
            assert attempt.restored is not None
            outputs = run.check_outputs(nr.path, self.plan.prov_maps[nr.index], attempt.restored)
            if outputs.ready:
                shared = run.share(self.handle, attempt, outputs.ready)
                if shared is not outputs.ready:
                    outputs = NodeOutputs(outputs.reason, shared, outputs.skipped)
            self.publish_outputs(nr, outputs)
            outcome = str(outputs.reason)
        except RunAborted:
            pass
        except Exception as exc:  # restored outputs that cannot be published: stop the run
            run.abort(exc)
        if outcome != "canceled":
            self._detach_reader(nr)
        if run.observers:
            run.emit("node_finished", self._node_event(nr, outcome=outcome, restored=True))

    async def node_main(self, nr: _NodeRun) -> None:
        run = self.run
        if self.quiet_start[nr.index]:  # this first step runs now: no longer queued
            self.quiet_start[nr.index] = False
            run.quiet -= 1
        if run.observers:
            run.emit("node_waiting", self._node_event(nr))
        outcome = "canceled"
        restored = False
        error: NodeFailedError | None = None
        failure: BaseException | None = None
        try:
            attempt = await run.begin_node(self.handle, nr.node, nr)
            nr.attempt = attempt
            if attempt.restored is not None:
                outputs = run.check_outputs(
                    nr.path, self.plan.prov_maps[nr.index], attempt.restored
                )
                restored = True
            else:
                if attempt.staged is not None:
                    run.check_staged(nr.path, self.plan.prov_maps[nr.index], attempt.staged)
                outputs = await self._run_node(nr, attempt)
                await run.commit_node(attempt, outputs, nr)
            if outputs.ready and not run.noop:
                shared = run.share(self.handle, attempt, outputs.ready)
                if shared is not outputs.ready:
                    outputs = NodeOutputs(outputs.reason, shared, outputs.skipped)
            self.publish_outputs(nr, outputs)
            for stream in nr.streams.values():
                stream.end()
            outcome = str(outputs.reason)
        except RunAborted:
            pass
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if not (self.cancel_done or run.aborted or (task is not None and task.cancelling())):
                # Nobody canceled this node: a CancelledError leaked out of its body (an
                # awaited future canceled elsewhere). Ending "canceled" would leave its
                # consumers waiting forever, so it is a failure.
                failure = exc
        except Exception as exc:
            failure = exc
        try:
            if failure is not None:
                outcome = "failed"
                error = await self._node_failure(nr, failure)
        finally:
            if outcome != "canceled":
                self._detach_reader(nr)
            if run.observers:
                run.emit(
                    "node_finished",
                    self._node_event(nr, outcome=outcome, restored=restored, error=error),
                )
            if not run.noop:
                nr.ended = True  # the task's done callback is queued next (_counted_done)
                run.quiet += 1

    async def _node_failure(self, nr: _NodeRun, exc: BaseException) -> NodeFailedError:
        if isinstance(exc, NodeFailedError) and exc.path == nr.path and exc.__cause__:
            # the node described its own failure (a processor's message that spent its
            # budget): keep that error; its attempt and streams fail with the cause
            error, exc = exc, exc.__cause__
        else:
            error = NodeFailedError(f"node {nr.path!r} failed: {describe_error(exc)}", nr.path)
            error.__cause__ = exc
        # Readers of this node's streams see the failure before the others are canceled.
        for stream in nr.streams.values():
            stream.fail(f"stream producer {nr.path!r} failed: {describe_error(exc)}", nr.path, exc)
        self.node_failed(error)
        if nr.attempt is not None:
            with contextlib.suppress(RunAborted, asyncio.CancelledError):
                await self.run.fail_attempt(nr.attempt, exc, nr)
        return error

    async def _run_node(self, nr: _NodeRun, attempt: Attempt) -> NodeOutputs:
        chain = self.plan.chain(nr.index)
        try:
            if chain:
                outputs = await _Call(self, nr, chain, 0, attempt).run()
            else:
                outputs = await self.core(nr, attempt)
        except SkipNode:
            if nr.streams:
                raise SlotError(
                    f"node {nr.path!r} skipped itself after opening stream(s) "
                    f"{sorted(nr.streams)}; an opened stream cannot become skipped"
                ) from None
            return NodeOutputs(NodeReason.SKIPPED, _EMPTY, frozenset(self.plan.provides[nr.index]))
        if not isinstance(outputs, NodeOutputs):
            raise SlotError(
                f"node {nr.path!r}: an aspect returned {outputs!r}; Aspect.around must return "
                "the result of call.proceed()"
            )
        return outputs

    async def core(self, nr: _NodeRun, attempt: Attempt) -> NodeOutputs:
        """The innermost step of the aspect chain: wait for input, then run the body."""
        i = nr.index
        if self.remaining[i]:
            waiter = self.waiters[i]
            if waiter is None or waiter.done():  # done here means canceled by an earlier try
                waiter = self.waiters[i] = self.loop.create_future()
            await waiter
        required = len(self.plan.requires[i])
        if required and self.skipped_in[i] == required:
            raise _CascadeSkip(nr.path)
        node = nr.node
        if node.child is not None:
            return await self._run_sub(nr, attempt)
        if node.executor is not None:
            return await self._run_function(nr)
        assert nr.attempt is not None
        rc = RunContext(nr, attempt, not node.is_async, nr.attempt.staged)
        run = self.run
        body = node.body
        assert body is not None
        try:
            if node.is_async:
                await run.sem.acquire()
                nr.holding = True
                nr.holder = rc
                nr.task = asyncio.current_task()
                try:
                    self.mark_running(nr)
                    await body(rc)
                finally:
                    nr.holder = nr.task = None
                    if nr.holding:
                        nr.holding = False
                        run.sem.release()
            else:
                started = lambda: self.mark_running(nr)  # noqa: E731
                await run.run_sync(body, (rc,), nr.path, started, keep=rc._stop_soon)
            keys = self.plan.prov_maps[i]
            for name in rc._requested:
                if name not in nr.streams:  # a writer that sent nothing: an empty stream
                    await nr.open_stream(keys[name])
        except asyncio.CancelledError:
            rc._cancel()
            raise
        finally:
            rc._close()
        ready = rc._written()
        out_ready: dict[str, Any] = {}
        out_skipped: list[str] = []
        streams = nr.streams
        for name in self.plan.provides[i]:
            if name in streams:
                out_ready[name] = streams[name]
            elif name in ready:
                out_ready[name] = ready[name]
            else:
                out_skipped.append(name)
        if rc._stopping and (rc._stop_seen or out_skipped):
            # The run was canceled while the body ran, and the body saw it (and may have
            # stopped early) or left an output unset: keep nothing, it runs again on resume.
            raise asyncio.CancelledError
        return NodeOutputs(NodeReason.COMPLETED, out_ready, frozenset(out_skipped))

    async def _run_function(self, nr: _NodeRun) -> NodeOutputs:
        """Run a function-form body: locally in a worker thread, or on the run's executor."""
        node = nr.node
        run = self.run
        args = call_args(nr.path, node.requires, node.defaults, self.ready)
        started = lambda: self.mark_running(nr)  # noqa: E731
        if run.remote is not None and travels(node, run.remote.executor):
            returned = await run.remote.run(nr.path, node, args, started)
        else:
            assert node.body is not None
            returned = await run.run_sync(
                node.body, tuple(args), nr.path, started, keep=lambda: None
            )
        ready, skipped = function_outputs(nr.path, node.provides, returned)
        return NodeOutputs(NodeReason.COMPLETED, ready, frozenset(skipped))

    async def _run_sub(self, nr: _NodeRun, attempt: Attempt) -> NodeOutputs:
        node = nr.node
        child_graph = node.child
        assert child_graph is not None
        ready: dict[str, Any] = {}
        skipped: list[str] = []
        for binding in node.bindings:
            if isinstance(binding, In):
                if binding.parent.name in self.ready:
                    ready[binding.child.name] = self.ready[binding.parent.name]
                else:
                    skipped.append(binding.child.name)
        inputs = Values(ready, frozenset(skipped))
        # Each run of the child is a new scope: its readers of the parent's streams are new
        # groups that read from the first element (a failed try's reads are void).
        prefix = nr.path + "/"
        for value in ready.values():
            if isinstance(value, Stream):
                value.reopen(prefix)
        handle = await self.run.open_scope(child_graph, nr.path, attempt, inputs)
        child = _ScopeRun(self.run, child_graph, nr.path, handle, self, nr.index)
        self.mark_running(nr)
        status = await child.execute(inputs)
        if status is RunStatus.FAILED:
            assert child.error is not None
            raise child.error
        if status is RunStatus.CANCELED:
            raise asyncio.CancelledError()
        out_ready: dict[str, Any] = {}
        out_skipped: list[str] = []
        for binding in node.bindings:
            if isinstance(binding, Out):
                if binding.child.name in child.ready:
                    out_ready[binding.parent.name] = child.ready[binding.child.name]
                else:
                    out_skipped.append(binding.parent.name)
        return NodeOutputs(NodeReason.COMPLETED, out_ready, frozenset(out_skipped))

    def requeue_reader(self, nr: _NodeRun) -> None:
        """A try of the reading node ``nr`` failed: what it received and did not acknowledge
        goes to its next try (a Sub node's child readers are opened anew instead)."""
        stream_keys = self.plan.stream_keys
        if not stream_keys or nr.node.child is not None:
            return
        for name in self.plan.requires[nr.index]:
            if name in stream_keys:
                stream = self.ready.get(name)
                if isinstance(stream, Stream):
                    stream.requeue(nr.path)

    def _detach_reader(self, nr: _NodeRun) -> None:
        stream_keys = self.plan.stream_keys
        if not stream_keys:
            return
        for name in self.plan.requires[nr.index]:
            if name in stream_keys:
                stream = self.ready.get(name)
                if isinstance(stream, Stream):
                    if nr.node.child is None:
                        stream.detach(nr.path)
                    else:
                        stream.detach_prefix(nr.path + "/")


def _root_inputs(graph: Graph, inputs: Mapping[Key[Any], Any] | None) -> Values:
    given = dict(inputs or {})
    declared = {key.name: key for key in graph.inputs}
    ready: dict[str, Any] = {}
    for key, value in given.items():
        known = declared.get(getattr(key, "name", None))  # type: ignore[arg-type]
        if not isinstance(key, Key) or known is None or known != key:
            raise GraphError(
                f"graph {graph.name!r}: {key!r} is not one of its inputs "
                f"{[k.name for k in graph.inputs]}; inputs are keyed by their Key"
            )
        if key.stream:
            if not isinstance(value, Stream) or value.key != key:
                raise GraphError(
                    f"graph {graph.name!r}: stream input {key.name!r} takes a Stream of that "
                    f"key (Stream.replay(key, elements)), got {value!r}"
                )
        elif not key.accepts(value):
            raise GraphError(
                f"graph {graph.name!r}: input {key.name!r} takes {key!r} values, got "
                f"{type(value).__name__}"
            )
        ready[key.name] = value
    missing = [name for name in declared if name not in ready]
    if missing:
        raise GraphError(
            f"graph {graph.name!r}: inputs {missing} were not given; pass a value for every "
            "input of the graph"
        )
    return Values(ready, frozenset())


def _check_max_running(max_running: object) -> int:
    if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
        raise ConfigError(
            f"max_running must be a positive integer (bodies running at once), got {max_running!r}"
        )
    return max_running


def check_executor(executor: object) -> Executor:
    """Return ``executor`` when it is an :class:`~durable_core.executors.Executor`.

    Raises:
        ConfigError: it is not.
    """
    if not isinstance(executor, Executor):
        raise ConfigError(
            f"executor must be an Executor (ThreadExecutor(), ProcessExecutor(...), or one "
            f"built from a plugin), got {executor!r}"
        )
    return executor


async def execute_async(
    graph: Graph,
    inputs: Mapping[Key[Any], Any] | None = None,
    *,
    max_running: int = DEFAULT_MAX_RUNNING,
    checkpointer: Checkpointer | None = None,
    observers: Iterable[Observer] = (),
    cancel: CancelToken | None = None,
    executor: Executor | None = None,
) -> RunResult:
    """Run ``graph`` on the running event loop and return its result (G-3…G-12).

    Args:
        graph: the graph; validated (and frozen) first.
        inputs: a value for every root input, keyed by its Key (a stream input takes a
            :class:`~durable_core.graph.Stream`).
        max_running: bodies running at once across the whole run, Sub levels included (>= 1);
            also the size of the worker thread pool for plain bodies.
        checkpointer: the checkpoint seam (G-12); default: no checkpoints.
        observers: observers of graph and node events (G-11).
        cancel: a token that cancels the run from outside; the run then ends ``canceled``.
        executor: where function-form bodies declared with ``executor="default"`` run (see
            :mod:`durable_core.executors`); None: the run's worker threads. The executor is
            started if a body travels, and is not closed.

    Returns:
        The run's result. A failure of a node or of the checkpointer is reported in the result
        (``status == "failed"``, ``error``), not raised.

    Raises:
        GraphError: the graph is not valid, or the inputs do not match its inputs; nothing ran.
        ConfigError: ``max_running`` is not a positive integer, or ``executor`` is not an
            :class:`~durable_core.executors.Executor`.
        NotPicklableError: a body that must travel to ``executor`` cannot be pickled; nothing
            ran.
        asyncio.CancelledError: the task running this coroutine was canceled; every body was
            canceled and has ended first.
    """
    graph.validate()
    max_running = _check_max_running(max_running)
    seeds = _root_inputs(graph, inputs)
    run = _Run(checkpointer, observers, max_running)
    run.cp.watch_bodies(run.sem.running)
    run.cp.watch_turns(alone_in_turn(run.loop, functools.partial(_QUIET, run)))
    run.token = cancel
    if executor is not None:
        bodies = dump_bodies(graph, check_executor(executor))
        if bodies:
            await asyncio.to_thread(executor.start)
            run.remote = RemoteBodies(executor, run.sem, bodies)
    unsubscribe = (
        cancel._subscribe(lambda: run.loop.call_soon_threadsafe(run.cancel))
        if cancel is not None
        else None
    )
    try:
        try:
            scope = await run.open_scope(graph, "", None, seeds)
            seeds = Values(run.share(scope, None, seeds.ready), seeds.skipped)
        except RunAborted:
            return RunResult(graph, RunStatus.FAILED, run.abort_error, {}, set())
        root = _ScopeRun(run, graph, "", scope, None, -1)
        run.root = root
        status = await root.execute(seeds)
        error: BaseException | None = None
        if run.aborted:
            status, error = RunStatus.FAILED, run.abort_error
        elif status is RunStatus.FAILED:
            error = root.error
        return RunResult(graph, status, error, root.ready, root.skipped)
    finally:
        if unsubscribe is not None:
            unsubscribe()
        await run.wait_threads()


def execute(
    graph: Graph,
    inputs: Mapping[Key[Any], Any] | None = None,
    *,
    max_running: int = DEFAULT_MAX_RUNNING,
    checkpointer: Checkpointer | None = None,
    observers: Iterable[Observer] = (),
    cancel: CancelToken | None = None,
    executor: Executor | None = None,
) -> RunResult:
    """Run ``graph`` to its end in a new event loop (:func:`~durable_core.graph.mainloop.run_main`,
    which is ``asyncio.run`` woken by Ctrl-C whichever thread receives it); see
    :func:`execute_async`.

    Must not be called from a running event loop (use ``await execute_async(...)`` there).

    Example:
        >>> N = Key("n", int)
        >>> g = Graph("one", inputs=[N])
        >>> TWICE = Key("twice", int)
        >>> @g.node("double", requires=[N], provides=[TWICE])
        ... def double(rc):
        ...     rc.set(TWICE, rc.get(N) * 2)
        >>> execute(g, {N: 21})[TWICE]
        42
    """
    return run_main(
        execute_async(
            graph,
            inputs,
            max_running=max_running,
            checkpointer=checkpointer,
            observers=observers,
            cancel=cancel,
            executor=executor,
        )
    )
