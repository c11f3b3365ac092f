"""The stream itself (G-10, S-1…S-6): :class:`Stream`, its reading groups with their buffers and
back-pressure, its end or failure, and :class:`StreamState`, the snapshot a checkpointer saves
and restores it from.

The ends a body holds, writers, readers and deliveries, are in :mod:`durable_core.graph.streams`,
whose docstring describes how streams behave.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from durable_core.errors import NodeFailedError, SlotError

if TYPE_CHECKING:
    from durable_core.graph.keys import Key

__all__ = ["Stream", "StreamState"]

T = TypeVar("T")


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
        self._names: tuple[str, ...] | None = None  # the groups' names, when made
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
        names = self._names
        if names is None:  # asked for per element sent: made again only when groups change
            names = self._names = tuple(self._groups)
        return names

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
            self._names = None
            self._groups[group] = _Group(self._tails.get(group, ()), group in self._keep)
        else:
            self._names = None
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
            self._names = None
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
            self._names = None
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
            self._names = None
            self._wake_producer()

    def detach_prefix(self, prefix: str) -> None:
        """Detach every group whose name starts with ``prefix``: the Sub node at ``prefix``
        ended for good, so no Retry opens the groups it anchors again."""
        for name in [name for name in self._groups if name.startswith(prefix)]:
            del self._groups[name]
            self._names = None
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
        for group in self._groups.values():  # noqa: SIM110 (all() makes a generator per element)
            if len(group.buffer) >= limit:
                return False
        return True

    def _roomy(self) -> bool:
        """True when every group has room for half its capacity (elements still being saved
        count): a producer held back by a full buffer is woken then, not at the first free
        place, so that it sends a run of elements, which share saves, rather than one element
        per element read (each one a save of its own)."""
        limit = self._room_limit()
        if limit <= 0:
            return False
        return all(len(group.buffer) < limit for group in self._groups.values())

    def _room_limit(self) -> int:
        """The buffer length every group must be under for :meth:`_roomy`."""
        return self.capacity - len(self._unsaved) - self.capacity // 2

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
        unsaved = self._unsaved
        if saved is None and not unsaved:
            self._deliver(sequence, element)
            return
        # An element that shares the save of the element before it (one save, one future) is
        # handed on by that save's callback: one callback per save, not one per element.
        shared = (
            saved is not None and len(unsaved) > 0 and unsaved[-1][2] is saved and not saved.done()
        )
        unsaved.append((sequence, element, saved))
        if saved is not None and not shared:

            def done(future: asyncio.Future[Any]) -> None:
                if not future.cancelled() and future.exception() is not None and on_error:
                    on_error(future.exception())  # type: ignore[arg-type]
                self._drain()

            saved.add_done_callback(done)

    def _drain(self) -> None:
        """Hand on every element at the front whose save succeeded, in one go (the elements
        of one save share its future: it is looked at once for all of them)."""
        unsaved = self._unsaved
        ready: list[tuple[int, Any]] = []
        checked: asyncio.Future[Any] | None = None
        waiting = False
        while unsaved:
            item = unsaved[0]
            saved = item[2]
            if saved is not None and saved is not checked:
                if not saved.done() or saved.cancelled() or saved.exception() is not None:
                    # Not saved yet; or its save failed: it and every later element are never
                    # delivered, the run stops.
                    waiting = True
                    break
                checked = saved
            unsaved.popleft()
            ready.append((item[0], item[1]))
        if ready:
            self._deliver_all(ready)
        if waiting:
            return
        self._wake_readers()
        if self._space is not None:
            self._wake_producer(roomy=True)

    def _deliver(self, sequence: int, element: T) -> None:
        self._deliver_all(((sequence, element),))

    def _deliver_all(self, items: list[tuple[int, Any]] | tuple[tuple[int, Any], ...]) -> None:
        """Append ``items`` (``(sequence, element)`` in sequence order) to every group."""
        if self._history is not None:
            self._history.extend(items)
        for group in self._groups.values():
            group.buffer.extend(items)
            waiter = group.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _wake_producer(self, *, roomy: bool = False) -> None:
        """Wake a producer held back by a full buffer when it may send again (``roomy``: only
        once every group has room for half its capacity, see :meth:`_roomy`)."""
        waiter = self._space
        if waiter is None or waiter.done():
            return
        if self._failure or (self._roomy() if roomy else self.writable()):
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
            if self._space is not None and len(state.buffer) < self._room_limit():
                # Only then may every group have room (this one has, at least): the check of
                # all groups is not made per element read while the producer waits.
                self._wake_producer(roomy=True)
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
