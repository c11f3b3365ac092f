"""What a processor node's handler sees of one message: :class:`MessageContext` and
:class:`MessageWriter`, which stage sets and sends until the message commits, and the seam
handles the engine passes its checkpointer per message (:class:`Managed`,
:class:`MessageAttempt`, :class:`MessageCommit`) (S-7, S-8).

:mod:`durable_core.graph.processor` declares processor nodes and runs their message loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from durable_core.errors import (
    SlotError,
    UndeclaredKeyError,
)
from durable_core.graph.checkpoint import Values
from durable_core.graph.keys import Key

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Attempt
    from durable_core.graph.context import RunContext

__all__ = ["Managed", "MessageAttempt", "MessageCommit", "MessageContext", "MessageWriter"]

T = TypeVar("T")


_EMPTY: Mapping[str, Any] = MappingProxyType({})
_NOTHING: Any = object()  # no default given to MessageContext.get


# -- Seam handles ----------------------------------------------------------------------------


@attrs.frozen
class Managed:
    """What a checkpointer restores for a processor node (S-7): its committed state.

    The messages already committed are not delivered again: the input stream (restored by the
    checkpointer) holds only the unacknowledged ones.

    Attributes:
        state: the state as last committed (decoded by the checkpointer).
        ended: True when the final transaction (after the input ended, or ``stop()``) was
            committed already: the processor neither reads nor runs ``finish`` again.
    """

    state: Any
    ended: bool = False


@attrs.frozen(eq=False)
class MessageAttempt:
    """One try of processing one input message (S-7); created by
    :meth:`~durable_core.graph.Checkpointer.begin_message`.

    Attributes:
        id: the checkpointer's identity of the try; ``""`` with the no-op checkpointer.
        attempt: the processor node's root attempt.
        key: the input stream key.
        sequence: the message's sequence number in the input stream (from 1).
        generation: the generation the message was delivered with (its ack needs it).
        index: the try (1-based); authoritative when it comes back from ``begin_message``.
        limit: the message's budget (the processor's ``retry`` attempts, or 1).
        data: free for the checkpointer's own bookkeeping; the engine never reads it.
    """

    id: str
    attempt: Attempt
    key: Key[Any]
    sequence: int
    generation: int = 1
    index: int = 1
    limit: int = 1
    data: Any = None

    @classmethod
    def first(
        cls, attempt: Attempt, key: Key[Any], sequence: int, generation: int, limit: int
    ) -> MessageAttempt:
        """The first try of message ``sequence``, not yet begun (``id`` ``""``): what
        :meth:`~durable_core.graph.Checkpointer.begin_message` is handed."""
        return cls("", attempt, key, sequence, generation, 1, limit)

    @classmethod
    def first_tries(
        cls,
        ids: list[str],
        attempt: Attempt,
        key: Key[Any],
        deliveries: tuple[tuple[int, int], ...],
        limit: int,
        data: Any,
    ) -> list[MessageAttempt]:
        """``MessageAttempt(ids[i], attempt, key, sequence, generation, 1, limit, data)`` for
        the i-th ``(sequence, generation)`` of ``deliveries``: the first try of each, begun.

        The objects are the ones the class's own ``__init__`` makes (it has neither
        validators nor converters), made by setting the slots directly: a frozen class's
        ``__init__`` sets each field through ``object.__setattr__``, and a checkpointer
        begins one try per message.

        Raises:
            ValueError: ``ids`` and ``deliveries`` differ in length.
        """
        (
            set_id,
            set_attempt,
            set_key,
            set_sequence,
            set_generation,
            set_index,
            set_limit,
            set_data,
        ) = _SET_FIELD
        new = object.__new__
        tries = []
        append = tries.append
        for id_, (sequence, generation) in zip(ids, deliveries, strict=True):
            message = new(cls)
            set_id(message, id_)
            set_attempt(message, attempt)
            set_key(message, key)
            set_sequence(message, sequence)
            set_generation(message, generation)
            set_index(message, 1)
            set_limit(message, limit)
            set_data(message, data)
            append(message)
        return tries


_MESSAGE_FIELDS = ("id", "attempt", "key", "sequence", "generation", "index", "limit", "data")
if tuple(field.name for field in attrs.fields(MessageAttempt)) != _MESSAGE_FIELDS:
    raise RuntimeError("MessageAttempt.first_tries must set every field")  # pragma: no cover
_SET_FIELD = tuple(getattr(MessageAttempt, name).__set__ for name in _MESSAGE_FIELDS)


@attrs.frozen(eq=False)
class MessageCommit:
    """What one message transaction (or batch of them) commits, as one (S-8).

    Attributes:
        messages: the successful try of each message, in sequence order. The final
            transaction holds the last batch (possibly empty) together with ``finish``'s work.
        state: the state after the last of them.
        values: every ordinary value the node has set so far (ready and skipped), not only the
            new ones: the complete picture a checkpointer stores (S-10).
        sends: elements sent to output streams in these messages, by stream key name, as
            ``(sequence, element)`` in order (each output stream's sequence numbers are taken
            before the call, the producer's position being the input message's sequence); the
            engine hands them to readers only after the commit is saved.
        stopped: ``rc.stop()`` was called in the last message: reading ended early (only in
            the final transaction).
        final: the final transaction: the input ended (or ``stop()``), ``finish`` ran, and
            the node commits next. A checkpointer may save it together with the node's
            confirmation (returning an awaitable that succeeds then).
    """

    messages: tuple[MessageAttempt, ...]
    state: Any
    values: Values
    sends: Mapping[str, tuple[tuple[int, Any], ...]] = _EMPTY
    stopped: bool = False
    final: bool = False


# -- The context a handler sees ----------------------------------------------------------------


class MessageWriter(Generic[T]):
    """Sends to an output stream from inside a message; the sends commit with the message.

    ``send`` only stages the element (it never waits, in plain and ``async def`` handlers
    alike: no ``await``); readers see it after the message (or its batch) committed.
    """

    __slots__ = ("_ctx", "_key")

    def __init__(self, ctx: MessageContext, key: Key[T]) -> None:
        self._ctx = ctx
        self._key = key

    @property
    def key(self) -> Key[T]:
        """The stream key."""
        return self._key

    def send(self, element: T) -> None:
        """Stage one element for the output stream.

        Raises:
            SlotError: the element is not an instance of the key's element type, or the
                message's try has ended.
        """
        ctx = self._ctx
        ctx._check_live()
        if not self._key.accepts(element):
            raise SlotError(
                f"node {ctx.path!r}: stream {self._key.name!r} takes {self._key!r} elements, "
                f"got {type(element).__name__}"
            )
        sends = ctx._sends
        if sends is _EMPTY:
            sends = ctx._sends = {}
        sends.setdefault(self._key.name, []).append((ctx._at, element))  # type: ignore[attr-defined]

    def send_many(self, elements: Any) -> None:
        """Stage each element of ``elements`` in order."""
        for element in elements:
            self.send(element)


class MessageContext:
    """What a processor's handler (and its ``finish``) sees of the run.

    One context per try of one message; everything written through it is staged and commits
    with the message, or is discarded when the try fails.

    Attributes:
        node_id: the processor node's id.
        path: its path from the root graph.
        message: the try being run (its ``sequence``, ``index`` and ``limit``); None in
            ``finish``.
    """

    __slots__ = (
        "_at",
        "_closed",
        "_finish",
        "_node_rc",
        "_owned",
        "_sends",
        "_set",
        "_skipped",
        "_stopped",
        "message",
        "node_id",
        "path",
    )

    def __init__(
        self, node_rc: RunContext, message: MessageAttempt | None, pending: Values, at: int
    ) -> None:
        self._node_rc = node_rc
        self._at = at  # the input sequence the sends are positioned at
        self.node_id = node_rc.node_id
        self.path = node_rc.path
        self.message = message
        self._finish = message is None
        # What the messages before it staged, shared until this try writes (copied then): most
        # messages set nothing, and a failed try's writes never reach what it was given.
        self._set: Mapping[str, Any] = pending.ready
        self._skipped: frozenset[str] | set[str] = pending.skipped
        self._owned = False
        self._sends: Mapping[str, list[tuple[int, Any]]] = _EMPTY  # (input sequence, element)
        self._stopped = False
        self._closed = False

    def _own(self) -> None:
        """Copy the staged values before the first write of this try."""
        if not self._owned:
            self._set = dict(self._set)
            self._skipped = set(self._skipped)
            self._owned = True

    def __repr__(self) -> str:
        if self.message is None:
            return f"<MessageContext {self.path!r} finish>"
        return (
            f"<MessageContext {self.path!r} message {self.message.sequence} try "
            f"{self.message.index}>"
        )

    @property
    def canceled(self) -> bool:
        """True once the node was canceled (look at it in long plain handlers)."""
        return self._node_rc.canceled

    def _check_live(self) -> None:
        if self._node_rc.canceled:
            raise asyncio.CancelledError()
        if self._closed:
            raise SlotError(
                f"node {self.path!r}: this message's try has ended; its context can no longer "
                "be used"
            )

    def get(self, key: Key[T], default: Any = _NOTHING) -> Any:
        """The value of a required value key, or of a provided key set earlier.

        Raises:
            UndeclaredKeyError: the node does not declare the key.
            SlotError: the key is skipped (and no default was given), or not set yet.
        """
        name = key.name
        if name in self._set and self._node_rc._declared(key, self._node_rc._prov):
            return self._set[name]
        if default is _NOTHING:
            return self._node_rc.get(key)
        return self._node_rc.get(key, default)

    def skipped(self, key: Key[Any]) -> bool:
        """Whether a required key (or a provided key set earlier) is skipped."""
        if key.name in self._skipped and self._node_rc._declared(key, self._node_rc._prov):
            return True
        return self._node_rc.skipped(key)

    def _provided(self, key: Key[Any], action: str) -> None:
        rc = self._node_rc
        if not rc._declared(key, rc._prov):
            raise UndeclaredKeyError(
                f"node {self.path!r} {action} key {key!r}, which it does not declare; add it "
                "to the processor's provides"
            )
        self._check_live()

    def _check_unwritten(self, key: Key[Any]) -> None:
        name = key.name
        rc = self._node_rc
        if name in self._set or name in self._skipped or name in rc._ready or name in rc._skipped:
            raise SlotError(
                f"node {self.path!r}: key {name!r} was already set or skipped; a slot is "
                "written once, even across messages"
            )

    def set(self, key: Key[T], value: T) -> None:
        """Set a provided value key (once per run of the node); it commits with the message.

        Raises:
            UndeclaredKeyError: the key is not in the node's provides.
            SlotError: the key was set or skipped already (in this or an earlier message), it
                is a stream key, or the value is not of the key's type.
        """
        self._provided(key, "writes")
        if key.stream:
            raise SlotError(
                f"node {self.path!r}: key {key.name!r} is a stream; send with rc.writer(key)"
            )
        self._check_unwritten(key)
        if not key.accepts(value):
            raise SlotError(
                f"node {self.path!r}: key {key.name!r} takes {key!r} values, got "
                f"{type(value).__name__} {value!r:.80}"
            )
        self._own()
        self._set[key.name] = value  # type: ignore[index]  # owned: a dict

    def skip(self, key: Key[Any]) -> None:
        """Mark a provided key skipped; it commits with the message.

        Raises:
            UndeclaredKeyError: the key is not in the node's provides.
            SlotError: the key was set or skipped already, or something was sent to it.
        """
        self._provided(key, "skips")
        self._check_unwritten(key)
        if key.stream and (key.name in self._sends or key.name in self._node_rc._node_run.streams):
            raise SlotError(
                f"node {self.path!r}: stream {key.name!r} has elements; it cannot be skipped"
            )
        self._own()
        self._skipped.add(key.name)  # type: ignore[union-attr]  # owned: a set

    def writer(self, key: Key[T]) -> MessageWriter[T]:
        """The writer of a provided stream key; its sends commit with the message.

        Raises:
            UndeclaredKeyError: the key is not in the node's provides.
            SlotError: the key is a value key, or it was skipped.
        """
        self._provided(key, "writes")
        if not key.stream:
            raise SlotError(f"node {self.path!r}: key {key.name!r} is a value key; use rc.set")
        if key.name in self._skipped or key.name in self._node_rc._skipped:
            raise SlotError(f"node {self.path!r}: stream {key.name!r} was skipped")
        return MessageWriter(self, key)

    def stop(self) -> None:
        """End reading after this message commits: later messages are not processed.

        ``finish`` runs next. Stopping ends the node's obligation to read the rest of the
        input; it does not pretend the rest was processed.

        Raises:
            SlotError: called in ``finish``.
        """
        self._check_live()
        if self._finish:
            raise SlotError(f"node {self.path!r}: stop() is for message handlers, not finish")
        self._stopped = True
