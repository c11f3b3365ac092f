"""The run context a node body receives (``rc``), and the node-level skip (G-3, G-4, G-5).

A body reads its required keys with :meth:`RunContext.get`, writes its provided keys once with
:meth:`RunContext.set`, may skip one output (:meth:`RunContext.skip`) or the whole node
(:meth:`RunContext.skip_node`, or ``raise SkipNode``), and uses streams through
:meth:`RunContext.writer` and :meth:`RunContext.reader`. Touching a key the node did not declare
raises :class:`~durable_core.errors.UndeclaredKeyError`; breaking a slot rule raises
:class:`~durable_core.errors.SlotError`.

What a body sets is staged: it is published downstream only after the body returned, every
aspect succeeded and the checkpointer committed the outputs. A failed try's writes are thrown
away; the next Retry try starts with a fresh context. After the body returns, provided keys it
did not write become skipped.

Cancellation is cooperative. An ``async def`` body is canceled at its next ``await``; a plain
body runs in a worker thread and cannot be interrupted: it should look at :attr:`canceled` (or
call :meth:`raise_if_canceled`) in long loops. Stream operations of a canceled plain body raise
``asyncio.CancelledError``.

The context sees the scheduler only through the protocols :class:`BodyRun`, :class:`BodyScope`
and :class:`RunCalls` (the engine's private run classes implement them), so the engine imports
this module and never the other way round. :class:`SkipNode` lives on the ground floor
(``durable_core.outcomes``) and is re-exported here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar, overload

from durable_core.errors import SlotError, UndeclaredKeyError
from durable_core.graph.checkpoint import read_slot
from durable_core.graph.signals import Abortable
from durable_core.graph.streams import (
    BlockingStreamReader,
    BlockingStreamWriter,
    Stream,
    StreamReader,
    StreamWriter,
)
from durable_core.outcomes import SkipNode

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Attempt, Checkpointer, Values
    from durable_core.graph.definition import Graph, Node
    from durable_core.graph.keys import Key

__all__ = ["BodyRun", "BodyScope", "RunCalls", "RunContext", "ScopePlan", "SkipNode"]

T = TypeVar("T")
D = TypeVar("D")

_MISSING: Any = object()


# -- what a context sees of the engine ---------------------------------------------------------
#
# A context, the stream ends it hands out and a processor node's loop see one node's run through
# these protocols; the scheduler's private classes implement them (``_Run``, ``_ScopeRun``,
# ``_NodeRun`` in ``engine.py``), so this module never imports the scheduler.


class RunCalls(Abortable, Protocol):
    """The run's checkpointer calls, as a body's context and its stream ends make them."""

    loop: asyncio.AbstractEventLoop
    """The run's event loop (a plain body's worker thread hands coroutines to it)."""
    cp: Checkpointer
    """The run's checkpointer (the no-op one when none was given)."""
    noop: bool
    """True for the no-op checkpointer: there is nothing to call."""

    async def _call(self, coroutine: Coroutine[Any, Any, T], nr: Any = None) -> T:
        """Await a checkpointer call; a failure stops the run (``RunAborted``)."""
        ...

    def _expect(self, value: Any, kind: type, method: str) -> Any:
        """``value`` when it is a ``kind``; else stop the run (``RunAborted``)."""
        ...


class ScopePlan(Protocol):
    """The frozen plan of the graph a scope runs: each node's declared keys, by node index."""

    graph: Graph
    req_maps: list[dict[str, Key[Any]]]
    prov_maps: list[dict[str, Key[Any]]]


class BodyScope(Protocol):
    """One graph run in one scope, as a body's context sees it: what has arrived so far."""

    plan: ScopePlan
    ready: dict[str, Any]
    """Published values and streams, by key name."""
    skipped: set[str]
    """Skipped key names."""
    run: RunCalls


class BodyRun(Protocol):
    """One node's execution in one scope, as its context sees it."""

    node: Node
    path: str
    """The node's path from the root graph (``"report/count"``)."""
    index: int
    """The node's index in its scope's plan."""
    scope: BodyScope
    attempt: Attempt | None
    """The node's root attempt, once begun."""
    streams: dict[str, Stream[Any]]
    """The streams the node opened, by key name."""

    async def open_stream(self, key: Key[Any]) -> Stream[Any]:
        """Open (publish) the stream of a provided key, once; later calls return it."""
        ...

    async def idle(self, waiting: Awaitable[Any]) -> Any:
        """Await ``waiting`` without holding a ``max_running`` slot; return what it returned."""
        ...

    def may_idle(self, holder: object) -> bool:
        """True when the running task is the body's own, in the try ``holder``."""
        ...


class RunContext:
    """What a node body sees of the run: its inputs, its outputs, cancellation (G-3…G-5).

    One context is created per try of the body; do not keep it after the body returns.

    Attributes:
        node_id: the node's id in its graph.
        path: the node's path from the root graph (``"report/count"``).
        attempt: the attempt the body runs in (the innermost Retry try, or the root attempt);
            ``attempt.index`` is the try number.
    """

    __slots__ = (
        "_blocking_body",
        "_canceled",
        "_closed",
        "_node_run",
        "_prov",
        "_ready",
        "_req",
        "_requested",
        "_skipped",
        "_stop_seen",
        "_stopping",
        "_waits",
        "attempt",
        "node_id",
        "path",
    )

    def __init__(
        self, node_run: BodyRun, attempt: Attempt, blocking: bool, staged: Values | None
    ) -> None:
        self._node_run = node_run
        self.attempt = attempt
        self.node_id: str = node_run.node.id
        self.path: str = node_run.path
        plan = node_run.scope.plan
        self._req: dict[str, Key[Any]] = plan.req_maps[node_run.index]
        self._prov: dict[str, Key[Any]] = plan.prov_maps[node_run.index]
        self._blocking_body = blocking
        self._ready: dict[str, Any] = dict(staged.ready) if staged is not None else {}
        self._skipped: set[str] = set(staged.skipped) if staged is not None else set()
        self._requested: set[str] = set()
        self._closed = False
        self._canceled = False
        self._stopping = False  # the run was canceled while this plain body ran
        self._stop_seen = False  # ... and the body looked: it may have stopped early
        self._waits: set[concurrent.futures.Future[Any]] = set()

    def __repr__(self) -> str:
        return f"<RunContext {self.path!r} try {self.attempt.index}>"

    # -- declared keys ----------------------------------------------------------------------

    def _declared(self, key: Key[Any], table: dict[str, Key[Any]]) -> bool:
        known = table.get(key.name)
        return known is not None and (known is key or known == key)

    def _undeclared(self, key: object, action: str) -> UndeclaredKeyError:
        graph = self._node_run.scope.plan.graph.name
        return UndeclaredKeyError(
            f"node {self.path!r} (graph {graph!r}) {action} key {key!r}, which it does not "
            "declare; add it to the node's requires (to read) or provides (to write)"
        )

    # -- reading ----------------------------------------------------------------------------

    @overload
    def get(self, key: Key[T]) -> T: ...

    @overload
    def get(self, key: Key[T], default: D) -> T | D: ...

    def get(self, key: Key[T], default: Any = _MISSING) -> Any:
        """The value of a required key (or of a provided key this body already set).

        Args:
            key: a key in the node's ``requires`` (or ``provides``).
            default: returned when the key is skipped; without it, a skipped key raises.

        Returns:
            The value. When the run's checkpointer gives every reader its own copy (a durable
            run does, for mutable values), each call returns a new copy: mutating it changes
            nothing another node sees.

        Raises:
            UndeclaredKeyError: the node does not declare the key.
            SlotError: the key is skipped (and no default was given), a provided key was not
                set yet, or the key is a stream key (use :meth:`reader`).
        """
        scope = self._node_run.scope
        if self._declared(key, self._req):
            name = key.name
            if name in scope.ready:
                if key.stream:
                    raise SlotError(
                        f"node {self.path!r}: key {name!r} is a stream; read it with rc.reader(key)"
                    )
                return read_slot(scope.ready[name])
            if default is not _MISSING:
                return default
            raise SlotError(
                f"node {self.path!r}: required key {name!r} was skipped; check "
                "rc.skipped(key) or pass a default to rc.get(key, default)"
            )
        if self._declared(key, self._prov) and not key.stream:
            if key.name in self._ready:
                return self._ready[key.name]
            if key.name in self._skipped and default is not _MISSING:
                return default
            raise SlotError(f"node {self.path!r}: provided key {key.name!r} is not set")
        raise self._undeclared(key, "reads")

    def skipped(self, key: Key[Any]) -> bool:
        """Whether a required key (or a provided key of this body) is skipped.

        Raises:
            UndeclaredKeyError: the node does not declare the key.
        """
        if self._declared(key, self._req):
            return key.name in self._node_run.scope.skipped
        if self._declared(key, self._prov):
            return key.name in self._skipped
        raise self._undeclared(key, "asks about")

    # -- writing ----------------------------------------------------------------------------

    def _check_live(self, key: Key[Any]) -> None:
        if self._canceled:
            raise asyncio.CancelledError()
        if self._closed:
            raise SlotError(
                f"node {self.path!r}: this try of the body has ended; key {key.name!r} can no "
                "longer be used from it"
            )

    def _check_unwritten(self, key: Key[Any]) -> None:
        name = key.name
        if name in self._ready or name in self._skipped or name in self._node_run.streams:
            state = "skipped" if name in self._skipped else "written"
            raise SlotError(
                f"node {self.path!r}: key {name!r} was already {state}; a slot is written once"
            )

    def set(self, key: Key[T], value: T) -> None:
        """Write a provided value key (once).

        Raises:
            UndeclaredKeyError: the key is not in the node's ``provides``.
            SlotError: the key was already set or skipped, the value is not an instance of the
                key's type, the key is a stream key (use :meth:`writer`), or the try ended.
        """
        if not self._declared(key, self._prov):
            raise self._undeclared(key, "writes")
        self._check_live(key)
        if key.stream:
            raise SlotError(
                f"node {self.path!r}: key {key.name!r} is a stream; send elements with "
                "rc.writer(key)"
            )
        self._check_unwritten(key)
        if not key.accepts(value):
            raise SlotError(
                f"node {self.path!r}: key {key.name!r} takes {key!r} values, got "
                f"{type(value).__name__} {value!r:.80}"
            )
        self._ready[key.name] = value

    def skip(self, key: Key[Any]) -> None:
        """Mark one provided key skipped (normal absence of a value, never a failure).

        Raises:
            UndeclaredKeyError: the key is not in the node's ``provides``.
            SlotError: the key was already set or skipped, a stream was already opened, or
                the try ended.
        """
        if not self._declared(key, self._prov):
            raise self._undeclared(key, "skips")
        self._check_live(key)
        self._check_unwritten(key)
        if key.name in self._requested:
            raise SlotError(
                f"node {self.path!r}: stream {key.name!r} has a writer; it cannot be skipped"
            )
        self._skipped.add(key.name)

    def skip_node(self) -> NoReturn:
        """Skip the whole node: raises :class:`SkipNode`; every provided key becomes skipped."""
        raise SkipNode(self.path)

    # -- streams ----------------------------------------------------------------------------

    def writer(self, key: Key[T]) -> Any:
        """The writer of a provided stream key.

        In an ``async def`` body it is a :class:`~durable_core.graph.StreamWriter`
        (``await w.send(x)``); in a plain body a :class:`~durable_core.graph.BlockingStreamWriter`
        (``w.send(x)``). Asking for a writer commits the node to producing the stream: it is
        published (possibly empty) by the time the node completes.

        Raises:
            UndeclaredKeyError: the key is not in the node's ``provides``.
            SlotError: the key is a value key, or was skipped.
        """
        if not self._declared(key, self._prov):
            raise self._undeclared(key, "writes")
        self._check_live(key)
        if not key.stream:
            raise SlotError(f"node {self.path!r}: key {key.name!r} is a value key; use rc.set")
        if key.name in self._skipped:
            raise SlotError(f"node {self.path!r}: stream {key.name!r} was skipped")
        self._requested.add(key.name)
        if self._blocking_body:
            return BlockingStreamWriter(self, key)
        return StreamWriter(self, key)

    def reader(self, key: Key[T]) -> Any:
        """The reader of a required stream key, as this node's reading group.

        In an ``async def`` body a :class:`~durable_core.graph.StreamReader`
        (``async for x in reader``); in a plain body a
        :class:`~durable_core.graph.BlockingStreamReader` (``for x in reader``).

        Raises:
            UndeclaredKeyError: the key is not in the node's ``requires``.
            SlotError: the key is a value key, or the stream was skipped.
        """
        if not self._declared(key, self._req):
            raise self._undeclared(key, "reads")
        self._check_live(key)
        if not key.stream:
            raise SlotError(f"node {self.path!r}: key {key.name!r} is a value key; use rc.get")
        stream = self._node_run.scope.ready.get(key.name)
        if not isinstance(stream, Stream):
            raise SlotError(
                f"node {self.path!r}: stream {key.name!r} was skipped; check rc.skipped(key)"
            )
        if self._blocking_body:
            return BlockingStreamReader(self, key, stream)
        return StreamReader(self, key, stream)

    # -- cancellation -----------------------------------------------------------------------

    @property
    def canceled(self) -> bool:
        """True once the node was canceled (run canceled or failed, or a Timeout expired).

        A plain body still running when the run is canceled from outside (a ``CancelToken``,
        Ctrl-C) sees True too, and may stop early; its work is then dropped. A plain body that
        finishes without looking, having set every output it provides, has its outputs kept
        (confirmed) all the same."""
        if self._stopping and not self._canceled:
            self._stop_seen = True
        return self._canceled or self._stopping

    def raise_if_canceled(self) -> None:
        """Raise ``asyncio.CancelledError`` if the node was canceled."""
        if self.canceled:
            raise asyncio.CancelledError()

    # -- engine side ------------------------------------------------------------------------

    def _cancel(self) -> None:
        self._canceled = True
        for wait in list(self._waits):
            wait.cancel()

    def _stop_soon(self) -> None:
        """The run was canceled while this plain body runs: it may still finish and keep its
        work, or look at :attr:`canceled` and stop early (then its work is dropped)."""
        self._stopping = True
        for wait in list(self._waits):
            wait.cancel()

    def _close(self) -> None:
        self._closed = True

    async def _open_stream(self, key: Key[Any]) -> Stream[Any]:
        return await self._node_run.open_stream(key)

    async def _idle(self, waiting: Awaitable[None]) -> None:
        """Await ``waiting`` (a stream wait); an async body gives its slot back meanwhile."""
        if self._blocking_body:
            await waiting
            return
        await self._node_run.idle(waiting)

    def _blocking(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the event loop from a plain body's worker thread and wait.

        Once the node or the run is canceled, a wait (a stream read, an awaited ack) raises
        ``CancelledError``, and a body stopped that way keeps none of its work."""
        if self._canceled or self._stopping:
            coroutine.close()
            self._stop_seen = True
            raise asyncio.CancelledError()
        future = asyncio.run_coroutine_threadsafe(coroutine, self._node_run.scope.run.loop)
        self._waits.add(future)
        if self._canceled or self._stopping:  # canceled between the check and the wait
            future.cancel()
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            self._stop_seen = True
            raise asyncio.CancelledError() from None
        finally:
            self._waits.discard(future)

    def _written(self) -> dict[str, Any]:
        return self._ready
