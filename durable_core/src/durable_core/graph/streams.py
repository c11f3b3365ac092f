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

Back-pressure: each group buffers at most the key's ``capacity`` elements; ``send`` waits while any
attached group is full, until every group has room for half its capacity again (so that a waiting
producer sends a run of elements, not one per element read). A reader node that ends (completed,
skipped or failed) detaches its group, so it never holds the producer back. An ``async def`` body
gives its ``max_running`` slot back while it waits on a stream (and while it awaits an ack that a
durable run saves: :class:`~durable_core.graph.checkpoint.AckFuture`); a plain body keeps its slot
(and worker thread) while it waits, so with plain bodies ``max_running`` must leave room for the
producer and its readers. A producer that never waits for room gives the event loop a turn every
:data:`TURN_EVERY` elements (not after each one): readers, saves and cancellations go on then.

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

This module holds the ends a body holds: :class:`StreamWriter`, :class:`StreamReader`, their
blocking forms for plain bodies and :class:`Delivery`. :class:`Stream` and :class:`StreamState`
are in :mod:`durable_core.graph.streamstate` and importable from here.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from durable_core.errors import SlotError
from durable_core.graph.checkpoint import AckFuture
from durable_core.graph.signals import RunAborted, direct_call, eager_call
from durable_core.graph.streamstate import _NOTHING, Stream, StreamState
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
        nr = rc._node_run
        stream = nr.streams.get(self._key.name)
        if stream is None or nr.opening:  # not open yet, or still opening: open it, or wait
            stream = await rc._open_stream(self._key)
            rc._check_live(self._key)
        while not stream.writable():
            await rc._idle(stream.wait_writable())
            rc._check_live(self._key)  # the try may have ended meanwhile
        sequence = stream.advance(position, positioned)
        run = nr.scope.run
        if run.noop:
            stream.push(sequence, element)
            return
        attempt = nr.attempt
        assert attempt is not None
        # The call only queues the element's save: no task of its own, it cannot be canceled
        # midway (a checkpointer with ``queue_element``: no coroutine either). The producer
        # gives the loop a turn every TURN_EVERY elements (and whenever it waits for room),
        # not after each one: a turn costs more than an element, and the elements sent
        # meanwhile share one save.
        saved = run.queue(run.cp.queue_element, attempt, self._key, stream, sequence, element)
        if saved is NotImplemented:
            saved = await direct_call(
                run, run.cp.send_element(attempt, self._key, stream, sequence, element)
            )
        if saved is not None and not isinstance(saved, asyncio.Future):
            saved = asyncio.ensure_future(saved)
        stream.push(sequence, element, saved, run.abort)
        if not sequence % TURN_EVERY:
            await _one_turn()

    async def send_many(self, elements: Iterable[T]) -> None:
        """Send each element of ``elements`` in order (with :meth:`send`)."""
        for element in elements:
            await self.send(element)


TURN_EVERY = 256
"""A producer that never waits for room gives the event loop a turn after this many elements
(readers, saves and cancellations then go on; a canceled producer stops there at the latest)."""


@types.coroutine
def _one_turn() -> Generator[None, None, None]:
    # ``await asyncio.sleep(0)`` without its two frames: the task goes on at the loop's next turn.
    yield


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
        return reader._ack_soon(self)


async def _saved(call: asyncio.Future[Any]) -> None:
    # The ack call's outcome, then the save it returned.
    saved = await call
    if saved is not None:
        await saved


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
        rc, key, stream, group = self._rc, self._key, self._stream, self._group
        while True:
            # An element already buffered is taken without a coroutine; otherwise wait for one.
            rc._check_live(key)
            try:
                item = stream.poll(group)
                if item is _NOTHING:
                    item = await self._next()
            except StopAsyncIteration:
                return
            yield Delivery(self, item[0], item[1], stream.generation)

    def _ack_soon(self, delivery: Delivery[T]) -> asyncio.Future[None]:
        """Queue ``delivery``'s ack; the future succeeds once it is saved. No task is made
        when the checkpointer's call only queues the save and hands back a future of its own
        (the durable one), no coroutine either when it does so in ``queue_ack``, which also
        reads the future's failure itself; any other future gets :func:`_retrieve`."""
        rc = self._rc
        run = rc._node_run.scope.run
        if run.noop:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        attempt = rc._node_run.attempt
        assert attempt is not None
        try:
            queued = run.queue(
                run.cp.queue_ack,
                attempt,
                self._key,
                self._stream,
                self._group,
                delivery.generation,
                (delivery.sequence,),
            )
        except RunAborted as aborted:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(aborted)
            failed.add_done_callback(_retrieve)
            return failed
        if queued is not NotImplemented:
            if queued is None:
                done = asyncio.get_running_loop().create_future()
                done.set_result(None)
                return done
            if queued.__class__ is AckFuture and not rc._blocking_body:
                queued.body = rc._node_run  # awaited by the body, it gives the slot back
                queued.holder = rc
            return queued
        future = self._ack_call(attempt, delivery)
        future.add_done_callback(_retrieve)
        return future

    def _ack_call(self, attempt: Any, delivery: Delivery[T]) -> asyncio.Future[Any]:
        # A checkpointer without ``queue_ack``: its ``ack_elements`` coroutine.
        run = self._rc._node_run.scope.run
        call = eager_call(
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
        if call.done():
            if call.exception() is not None:
                return call
            saved = call.result()
            if saved is None:
                return call
            if asyncio.isfuture(saved):
                return saved
        return asyncio.ensure_future(_saved(call))


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
