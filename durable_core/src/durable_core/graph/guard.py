"""The checkpointer-call guard: every call the scheduler makes into the checkpoint seam (G-12).

A checkpointer call that raises stops the whole run: the guard records the error, stops making
calls, and the scheduler unwinds with :class:`~durable_core.graph.signals.RunAborted` (never
treated as a node failure; it and ``settle`` live in ``signals.py`` and are re-exported here). The
engine never cancels a call in progress (see :meth:`CheckpointCalls._call`). With the no-op
:class:`~durable_core.graph.checkpoint.Checkpointer` the guard answers itself and awaits nothing.

The guard also checks what a checkpointer hands back (restored outputs, staged values) against
the graph: a mismatch is a :class:`~durable_core.errors.CorruptRecordError` that stops the run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from durable_core._words import a
from durable_core.errors import CorruptRecordError
from durable_core.graph.checkpoint import Attempt, Checkpointer, NodeOutputs, Scope, Values
from durable_core.graph.definition import Graph, Node
from durable_core.graph.keys import Key
from durable_core.graph.results import RunStatus
from durable_core.graph.signals import NodeCall, RunAborted, direct_call, settle
from durable_core.graph.streams import Stream
from durable_core.records import NodeReason

__all__ = ["CheckpointCalls", "NodeCall", "RunAborted", "settle"]


class CheckpointCalls:
    """Calls into one run's checkpointer; the first failure aborts the run.

    Args:
        checkpointer: the run's checkpointer; None for the no-op default.
    """

    def __init__(self, checkpointer: Checkpointer | None) -> None:
        self.cp = checkpointer if checkpointer is not None else Checkpointer()
        self.noop = type(self.cp) is Checkpointer
        self.aborted = False
        self.abort_error: BaseException | None = None

    def abort(self, error: BaseException) -> None:
        """A checkpointer call failed: stop the run with ``error``; no further calls."""
        if self.aborted:
            return
        self.aborted = True
        self.abort_error = error
        self._stop()

    def _stop(self) -> None:
        """Called once, on the first abort: the scheduler cancels what still runs."""

    def _call(self, coroutine: Any, nr: NodeCall | None = None) -> Awaitable[Any]:
        """Await a checkpointer call; a failure stops the run (``RunAborted``).

        The engine never cancels a call in progress. Calls made by a node outside its aspect
        chain (``nr`` given) can only be canceled by a scope's ``cancel_all``, which defers the
        cancellation of a node inside such a call until it returns: no task is needed, and the
        call is :func:`direct_call` itself (no coroutine of this method around it: two such
        calls per node). Calls inside the chain (a Timeout may cancel them) run in a shielded
        task.
        """
        if nr is not None:
            return direct_call(self, coroutine, nr)
        return self._shielded(coroutine)

    async def _shielded(self, coroutine: Any) -> Any:
        if self.aborted:
            coroutine.close()
            raise RunAborted
        future = asyncio.ensure_future(coroutine)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await settle(future)
            if not future.cancelled() and future.exception() is not None:
                self.abort(future.exception())  # type: ignore[arg-type]
            raise
        except Exception as error:
            self.abort(error)
            raise RunAborted from error

    def _expect(self, value: Any, kind: type, method: str) -> Any:
        if not isinstance(value, kind):
            error = TypeError(
                f"Checkpointer.{method} must return {a(kind.__name__)}, got {value!r}"
            )
            self.abort(error)
            raise RunAborted from error
        return value

    async def open_scope(
        self, graph: Graph, path: str, parent: Attempt | None, inputs: Values
    ) -> Scope:
        if self.noop:
            if self.aborted:
                raise RunAborted
            return Scope(id="", graph=graph, path=path, parent=parent)
        scope = await self._call(self.cp.open_scope(graph, path, parent, inputs))
        return self._expect(scope, Scope, "open_scope")

    async def begin_node(self, scope: Scope, node: Node, nr: NodeCall) -> Attempt:
        if self.noop:
            if self.aborted:
                raise RunAborted
            return Attempt(id="", scope=scope, node=node)
        attempt = await self._call(self.cp.begin_node(scope, node), nr)
        if type(attempt) is Attempt:  # the usual answer, told without a call
            return attempt
        return self._expect(attempt, Attempt, "begin_node")

    async def begin_try(self, parent: Attempt, boundary: str, index: int, limit: int) -> Attempt:
        if self.noop:
            if self.aborted:
                raise RunAborted
            return Attempt(
                id="",
                scope=parent.scope,
                node=parent.node,
                parent=parent,
                boundary=boundary,
                index=index,
                limit=limit,
            )
        attempt = await self._call(self.cp.begin_try(parent, boundary, index, limit))
        return self._expect(attempt, Attempt, "begin_try")

    async def fail_attempt(
        self, attempt: Attempt, error: BaseException, nr: NodeCall | None = None
    ) -> None:
        if not self.noop:
            await self._call(self.cp.fail_attempt(attempt, error), nr)

    async def commit_node(self, attempt: Attempt, outputs: NodeOutputs, nr: NodeCall) -> None:
        if self.noop:
            if self.aborted:
                raise RunAborted
            return
        await self._call(self.cp.commit_node(attempt, outputs), nr)

    async def open_stream(self, attempt: Attempt, key: Key[Any], stream: Stream[Any]) -> None:
        if self.noop:
            if self.aborted:
                raise RunAborted
            return
        await self._call(self.cp.open_stream(attempt, key, stream))

    def queue(self, call: Any, *arguments: Any) -> Any:
        """A synchronous per-element call of the checkpointer: ``call(*arguments)``, where
        ``call`` is its ``queue_element`` or ``queue_ack`` (``NotImplemented``: await
        ``send_element`` or ``ack_elements`` instead).

        Raises:
            RunAborted: the run was already stopped, or the call raised (the run stops).
        """
        if self.aborted:
            raise RunAborted
        try:
            return call(*arguments)
        except Exception as error:
            self.abort(error)
            raise RunAborted from error

    def node_running(self, attempt: Attempt | None) -> None:
        """The checkpointer's ``node_running`` (a failure stops the run; the body goes on
        until the run's cancellation reaches it)."""
        if self.noop or self.aborted or attempt is None:
            return
        try:
            self.cp.node_running(attempt)
        except Exception as error:
            self.abort(error)

    def restore_nodes(self, scope: Scope, nodes: Sequence[Node]) -> Sequence[Attempt | None] | None:
        """The checkpointer's ``restore_nodes``: one answer per node (a restored attempt, or
        None), or None when nothing is restored (no checkpointer, or the run was aborted)."""
        if self.noop or self.aborted:
            return None
        try:
            attempts = self.cp.restore_nodes(scope, nodes)
        except Exception as error:
            self.abort(error)
            return None
        problem = None
        try:
            if len(attempts) != len(nodes):
                problem = f"{len(attempts)} answers for {len(nodes)} nodes"
        except TypeError:
            problem = f"got {attempts!r}"
        if problem is None:
            for attempt in attempts:
                if attempt is not None and (
                    not isinstance(attempt, Attempt) or attempt.restored is None
                ):
                    problem = f"got {attempt!r}"
                    break
        if problem is not None:
            self.abort(
                TypeError(
                    "Checkpointer.restore_nodes must return one answer per node, each None or "
                    f"an Attempt with restored outputs: {problem}"
                )
            )
            return None
        return attempts

    def share(self, scope: Scope, attempt: Attempt | None, ready: Mapping[str, Any]) -> Any:
        """The checkpointer's ``share``: how ``ready`` reaches its readers (no-op: ``ready``)."""
        if self.noop or not ready:
            return ready
        try:
            shared = self.cp.share(scope, attempt, ready)
        except Exception as error:
            self.abort(error)
            raise RunAborted from error
        if shared is not ready and (
            not isinstance(shared, Mapping) or shared.keys() != ready.keys()
        ):
            error = TypeError(
                f"Checkpointer.share must return a mapping of the names {sorted(ready)}, got "
                f"{shared!r}"
            )
            self.abort(error)
            raise RunAborted from error
        return shared

    async def close_scope(self, scope: Scope, status: RunStatus) -> None:
        if not self.noop and not self.aborted:
            with contextlib.suppress(RunAborted, asyncio.CancelledError):
                await self._call(self.cp.close_scope(scope, str(status)))

    # -- checks of what a checkpointer hands back -------------------------------------------

    def _corrupt(self, path: str, what: str, problem: str) -> RunAborted:
        error = CorruptRecordError(
            f"checkpoint {what} of node {path!r} do not match the graph definition: "
            f"{problem}. The record and the graph disagree; resume with the graph the run "
            "was started with",
            rule="S-10" if what == "staged values" else "R-NODE-1",
        )
        self.abort(error)
        return RunAborted()

    def check_outputs(self, path: str, keys: dict[str, Key[Any]], outputs: Any) -> NodeOutputs:
        if not isinstance(outputs, NodeOutputs):
            raise self._corrupt(path, "outputs", f"expected NodeOutputs, got {outputs!r}")
        if (
            not outputs.skipped
            and outputs.reason is NodeReason.COMPLETED
            and outputs.ready.keys() == keys.keys()
        ):  # the usual case: every provided key ready
            if not outputs.checked:  # checked: decoded with a check of each declared type
                self._check_values(path, "outputs", outputs.ready, keys, streams=True)
            return outputs
        ready = set(outputs.ready)
        both = ready & outputs.skipped
        if both:
            raise self._corrupt(path, "outputs", f"keys {sorted(both)} are ready and skipped")
        covered = ready | outputs.skipped
        if covered != set(keys):
            raise self._corrupt(
                path,
                "outputs",
                f"they cover {sorted(covered)} but the node provides {sorted(keys)}",
            )
        if outputs.reason is NodeReason.SKIPPED and ready:
            raise self._corrupt(path, "outputs", "a skipped node with ready outputs")
        if not outputs.checked:
            self._check_values(path, "outputs", outputs.ready, keys, streams=True)
        return outputs

    def check_staged(self, path: str, keys: dict[str, Key[Any]], staged: Any) -> None:
        if not isinstance(staged, Values):
            raise self._corrupt(path, "staged values", f"expected Values, got {staged!r}")
        names = set(staged.ready) | set(staged.skipped)
        unknown = names - set(keys)
        if unknown or set(staged.ready) & staged.skipped:
            raise self._corrupt(path, "staged values", f"undeclared or duplicate keys {names}")
        self._check_values(path, "staged values", staged.ready, keys, streams=False)

    def _check_values(
        self,
        path: str,
        what: str,
        values: Mapping[str, Any],
        keys: dict[str, Key[Any]],
        streams: bool,
    ) -> None:
        for name, value in values.items():
            key = keys[name]
            if key.stream:
                if not streams or not isinstance(value, Stream):
                    raise self._corrupt(path, what, f"stream key {name!r} holds {value!r}")
            elif not key.accepts(value):
                raise self._corrupt(
                    path, what, f"key {name!r} holds {a(type(value).__name__)}, expected {key!r}"
                )
