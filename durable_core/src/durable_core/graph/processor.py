"""Processor nodes: one transaction per input message, with an explicit state (S-7, S-8).

A processor node reads one input stream message by message. For each message its handler gets
the committed state and the message, and returns the new state. What the handler does inside a
message is *staged*: the new state, the values it sets (``rc.set``) and the elements it sends
to output streams (``rc.writer(KEY).send``) take effect together when the message commits, or
not at all. Readers of an output stream see a message's sends only after that commit.

- **Per-message Retry.** ``retry=Retry(n)`` gives every message its own budget of ``n`` tries.
  A failed try discards its staged work; the next try starts again from the committed state.
  A message whose budget is spent fails the node.
- **Batching.** ``commit_every=k`` commits up to ``k`` messages together; ``max_delay`` is how
  many seconds a batch may wait for more messages. A batch is atomic: it commits as a whole.
- **Pipelined commits.** When the checkpointer returns an awaitable from ``commit_messages``
  (the save still in flight), the next messages run meanwhile, until :data:`UNSAVED_COMMITS`
  commits wait for their saves; then the processor waits for the oldest. The checkpointer
  applies the commits in order; the durable one saves those queued behind a save in flight
  together, in the next save. The sends of a commit reach readers once its save succeeded; a
  failed save stops the run, nothing behind it is committed, and the messages run behind it
  are processed again on resume.
- **Hops.** A plain (``def``) handler runs in the node's worker thread, several delivered
  messages per hop there: those of the batch being built and, within :data:`HOP_SECONDS`,
  those of the next commits (each committed on its own, in order, as if run alone). A cancel
  ends a hop at the message during which it came; the messages before it are committed.
- **Stopping.** ``rc.stop()`` inside a message ends reading after that message: the remaining
  messages are not processed (and are not pretended to be processed).
- **Finish.** ``@processor.finish`` registers ``finish(rc, state)``, run once after the input
  stream ended or ``rc.stop()``. Its sets and sends, with the last batch, make the final
  transaction, which a checkpointer may save together with the node's confirmation.

The engine tells the checkpointer about every message through four seam methods with no-op
defaults (:meth:`~durable_core.graph.Checkpointer.open_processor`, ``begin_message``,
``fail_message``, ``commit_messages``), so a checkpointer can commit the input's ack, the state,
the values and the sends of a message in one save.

This module declares processor nodes (:class:`Processor`); their message loop is in
:mod:`durable_core.graph.messageloop`, and what a handler sees of one message and the seam
handles are in :mod:`durable_core.graph.messages`, importable from here (as are
:data:`UNSAVED_COMMITS` and :data:`HOP_SECONDS`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from durable_core._words import a
from durable_core.errors import GraphError
from durable_core.graph.aspects import Retry
from durable_core.graph.keys import Key, type_name
from durable_core.graph.messageloop import HOP_SECONDS as HOP_SECONDS
from durable_core.graph.messageloop import UNSAVED_COMMITS as UNSAVED_COMMITS
from durable_core.graph.messageloop import MessageLoop
from durable_core.graph.messages import (
    Managed,
    MessageAttempt,
    MessageCommit,
    MessageContext,
    MessageWriter,
)

if TYPE_CHECKING:
    from durable_core.graph.context import RunContext

__all__ = [
    "Managed",
    "MessageAttempt",
    "MessageCommit",
    "MessageContext",
    "MessageWriter",
    "Processor",
]

S = TypeVar("S")
T = TypeVar("T")

# -- The definition handle ---------------------------------------------------------------------


Handler = Callable[..., Any]


class Processor(Generic[S]):
    """A processor node of a graph; returned by :meth:`~durable_core.graph.Graph.processor`.

    It is the node's body: the engine calls it with the node's run context, and it runs the
    messages of its input. Use :meth:`finish` to register the function run after the input
    ended.

    Attributes:
        id: the node's id.
        input: the input stream key.
        state: the state's type.
        initial: the state before the first message.
        retry: the per-message Retry (None: one try per message).
        commit_every: messages committed together at most (>= 1).
        max_delay: seconds a batch may wait for more messages before it commits (>= 0).
        handler: ``handler(rc, state, message) -> new state``.
        finisher: ``finish(rc, state)`` or None.
    """

    def __init__(
        self,
        id: str,
        handler: Handler,
        *,
        input: Key[Any],
        state: Any,
        initial: S,
        retry: Retry | None,
        commit_every: int,
        max_delay: float,
    ) -> None:
        where = f"processor {id!r}"
        if not isinstance(input, Key) or not input.stream:
            raise GraphError(
                f"{where}: input must be a stream key (Key(name, type, stream=True)), got {input!r}"
            )
        state_key = Key(f"{id}.state", state)
        if not state_key.accepts(initial):
            raise GraphError(
                f"{where}: the initial state {initial!r:.80} is not {a(type_name(state))}"
            )
        if retry is not None and not isinstance(retry, Retry):
            raise GraphError(f"{where}: retry takes Retry(attempts, delay=…), got {retry!r}")
        if isinstance(commit_every, bool) or not isinstance(commit_every, int) or commit_every < 1:
            raise GraphError(
                f"{where}: commit_every must be a positive integer (messages per commit), got "
                f"{commit_every!r}"
            )
        if (
            isinstance(max_delay, bool)
            or not isinstance(max_delay, (int, float))
            or not math.isfinite(max_delay)
            or max_delay < 0
        ):
            raise GraphError(
                f"{where}: max_delay must be a finite number of seconds >= 0, got {max_delay!r}"
            )
        _check_function(handler, f"{where}: the handler")
        self.id = id
        self.input = input
        self.state = state
        self.initial = initial
        self.retry = retry
        self.commit_every = commit_every
        self.max_delay = float(max_delay)
        self.handler = handler
        self.finisher: Handler | None = None
        self._state_key = state_key
        self.__doc__ = getattr(handler, "__doc__", None)

    def __repr__(self) -> str:
        return f"<Processor {self.id!r} input={self.input.name!r}>"

    @property
    def state_key(self) -> Key[Any]:
        """A key of the state's type (for codecs: the state is stored like a value of it)."""
        return self._state_key

    def finish(self, function: Handler) -> Handler:
        """Decorator registering ``finish(rc, state)``, run once after the input ended or
        ``rc.stop()``; its sets and sends commit as the final transaction.

        Returns:
            ``function`` unchanged.

        Raises:
            GraphError: a finish function is registered already, or it is not a function.
        """
        if self.finisher is not None:
            raise GraphError(f"processor {self.id!r} already has a finish function")
        _check_function(function, f"processor {self.id!r}: finish")
        self.finisher = function
        return function

    def describe(self) -> dict[str, Any]:
        """The processor's parameters that belong to the graph's fingerprint."""
        return {
            "input": self.input.name,
            "state": type_name(self.state),
            "retry": None if self.retry is None else self.retry.describe(),
            "commit_every": self.commit_every,
            "max_delay": self.max_delay,
        }

    async def __call__(self, rc: RunContext) -> None:
        await MessageLoop(self, rc).run()


def _check_function(function: object, where: str) -> None:
    if not callable(function):
        raise GraphError(f"{where} must be a function, got {function!r}")
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        raise GraphError(f"{where} is a generator function; write a plain or async function")
