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

The stream ends when the producer's node has returned and its outputs are committed (readers
then stop iterating). When the producer fails, readers get
:class:`~durable_core.errors.NodeFailedError` (the producer's error as ``__cause__``) at their
next read, even if elements are still buffered: a failed source's elements are void. A Retry of
the producer continues the same stream (streams belong to the node's root attempt): the next try
gets a writer whose ``position`` tells how many elements were sent already.

:class:`Stream` is also the value of a stream key in :class:`~durable_core.graph.NodeOutputs`
and the factory a checkpointer uses to restore a confirmed stream (:meth:`Stream.replay`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from durable_core.errors import NodeFailedError, SlotError

if TYPE_CHECKING:
    from durable_core.graph.context import RunContext
    from durable_core.graph.keys import Key

__all__ = [
    "BlockingStreamReader",
    "BlockingStreamWriter",
    "Stream",
    "StreamReader",
    "StreamWriter",
]

T = TypeVar("T")

_NOTHING: Any = object()


class _Group:
    __slots__ = ("buffer", "waiter")

    def __init__(self, elements: Iterable[Any] = ()) -> None:
        self.buffer: deque[Any] = deque(elements)
        self.waiter: asyncio.Future[None] | None = None


class Stream(Generic[T]):
    """The channel behind a stream key: one producer, reading groups, bounded buffers.

    Created by the engine when a producer opens the stream, or by :meth:`replay`. All methods
    run on the event loop thread; bodies use the writers and readers of their run context.

    Args:
        key: the stream key.
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
        self._replay: list[T] | None = None

    @classmethod
    def replay(
        cls, key: Key[T], elements: Iterable[T], *, failed: BaseException | None = None
    ) -> Stream[T]:
        """A finished stream that delivers ``elements`` to every group, then its end.

        The factory a checkpointer uses to restore a confirmed stream output (S-1), and a way to
        give a graph a stream as a root input.

        Args:
            key: the stream key.
            elements: the elements every reading group receives, in order.
            failed: when given, groups get a failure (with this error as cause) instead.

        Returns:
            A stream that is already ended (or failed).
        """
        stream = cls(key)
        stream._replay = list(elements)
        stream._sequence = len(stream._replay)
        if failed is None:
            stream._state = "completed"
        else:
            stream._state = "failed"
            stream._failure = (f"stream {key.name!r} failed", "", failed)
        return stream

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

    def attach(self, group: str) -> None:
        """Attach a reading group (no-op when attached). A replayed stream fills it at once."""
        if group not in self._groups:
            self._groups[group] = _Group(self._replay or ())

    def detach(self, group: str) -> None:
        """Detach a reading group: its buffer is dropped and it no longer holds back sends."""
        if self._groups.pop(group, None) is not None:
            self._wake_producer()

    def detach_prefix(self, prefix: str) -> None:
        """Detach every group whose name starts with ``prefix``."""
        for name in [name for name in self._groups if name.startswith(prefix)]:
            del self._groups[name]
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
        """True when no attached group is full."""
        capacity = self.capacity
        return all(len(group.buffer) < capacity for group in self._groups.values())

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

    def push(self, element: T) -> None:
        """Append ``element`` to every group (the caller checked :meth:`writable`)."""
        if self._state != "open":
            raise SlotError(f"stream {self.key.name!r} is {self._state}; it takes no elements")
        self._sequence += 1
        for group in self._groups.values():
            group.buffer.append(element)
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
        """The next element of ``group``, or a private marker when none is buffered yet.

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
            element = state.buffer.popleft()
            if self._space is not None:
                self._wake_producer()
            return element
        if self._state != "open":
            raise StopAsyncIteration
        return _NOTHING

    async def wait_readable(self, group: str) -> None:
        """Wait until ``group`` may have an element, or the stream ended or failed."""
        state = self._groups.get(group)
        if state is None or state.buffer or self._state != "open":
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
    def position(self) -> int:
        """Elements sent so far by this node (all tries of a Retry included)."""
        stream = self._rc._node_run.streams.get(self._key.name)
        return 0 if stream is None else stream.sequence

    async def open(self) -> None:
        """Open (publish) the stream now; readers may start. ``send`` opens it too."""
        await self._rc._open_stream(self._key)

    async def send(self, element: T) -> None:
        """Send one element; waits while a reading group's buffer is full (back-pressure).

        Raises:
            SlotError: the element is not an instance of the key's type, or the node's try has
                ended.
        """
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
        stream.push(element)

    async def send_many(self, elements: Iterable[T]) -> None:
        """Send each element of ``elements`` in order."""
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
    def position(self) -> int:
        """Elements sent so far by this node (all tries of a Retry included)."""
        return self._async.position

    def open(self) -> None:
        """Open (publish) the stream now; readers may start. ``send`` opens it too."""
        self._rc._blocking(self._async.open())

    def send(self, element: T) -> None:
        """Send one element; blocks while a reading group's buffer is full (back-pressure)."""
        self._rc._blocking(self._async.send(element))

    def send_many(self, elements: Iterable[T]) -> None:
        """Send each element of ``elements`` in order."""
        for element in elements:
            self.send(element)


class StreamReader(Generic[T]):
    """A reading group's end of a stream in an ``async def`` body (``async for x in reader``)."""

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
        stream = self._stream
        while True:
            self._rc._check_live(self._key)
            element = stream.poll(self._group)
            if element is not _NOTHING:
                return element
            await self._rc._idle(stream.wait_readable(self._group))

    async def receive(self) -> T:
        """The next element.

        Raises:
            StopAsyncIteration: the stream ended.
            NodeFailedError: the producer failed.
        """
        return await self.__anext__()


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
