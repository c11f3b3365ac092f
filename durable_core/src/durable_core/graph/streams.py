"""Streams: ordered elements from one producer node to reading groups (G-10).

A stream key (``Key("lines", str, stream=True)``) is provided by one producer node. The body
gets a writer with ``rc.writer(KEY)`` and sends elements; the stream opens (and its slot becomes
ready, so readers start) at the first ``send`` or an explicit ``open``. A producer that asked for
a writer but sent nothing still publishes an empty stream; a producer that never asked for a
writer leaves the key skipped, like an unwritten value key.

Every node that requires the stream key reads it as its own reading group, named by the node's
path (``"count"``, ``"report/count"`` for a reader inside the Sub node ``report``); each group
receives every element, in order. Groups are attached when the stream is published, before the
first element, for every reader in the graph (and, through ``In`` bindings, in child graphs),
so no reader misses elements by starting late.

Back-pressure: each group buffers at most the key's ``capacity`` elements; ``send`` waits while
any attached group is full. A reader node that ends (completed, skipped or failed) detaches its
group, so it never holds the producer back. An ``async def`` body gives its ``max_running`` slot
back while it waits on a stream; a plain body keeps its slot (and worker thread) while it waits,
so with plain bodies ``max_running`` must leave room for the producer and its readers.

Readers run again by a Retry: a new try of a Sub node is a new scope, so its readers of a
parent's stream are new groups (:meth:`Stream.reopen`) that read the stream from its first
element; a processor there starts from its initial state. While a Sub node with a Retry around
a reader can still start a try (the reader's *anchor*), the stream keeps every element it
delivered; the end of the last such Sub node drops them. A reader with a Retry of its own stays
one group: what a failed try received and did not acknowledge goes back to the group
(:meth:`Stream.requeue`), so the next try gets it first.

The stream ends when the producer's node has returned and its outputs are committed (readers
then stop iterating). When the producer fails, readers get
:class:`~durable_core.errors.NodeFailedError` (the producer's error as ``__cause__``) at their
next read, even if elements are still buffered: a failed source's elements are void. A Retry of
the producer continues the same stream (streams belong to the node's root attempt): the next try
gets a writer whose ``position`` tells where the earlier try stopped.

Positions and deliveries (durable streams, SPEC S-1…S-6): ``send_at(element, position)`` sends
an element together with the producer's new position (any JSON value: an offset, a line number,
a cursor string); ``writer.position`` is the last position so sent (for a producer that only
uses ``send``: the number of elements sent, 0 on a fresh start). A reader either iterates values
(``async for x in rc.reader(KEY)``), or iterates :class:`Delivery` objects
(``async for d in rc.reader(KEY).deliveries()``) and acknowledges each with ``await d.ack()``.
With the plain engine acks change nothing; with a durable run they are saved, and an element
acked by a group is never delivered to that group again (see ``docs/durable.md``).

:class:`Stream` is also the value of a stream key in :class:`~durable_core.graph.NodeOutputs`
and the factory a checkpointer uses to restore a confirmed stream (:meth:`Stream.replay`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from durable_core.errors import NodeFailedError, SlotError
from durable_core.graph.signals import direct_call
from durable_core.graph.waits import waiting

if TYPE_CHECKING:
    from durable_core.graph.context import RunContext
    from durable_core.graph.keys import Key

__all__ = [
    "BlockingDelivery",
    "BlockingStreamReader",
    "BlockingStreamWriter",
    "Delivery",
    "Stream",
    "StreamReader",
    "StreamState",
    "StreamWriter",
]

T = TypeVar("T")

_log = logging.getLogger("durable_core.graph")

_NOTHING: Any = object()
_NO_TAILS: Mapping[str, tuple[tuple[int, Any], ...]] = MappingProxyType({})


@attrs.frozen
class StreamState:
    """Where a stream stood when an earlier process stopped (S-2, S-3).

    A checkpointer hands it to the engine in :attr:`Attempt.streams` (an adopted producer's
    streams) or builds a restored stream from it (:meth:`Stream.restore`).

    Attributes:
        sequence: the sequence number of the last element sent and saved (0: none).
        position: the producer's last saved position (decoded), when ``positioned``.
        positioned: whether a position was saved with ``send_at``.
        resumable: whether every element was sent with ``send_at`` (S-3).
        generation: the generation of this process's deliveries (raised once per resume).
        tails: the unacknowledged elements of each reading group, ``(sequence, element)`` in
            sequence order; a group not listed starts with the next new element.
        retained: whether ``history`` holds every element sent so far (1 … ``sequence``), kept
            for reading groups that a Retry of an enclosing Sub node may open again.
        history: when ``retained``: every element sent so far, ``(sequence, element)``.
    """

    sequence: int = 0
    position: Any = None
    positioned: bool = False
    resumable: bool = True
    generation: int = 1
    tails: Mapping[str, tuple[tuple[int, Any], ...]] = _NO_TAILS
    retained: bool = False
    history: tuple[tuple[int, Any], ...] = ()


class _Group:
    __slots__ = ("buffer", "received", "waiter")

    def __init__(self, elements: Iterable[tuple[int, Any]] = (), keep: bool = False) -> None:
        self.buffer: deque[tuple[int, Any]] = deque(elements)
        self.waiter: asyncio.Future[None] | None = None
        # Elements received and not acknowledged yet, by sequence (a reader with its own
        # Retry: a failed try hands them to the next one); None when not kept.
        self.received: dict[int, Any] | None = {} if keep else None


class Stream(Generic[T]):
    """The channel behind a stream key: one producer, reading groups, bounded buffers.

    Created by the engine when a producer opens the stream, or by :meth:`replay` /
    :meth:`restore`. All methods run on the event loop thread; bodies use the writers and
    readers of their run context. Elements carry their sequence number (1, 2, …).

    An element sent while a checkpointer saves it (a durable run) is held back until its save
    has succeeded: no reader sees an element before it is saved (S-2). Several elements may
    share one save (group commit); they reach readers in sequence order.

    Args:
        key: the stream key.

    Attributes:
        generation: the generation of this process's deliveries (1 with the plain engine).
        position: the producer's last ``send_at`` position (None before any).
        positioned: whether a position was given with ``send_at``.
        resumable: False once an element was sent with ``send`` (no position covers it).
        data: free for a checkpointer's own bookkeeping; the engine never reads it.
    """

    def __init__(self, key: Key[T]) -> None:
        if not key.stream:
            raise SlotError(f"key {key.name!r} is a value key; a Stream needs a stream key")
        self.key = key
        self.capacity = key.capacity
        self._groups: dict[str, _Group] = {}
        self._sequence = 0
        self._state = "open"
        self._failure: tuple[str, str, BaseException | None] | None = None
        self._space: asyncio.Future[None] | None = None
        self._tails: Mapping[str, tuple[tuple[int, Any], ...]] | None = None
        self._replay: tuple[tuple[int, Any], ...] | None = None
        self._unsaved: deque[tuple[int, Any, asyncio.Future[Any] | None]] = deque()
        # Reading groups that a Retry of an enclosing Sub may open again, with the path of the
        # outermost such Sub (their anchor); while any is left, every element delivered is
        # kept in _history, so that such a new group reads the stream from its first element.
        self._anchors: dict[str, str] = {}
        self._keep: set[str] = set()
        self._history: list[tuple[int, Any]] | None = None
        self._can_retain = True
        self._base: tuple[tuple[int, Any], ...] = ()
        self.generation = 1
        self.position: Any = None
        self.positioned = False
        self.resumable = True
        self.data: Any = None

    @classmethod
    def replay(
        cls, key: Key[T], elements: Iterable[T], *, failed: BaseException | None = None
    ) -> Stream[T]:
        """A finished stream that delivers ``elements`` to every group, then its end.

        A way to give a graph a stream as a root input, and the factory a checkpointer uses for
        a read-only failed endpoint (``failed`` given, no elements).

        Args:
            key: the stream key.
            elements: the elements every reading group receives, in order.
            failed: when given, groups get a failure (with this error as cause) instead.

        Returns:
            A stream that is already ended (or failed).
        """
        stream = cls(key)
        stream._replay = tuple(enumerate(elements, 1))
        stream._sequence = len(stream._replay)
        stream._base = stream._replay
        if failed is None:
            stream._state = "completed"
        else:
            stream._state = "failed"
            stream._failure = (f"stream {key.name!r} failed", "", failed)
        return stream

    @classmethod
    def restore(cls, key: Key[T], state: StreamState) -> Stream[T]:
        """A completed stream rebuilt from a checkpoint: each group gets its unacked tail (S-3).

        Args:
            key: the stream key.
            state: the saved state; ``tails`` holds what each group still has to read.

        Returns:
            A completed stream whose groups receive their tails, with the state's generation.
        """
        stream = cls(key)
        stream.load(state)
        stream._state = "completed"
        return stream

    def load(self, state: StreamState) -> None:
        """Continue from ``state`` (an adopted producer's stream, before it is published)."""
        self._sequence = state.sequence
        self.position = state.position
        self.positioned = state.positioned
        self.resumable = state.resumable
        self.generation = state.generation
        self._tails = state.tails
        # A stream restored without every element it sent cannot serve a new group from
        # the first element (a record written before elements were kept for them).
        self._can_retain = state.retained or state.sequence == 0
        self._base = tuple(state.history) if state.retained else ()

    @property
    def sequence(self) -> int:
        """How many elements were sent so far (the sequence number of the last one)."""
        return self._sequence

    @property
    def state(self) -> str:
        """``"open"``, ``"completed"`` or ``"failed"``."""
        return self._state

    @property
    def groups(self) -> tuple[str, ...]:
        """Names of the attached reading groups."""
        return tuple(self._groups)

    def __repr__(self) -> str:
        return f"<Stream {self.key.name!r} {self._state} sequence={self._sequence}>"

    # -- engine side ------------------------------------------------------------------------

    def attach(self, group: str, *, anchor: str = "", keep: bool = False) -> None:
        """Attach a reading group (no-op when attached). A replayed or restored stream fills
        it at once (a restored stream: with the group's unacked tail).

        Args:
            group: the group's name (the reading node's path).
            anchor: the path of the outermost Sub node with a Retry around the reader: while
                that node has not ended, a new try of it may open the group again (see
                :meth:`reopen`), so the stream keeps every element for it.
            keep: the reader has a Retry of its own: what a try received and did not
                acknowledge goes back to the group when the try fails (see :meth:`requeue`).
        """
        if anchor:
            if not self._anchors and self._can_retain and self._history is None:
                self._history = list(self._base)
            self._anchors[group] = anchor
        if keep:
            self._keep.add(group)
        if group in self._groups:
            return
        if self._tails is not None:
            self._groups[group] = _Group(self._tails.get(group, ()), group in self._keep)
        else:
            self._groups[group] = _Group(self._replay or (), group in self._keep)

    @property
    def retaining(self) -> bool:
        """Whether the stream keeps every element for groups a Retry may open again."""
        return self._history is not None

    def reopenable(self, prefix: str) -> tuple[str, ...]:
        """The groups under ``prefix`` that :meth:`reopen` opens again (none when the stream
        does not keep its elements)."""
        if self._history is None:
            return ()
        return tuple(name for name in self._anchors if name.startswith(prefix))

    def reopen(self, prefix: str) -> tuple[str, ...]:
        """A new try of the Sub node at ``prefix`` (``"part/"``) starts: each group under it
        that a Retry may open again becomes a new group, which reads the stream from its first
        element (a failed try's results are void, its reads included). Returns their names."""
        names = self.reopenable(prefix)
        history = self._history or ()
        for name in names:
            self._groups[name] = _Group(history, name in self._keep)
        if names:
            self._wake_producer()
        return names

    def resume_groups(self, prefix: str) -> None:
        """Give the groups under ``prefix`` their restored tails again (a checkpointer that
        adopts the Sub's try whose groups :meth:`reopen` opened anew)."""
        tails = self._tails
        if tails is None:
            return
        for name in self.reopenable(prefix):
            self._groups[name] = _Group(tails.get(name, ()), name in self._keep)

    def releases(self, path: str) -> bool:
        """Whether the end of the node at ``path`` leaves no group that a Retry may open
        again (the elements kept for them can go)."""
        if self._history is None:
            return False
        inside = path + "/"
        return all(a == path or a.startswith(inside) for a in self._anchors.values())

    def requeue(self, group: str) -> None:
        """A try of the reading node ``group`` failed: the elements it received and did not
        acknowledge are the first ones the next try gets."""
        state = self._groups.get(group)
        if state is None or not state.received:
            return
        state.buffer.extendleft(reversed(state.received.items()))
        state.received.clear()

    def acked(self, group: str, sequence: int) -> None:
        """``group`` acknowledged element ``sequence`` (a failed try does not hand it on)."""
        state = self._groups.get(group)
        if state is not None and state.received:
            state.received.pop(sequence, None)

    def detach(self, group: str) -> None:
        """Detach a reading group: its buffer is dropped and it no longer holds back sends."""
        if self._groups.pop(group, None) is not None:
            self._wake_producer()

    def detach_prefix(self, prefix: str) -> None:
        """Detach every group whose name starts with ``prefix``: the Sub node at ``prefix``
        ended for good, so no Retry opens the groups it anchors again."""
        for name in [name for name in self._groups if name.startswith(prefix)]:
            del self._groups[name]
        if self._anchors:
            path = prefix[:-1]
            for name in [n for n, a in self._anchors.items() if a == path or a.startswith(prefix)]:
                del self._anchors[name]
            if not self._anchors:
                self._history = None
                self._can_retain = False
        self._wake_producer()

    def end(self) -> None:
        """The producer finished: readers stop after the buffered elements."""
        if self._state == "open":
            self._state = "completed"
            self._wake_readers()

    def fail(self, message: str, path: str, cause: BaseException | None) -> None:
        """The producer failed: readers raise ``NodeFailedError(message)`` from ``cause``."""
        if self._state == "open":
            self._state = "failed"
            self._failure = (message, path, cause)
            self._wake_readers()
            self._wake_producer()

    # -- producer ---------------------------------------------------------------------------

    def writable(self) -> bool:
        """True when no attached group is full (elements still being saved count)."""
        limit = self.capacity - len(self._unsaved)
        if limit <= 0:  # also without any group: at most ``capacity`` elements wait for a save
            return False
        return all(len(group.buffer) < limit for group in self._groups.values())

    async def wait_writable(self) -> None:
        """Wait until :meth:`writable` may have become true."""
        if self.writable() or self._state != "open":
            return
        self._space = waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            if self._space is waiter:
                self._space = None

    def advance(self, position: Any, positioned: bool) -> int:
        """Take the next sequence number for an element sent with (or without) a position."""
        if self._state != "open":
            raise SlotError(f"stream {self.key.name!r} is {self._state}; it takes no elements")
        self._sequence += 1
        if positioned:
            self.position = position
            self.positioned = True
        else:
            self.resumable = False
        return self._sequence

    def push(
        self,
        sequence: int,
        element: T,
        saved: asyncio.Future[Any] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Hand element ``sequence`` to every group, once ``saved`` (when given) succeeded.

        Elements reach the groups in sequence order; one whose save failed, and every later
        one, never does (``on_error`` gets the save's exception).
        """
        if saved is None and not self._unsaved:
            self._deliver(sequence, element)
            return
        self._unsaved.append((sequence, element, saved))
        if saved is not None:

            def done(future: asyncio.Future[Any]) -> None:
                if not future.cancelled() and future.exception() is not None and on_error:
                    on_error(future.exception())  # type: ignore[arg-type]
                self._drain()

            saved.add_done_callback(done)

    def _drain(self) -> None:
        unsaved = self._unsaved
        while unsaved:
            sequence, element, saved = unsaved[0]
            if saved is not None:
                if not saved.done():
                    return
                if saved.cancelled() or saved.exception() is not None:
                    return  # never delivered: the run stops
            unsaved.popleft()
            self._deliver(sequence, element)
        self._wake_readers()
        if self._space is not None:
            self._wake_producer()

    def _deliver(self, sequence: int, element: T) -> None:
        if self._history is not None:
            self._history.append((sequence, element))
        for group in self._groups.values():
            group.buffer.append((sequence, element))
            waiter = group.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _wake_producer(self) -> None:
        waiter = self._space
        if waiter is not None and not waiter.done() and (self.writable() or self._failure):
            waiter.set_result(None)

    def _wake_readers(self) -> None:
        for group in self._groups.values():
            waiter = group.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    # -- readers ----------------------------------------------------------------------------

    def poll(self, group: str) -> Any:
        """The next ``(sequence, element)`` of ``group``, or a private marker when none is
        buffered yet.

        Raises:
            StopAsyncIteration: the stream ended and the group's buffer is empty.
            NodeFailedError: the producer failed.
        """
        failure = self._failure
        if failure is not None:
            message, path, cause = failure
            raise NodeFailedError(message, path) from cause
        state = self._groups.get(group)
        if state is None:
            self.attach(group)
            state = self._groups[group]
        if state.buffer:
            item = state.buffer.popleft()
            if state.received is not None:
                state.received[item[0]] = item[1]
            if self._space is not None:
                self._wake_producer()
            return item
        if self._state != "open" and not self._unsaved:
            raise StopAsyncIteration
        return _NOTHING

    async def wait_readable(self, group: str) -> None:
        """Wait until ``group`` may have an element, or the stream ended or failed."""
        state = self._groups.get(group)
        if state is None or state.buffer or (self._state != "open" and not self._unsaved):
            return
        if self._failure is not None:
            return
        state.waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            if state.waiter is waiter:
                state.waiter = None


class StreamWriter(Generic[T]):
    """The producer's end of a stream in an ``async def`` body (from ``rc.writer(KEY)``)."""

    def __init__(self, rc: RunContext, key: Key[T]) -> None:
        self._rc = rc
        self._key = key

    @property
    def key(self) -> Key[T]:
        """The stream key."""
        return self._key

    @property
    def position(self) -> Any:
        """Where the producer stands: the position given with the last ``send_at`` (restored
        after a restart, S-3), or, for a producer that never gave one, the number of elements
        sent so far (0 on a fresh start; all tries of a Retry included)."""
        nr = self._rc._node_run
        stream = nr.streams.get(self._key.name)
        if stream is not None:
            return stream.position if stream.positioned else stream.sequence
        attempt = nr.attempt
        saved = (
            None if attempt is None or not attempt.streams else attempt.streams.get(self._key.name)
        )
        if saved is not None:
            return saved.position if saved.positioned else saved.sequence
        return 0

    async def open(self) -> None:
        """Open (publish) the stream now; readers may start. ``send`` opens it too."""
        await self._rc._open_stream(self._key)

    async def send(self, element: T) -> None:
        """Send one element without a position; waits while a reading group's buffer is full.

        A durable run cannot resume a producer that sent with ``send`` from where it stopped:
        use :meth:`send_at` for a producer that must survive a restart (S-3).

        Raises:
            SlotError: the element is not an instance of the key's type, or the node's try has
                ended.
        """
        await self._send(element, None, False)

    async def send_at(self, element: T, position: Any) -> None:
        """Send one element together with the producer's new ``position`` (S-3).

        In a durable run the element and the position are saved in one save before any reader
        sees the element; after a restart :attr:`position` returns the last saved position,
        and the producer goes on from there. ``position`` is any JSON value (int, float, str,
        bool, None, lists and dicts of them; a tuple comes back as a list).

        Raises:
            SlotError: as :meth:`send`.
            CodecError: (durable runs) the element or the position cannot be encoded; the run
                stops.
        """
        await self._send(element, position, True)

    async def _send(self, element: T, position: Any, positioned: bool) -> None:
        rc = self._rc
        rc._check_live(self._key)
        if not self._key.accepts(element):
            raise SlotError(
                f"node {rc.path!r}: stream {self._key.name!r} takes {self._key!r} elements, "
                f"got {type(element).__name__}"
            )
        stream = await rc._open_stream(self._key)
        while not stream.writable():
            await rc._idle(stream.wait_writable())
        rc._check_live(self._key)
        sequence = stream.advance(position, positioned)
        run = rc._node_run.scope.run
        if run.noop:
            stream.push(sequence, element)
            return
        attempt = rc._node_run.attempt
        assert attempt is not None
        saved = await run._call(run.cp.send_element(attempt, self._key, stream, sequence, element))
        future = None if saved is None else asyncio.ensure_future(saved)
        stream.push(sequence, element, future, run.abort)

    async def send_many(self, elements: Iterable[T]) -> None:
        """Send each element of ``elements`` in order (with :meth:`send`)."""
        for element in elements:
            await self.send(element)


class BlockingStreamWriter(Generic[T]):
    """The producer's end of a stream in a plain (``def``) body; methods block the thread."""

    def __init__(self, rc: RunContext, key: Key[T]) -> None:
        self._async = StreamWriter(rc, key)
        self._rc = rc

    @property
    def key(self) -> Key[T]:
        """The stream key."""
        return self._async.key

    @property
    def position(self) -> Any:
        """As :attr:`StreamWriter.position`."""
        return self._async.position

    def open(self) -> None:
        """Open (publish) the stream now; readers may start. ``send`` opens it too."""
        self._rc._blocking(self._async.open())

    def send(self, element: T) -> None:
        """As :meth:`StreamWriter.send`; blocks while a reading group's buffer is full."""
        self._rc._blocking(self._async.send(element))

    def send_at(self, element: T, position: Any) -> None:
        """As :meth:`StreamWriter.send_at`; blocks while a reading group's buffer is full."""
        self._rc._blocking(self._async.send_at(element, position))

    def send_many(self, elements: Iterable[T]) -> None:
        """Send each element of ``elements`` in order."""
        for element in elements:
            self.send(element)


class Delivery(Generic[T]):
    """One element as delivered to a reading group, with its acknowledgement (S-2).

    Attributes:
        value: the element.
        sequence: its sequence number in the stream (1, 2, …).
        generation: the generation of the process that delivered it.
        group: the reading group.
    """

    __slots__ = ("_reader", "generation", "group", "sequence", "value")

    def __init__(self, reader: StreamReader[T], sequence: int, value: T, generation: int) -> None:
        self._reader = reader
        self.value = value
        self.sequence = sequence
        self.generation = generation
        self.group = reader.group

    def __repr__(self) -> str:
        return f"<Delivery {self.group!r} #{self.sequence} generation {self.generation}>"

    def ack(self) -> asyncio.Future[None]:
        """Acknowledge the element for its group (S-2).

        The ack is queued at once; the returned future succeeds once it is saved. ``await
        d.ack()`` therefore returns when the ack is durable. A reader may also call ``d.ack()``
        without awaiting it: its acks are then saved together with the next saves (group
        commit), and after a crash an element whose ack was not saved yet is delivered again.
        An acked element is never delivered to this group again; acking twice changes nothing.
        With the plain engine it only checks that the node is still running.

        Returns:
            A future that succeeds once the ack is saved; it raises what the ack raised.

        Raises:
            SlotError: the node's try has ended.
            StaleDeliveryError: (from the future, durable runs) the delivery belongs to an
                older generation.
            StreamFailedError: (from the future, durable runs) the stream's source failed.
        """
        reader = self._reader
        reader._rc._check_live(reader._key)
        reader._stream.acked(reader._group, self.sequence)  # a failed try does not hand it on
        future = asyncio.ensure_future(reader._ack(self))
        future.add_done_callback(_retrieve)
        return future


def _retrieve(future: asyncio.Future[Any]) -> None:
    # An ack nobody awaits: its error is in the log rather than "never retrieved" noise.
    if not future.cancelled() and future.exception() is not None:
        _log.warning("an ack that was not awaited failed: %s", future.exception())


class BlockingDelivery(Generic[T]):
    """A :class:`Delivery` in a plain body: :meth:`ack` blocks until the ack is saved."""

    __slots__ = ("_delivery", "_rc")

    def __init__(self, rc: RunContext, delivery: Delivery[T]) -> None:
        self._rc = rc
        self._delivery = delivery

    @property
    def value(self) -> T:
        """The element."""
        return self._delivery.value

    @property
    def sequence(self) -> int:
        """Its sequence number."""
        return self._delivery.sequence

    @property
    def generation(self) -> int:
        """The generation of the process that delivered it."""
        return self._delivery.generation

    @property
    def group(self) -> str:
        """The reading group."""
        return self._delivery.group

    def __repr__(self) -> str:
        return repr(self._delivery)

    def ack(self, *, wait: bool = True) -> None:
        """As :meth:`Delivery.ack`: blocks until the ack is saved, or, with ``wait=False``,
        only queues it (saved with the next saves)."""
        if wait:
            self._rc._blocking(self._ack())
        else:
            self._rc._node_run.scope.run.loop.call_soon_threadsafe(self._delivery.ack)

    async def _ack(self) -> None:
        await self._delivery.ack()


class StreamReader(Generic[T]):
    """A reading group's end of a stream in an ``async def`` body.

    ``async for x in reader`` yields values; with a durable run everything the group received
    is acknowledged when its node is confirmed. ``async for d in reader.deliveries()`` yields
    :class:`Delivery` objects to acknowledge one by one.
    """

    def __init__(self, rc: RunContext, key: Key[T], stream: Stream[T]) -> None:
        self._rc = rc
        self._key = key
        self._stream = stream
        self._group = rc.path

    @property
    def group(self) -> str:
        """The reading group's name (the reading node's path)."""
        return self._group

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        return (await self._next())[1]

    async def _next(self) -> tuple[int, T]:
        stream = self._stream
        while True:
            self._rc._check_live(self._key)
            item = stream.poll(self._group)
            if item is not _NOTHING:
                return item
            if self._key.inbox:  # nothing posted for this group yet: the run waits (X-WAIT)
                with waiting(self._rc.path, self._key.name):
                    await self._rc._idle(stream.wait_readable(self._group))
                continue
            await self._rc._idle(stream.wait_readable(self._group))

    async def receive(self) -> T:
        """The next element.

        Raises:
            StopAsyncIteration: the stream ended.
            NodeFailedError: the producer failed.
        """
        return await self.__anext__()

    async def receive_delivery(self) -> Delivery[T]:
        """The next element as a :class:`Delivery`.

        Raises:
            StopAsyncIteration: the stream ended.
            NodeFailedError: the producer failed.
        """
        sequence, value = await self._next()
        return Delivery(self, sequence, value, self._stream.generation)

    async def deliveries(self) -> AsyncIterator[Delivery[T]]:
        """Iterate the group's elements as :class:`Delivery` objects, in sequence order.

        After a restart of a durable run: the first element the group has not acknowledged.
        """
        while True:
            try:
                yield await self.receive_delivery()
            except StopAsyncIteration:
                return

    async def _ack(self, delivery: Delivery[T]) -> None:
        rc = self._rc
        run = rc._node_run.scope.run
        if run.noop:
            return
        attempt = rc._node_run.attempt
        assert attempt is not None
        saved = await direct_call(
            run,
            run.cp.ack_elements(
                attempt,
                self._key,
                self._stream,
                self._group,
                delivery.generation,
                (delivery.sequence,),
            ),
        )
        if saved is not None:
            await saved


class BlockingStreamReader(Generic[T]):
    """A reading group's end of a stream in a plain body (``for x in reader``)."""

    def __init__(self, rc: RunContext, key: Key[T], stream: Stream[T]) -> None:
        self._async = StreamReader(rc, key, stream)
        self._rc = rc

    @property
    def group(self) -> str:
        """The reading group's name (the reading node's path)."""
        return self._async.group

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            return self._rc._blocking(self._async.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def receive(self) -> T:
        """The next element; blocks until one arrives.

        Raises:
            StopIteration: the stream ended.
            NodeFailedError: the producer failed.
        """
        return self.__next__()

    def deliveries(self) -> Iterator[BlockingDelivery[T]]:
        """As :meth:`StreamReader.deliveries`, each with a blocking ``ack()``."""
        while True:
            try:
                delivery = self._rc._blocking(self._async.receive_delivery())
            except StopAsyncIteration:
                return
            yield BlockingDelivery(self._rc, delivery)
