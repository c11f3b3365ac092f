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
- **Stopping.** ``rc.stop()`` inside a message ends reading after that message: the remaining
  messages are not processed (and are not pretended to be processed).
- **Finish.** ``@processor.finish`` registers ``finish(rc, state)``, run once after the input
  stream ended or ``rc.stop()``. Its sets and sends, with the last batch, make the final
  transaction, which a checkpointer may save together with the node's confirmation.

The engine tells the checkpointer about every message through four seam methods with no-op
defaults (:meth:`~durable_core.graph.Checkpointer.open_processor`, ``begin_message``,
``fail_message``, ``commit_messages``), so a checkpointer can commit the input's ack, the state,
the values and the sends of a message in one save.

This module declares processor nodes (:class:`Processor`) and runs their message loop; what a
handler sees of one message and the seam handles are in :mod:`durable_core.graph.messages`,
importable from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import math
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from durable_core._words import a
from durable_core.errors import (
    GraphError,
    MessageFailedError,
    RetryExhaustedError,
    SlotError,
)
from durable_core.graph.aspects import Retry
from durable_core.graph.bodythreads import BodyThreads
from durable_core.graph.checkpoint import Values
from durable_core.graph.keys import Key, type_name
from durable_core.graph.messages import (
    Managed,
    MessageAttempt,
    MessageCommit,
    MessageContext,
    MessageWriter,
)
from durable_core.graph.signals import RunAborted, direct_call, eager_call, settle
from durable_core.graph.streams import _NOTHING as _NO_ELEMENT
from durable_core.graph.streams import Stream
from durable_core.graph.waits import waiting

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Attempt
    from durable_core.graph.context import RunContext

__all__ = [
    "Managed",
    "MessageAttempt",
    "MessageCommit",
    "MessageContext",
    "MessageWriter",
    "Processor",
]

UNSAVED_COMMITS = 8
"""How many of a processor's commits may be handed over and not saved yet while its next
messages run. The checkpointer saves those queued behind a save in flight together, in the
next save, so the slower the saves, the more messages each one holds."""

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
        await _ProcessorRun(self, rc).run()


def _check_function(function: object, where: str) -> None:
    if not callable(function):
        raise GraphError(f"{where} must be a function, got {function!r}")
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        raise GraphError(f"{where} is a generator function; write a plain or async function")


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - instances with async __call__
    )


# -- Running -----------------------------------------------------------------------------------


class _ProcessorRun:
    """One run of a processor node's body: the read loop, tries, batches, commits."""

    def __init__(self, processor: Processor[Any], rc: RunContext) -> None:
        self.p = processor
        self.rc = rc
        self.nr = rc._node_run
        self.run_ = self.nr.scope.run
        self.attempt: Attempt = rc.attempt.root
        self.threads: BodyThreads | None = None  # the worker thread of plain handlers
        self.kinds: dict[Any, bool] = {}  # function -> whether it is an async function
        # The batch being built: its message tries, state, sets, skips and sends.
        self.batch: list[MessageAttempt] = []
        self.sets: dict[str, Any] = {}
        self.skips: set[str] = set()
        self.sends: dict[str, list[tuple[int, Any]]] = {}
        self.last_sequence = 0  # of the last message processed
        self.stopped = False
        # The saves of the commits handed over and not known saved yet, oldest first (at most
        # UNSAVED_COMMITS: see commit).
        self.unsaved: deque[asyncio.Future[Any]] = deque()

    # -- the seam -------------------------------------------------------------------------

    async def seam(
        self, method: str, kind: type | None, default: Any, *args: Any, direct: bool = False
    ) -> Any:
        """Call a checkpointer method through the run's guard (a failure stops the run).

        ``direct`` awaits it in this task instead of a shielded one: for the per-message
        ``begin_message``, which answers at once (a try that is canceled while it begins was
        never used).
        """
        run = self.run_
        if run.noop:
            return default
        coroutine = getattr(run.cp, method)(*args)
        if direct:
            result = await direct_call(run, coroutine)
        else:
            result = await run._call(coroutine)
        if kind is not None and result is not None:
            return run._expect(result, kind, method)
        return result

    # -- calling user code ----------------------------------------------------------------

    async def call(self, function: Handler, *args: Any) -> Any:
        """``function(*args)``: awaited when it is an async function, else run in the node's
        worker thread (one hop there, and one callback back to the event loop).

        A cancel while a plain function runs sets ``rc.canceled`` and waits for it to return
        (it cannot be interrupted), then goes on.
        """
        is_async = self.kinds.get(function)
        if is_async is None:
            is_async = self.kinds[function] = _is_async(function)
        if is_async:
            return await function(*args)
        return await self.in_thread(function, *args)

    async def in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` for a plain function, in the node's worker thread (as
        :meth:`call`). A hop's closure comes here directly: remembered by :meth:`call` it
        would keep every message it ran alive until the node ends."""
        loop = asyncio.get_running_loop()
        threads = self.threads
        if threads is None:
            threads = self.threads = BodyThreads(loop, 1, f"durable-processor-{self.p.id}")
        hop = _Hop(loop)
        threads.submit(function, args, hop.done)
        try:
            return await hop.future
        except asyncio.CancelledError:
            self.rc._cancel()  # the handler sees rc.canceled while it still runs
            await hop.returned()  # it cannot be interrupted: wait for it
            raise

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        p, rc = self.p, self.rc
        try:
            stream = self.nr.scope.ready.get(p.input.name)
            stream = stream if isinstance(stream, Stream) else None
            managed = await self.seam("open_processor", Managed, None, self.attempt, p, stream)
            state = p.initial if managed is None else managed.state
            if managed is not None:
                self.check_state(state, "the restored state")
            if managed is None or not managed.ended:
                state = await self.read(state)
                await self.finish(state)
            else:
                for key in self.nr.scope.plan.prov_maps[self.nr.index].values():
                    if key.stream and key.name not in rc._skipped:
                        await rc._open_stream(key)
        finally:
            if self.threads is not None:
                self.threads.shutdown()

    async def read(self, state: Any) -> Any:
        """Process messages until the input ends or ``stop()``; return the state.

        The last batch is left staged: it commits with ``finish``, in the final transaction.
        """
        stream = self.nr.scope.ready.get(self.p.input.name)
        if not isinstance(stream, Stream):
            return state  # a skipped input has no messages
        group, rc, p = self.rc.path, self.rc, self.p
        deadline = math.inf
        plain = not _is_async(p.handler)
        while not self.stopped:
            try:
                item = stream.poll(group)
            except StopAsyncIteration:
                break
            if item is _NO_ELEMENT:
                if not self.batch:
                    if p.input.inbox:  # nothing posted yet: the run waits (X-WAIT)
                        with waiting(group, p.input.name):
                            await rc._idle(stream.wait_readable(group))
                        continue
                    await rc._idle(stream.wait_readable(group))
                    continue
                wait = deadline - time.monotonic()
                if wait > 0:
                    await rc._idle(_wait_readable(stream, group, wait))
                    continue
                await self.commit(state)
                continue
            if not self.batch:
                deadline = time.monotonic() + p.max_delay
            if plain:
                state = await self.process_plain(state, item, stream, group)
            else:
                state = await self.process(state, item[0], item[1], stream.generation)
            if self.stopped:
                break  # the stopping batch commits with finish, in the final transaction
            if len(self.batch) >= p.commit_every or time.monotonic() >= deadline:
                await self.commit(state)
        return state

    async def process(self, state: Any, sequence: int, element: Any, generation: int) -> Any:
        """Run one message to success (under its Retry budget), staging into the batch."""
        p = self.p
        self.last_sequence = sequence
        limit = p.retry.attempts if p.retry is not None else 1
        index = 1
        while True:
            message = await self.begin(sequence, generation, index, limit)
            if message.index > message.limit:
                raise self.exhausted(message)
            ctx = MessageContext(
                self.rc, message, Values(self.sets, frozenset(self.skips)), sequence
            )
            given = copy.deepcopy(state) if message.limit > 1 else state
            try:
                new_state = await self.call(p.handler, ctx, given, element)
                self.check_state(new_state, "the handler returned")
            except Exception as error:
                ctx._closed = True
                await self.seam("fail_message", None, None, message, error)
                if message.index >= message.limit:
                    raise self.failed(message, error) from error
                index = message.index + 1
                if p.retry is not None and p.retry.delay:
                    await asyncio.sleep(p.retry.delay)
                continue
            finally:
                ctx._closed = True
            self.stage(ctx)
            self.batch.append(message)
            if ctx._stopped:
                self.stopped = True
            return new_state

    async def process_plain(
        self, state: Any, item: tuple[int, Any], stream: Stream[Any], group: str
    ) -> Any:
        """Run a plain handler on ``item`` and on the messages already delivered behind it, up
        to the batch's room, several per hop to the worker thread; stage them into the batch.

        Only elements the stream has delivered (saved ones) are taken. Every message is begun
        (``begin_message``) before the hop that runs it, in sequence order; a hop stops at the
        first failed try, which discards only that try's staged work: its message is saved
        failed and tried again (under its budget) before the messages behind it, which keep
        the tries they were begun with. ``rc.stop()`` ends the hop after its message; the
        messages behind it are not processed.
        """
        p = self.p
        limit = p.retry.attempts if p.retry is not None else 1
        # Parallel lists, not a tuple per message: a hop runs up to ``commit_every`` messages.
        # No await between the polls: the stream's generation is the same for all of them.
        sequences, elements = [item[0]], [item[1]]
        generation = stream.generation
        room = p.commit_every - len(self.batch)
        while len(elements) < room:
            try:
                more = stream.poll(group)
            except StopAsyncIteration:
                break  # the next poll of the read loop sees the end again
            if more is _NO_ELEMENT:
                break
            sequences.append(more[0])
            elements.append(more[1])
        tries = await self.begin_first(sequences, generation, limit)
        first, count = 0, len(tries)  # tries[first:] are begun and not run yet
        batch = self.batch
        while first < count:
            end = first
            while end < count and tries[end].index <= tries[end].limit:
                end += 1
            if end == first:
                raise self.exhausted(tries[first])
            contexts, last_state, error = await self.call_plain(
                tries, elements, first, end, state, Values(self.sets, frozenset(self.skips))
            )
            if contexts:
                state = last_state
                for ctx in contexts:
                    self.stage(ctx)
                    batch.append(tries[first])
                    first += 1
                    if ctx._stopped:
                        self.last_sequence = tries[first - 1].sequence
                        self.stopped = True
                        return state
                self.last_sequence = tries[first - 1].sequence
            if error is None:
                continue
            message = tries[first]
            self.last_sequence = message.sequence
            await self.seam("fail_message", None, None, message, error)
            if message.index >= message.limit:
                raise self.failed(message, error) from error
            if p.retry is not None and p.retry.delay:
                await asyncio.sleep(p.retry.delay)
            tries[first] = await self.begin(
                message.sequence, message.generation, message.index + 1, limit
            )
        return state

    async def call_plain(
        self,
        tries: list[MessageAttempt],
        elements: list[Any],
        first: int,
        end: int,
        state: Any,
        pending: Values,
    ) -> tuple[list[MessageContext], Any, Exception | None]:
        """Run the tries ``tries[first:end]`` on ``elements[first:end]`` in order, in one hop
        to the worker thread: the successful tries' contexts, the state after the last of
        them (``state`` when none succeeded), and the error of the first failed try (it is
        ``tries[first + len(contexts)]``; None when none failed).
        """
        rc, p = self.rc, self.p
        handler = p.handler
        check = self.check_state

        def work() -> Any:
            contexts: list[MessageContext] = []
            current, given_values = state, pending
            for index in range(first, end):
                if rc.canceled:
                    break
                message = tries[index]
                ctx = MessageContext(rc, message, given_values, message.sequence)
                given = copy.deepcopy(current) if message.limit > 1 else current
                try:
                    new_state = handler(ctx, given, elements[index])
                    check(new_state, "the handler returned")
                except Exception as error:
                    return contexts, current, error
                finally:
                    ctx._closed = True
                contexts.append(ctx)
                current = new_state
                if ctx._owned:  # it set or skipped: the next message starts from that
                    given_values = Values(ctx._set, frozenset(ctx._skipped))
                if ctx._stopped:
                    break
            return contexts, current, None

        return await self.in_thread(work)

    async def begin(self, sequence: int, generation: int, index: int, limit: int) -> Any:
        proposed = MessageAttempt(
            id="",
            attempt=self.attempt,
            key=self.p.input,
            sequence=sequence,
            generation=generation,
            index=index,
            limit=limit,
        )
        return await self.seam(
            "begin_message", MessageAttempt, proposed, self.attempt, proposed, direct=True
        )

    async def begin_first(
        self, sequences: list[int], generation: int, limit: int
    ) -> list[MessageAttempt]:
        """Begin the first try of each message of ``sequences`` (delivered with
        ``generation``), in order, in one checkpointer call."""
        run, attempt, key = self.run_, self.attempt, self.p.input
        if run.noop:
            return [
                MessageAttempt.first(attempt, key, sequence, generation, limit)
                for sequence in sequences
            ]
        deliveries = tuple([(sequence, generation) for sequence in sequences])
        tries = await direct_call(run, run.cp.begin_messages(attempt, key, deliveries, limit))
        if not isinstance(tries, (list, tuple)) or len(tries) != len(sequences):
            error = TypeError(
                f"Checkpointer.begin_messages must return a list of {len(sequences)} "
                f"MessageAttempt, got {tries!r:.200}"
            )
            run.abort(error)
            raise RunAborted from error
        for begun in tries:
            run._expect(begun, MessageAttempt, "begin_messages")
        return list(tries)

    def exhausted(self, message: MessageAttempt) -> RetryExhaustedError:
        return RetryExhaustedError(
            f"node {self.rc.path!r}: every try of message {message.sequence} of "
            f"{self.p.input.name!r} ({message.limit} in all) was already spent before this "
            "run; a restart never refills a budget. Start a new run to try again."
        )

    def failed(self, message: MessageAttempt, error: Exception) -> MessageFailedError:
        text = str(error)
        return MessageFailedError(
            f"node {self.rc.path!r} failed on message {message.sequence} of "
            f"{self.p.input.name!r} after {message.limit} "
            f"{'try' if message.limit == 1 else 'tries'}: {type(error).__name__}"
            + (f": {text}" if text else ""),
            self.rc.path,
            key=self.p.input.name,
            sequence=message.sequence,
            tries=message.limit,
        )

    def stage(self, ctx: MessageContext) -> None:
        self.sets = ctx._set
        self.skips = ctx._skipped
        for name, elements in ctx._sends.items():
            self.sends.setdefault(name, []).extend(elements)

    def check_state(self, state: Any, what: str) -> None:
        if not self.p.state_key.accepts(state):
            raise SlotError(
                f"node {self.rc.path!r}: {what} {type(state).__name__} {state!r:.80}, not "
                f"{a(type_name(self.p.state))}; a handler returns the new state"
            )

    async def commit(self, state: Any, *, final: bool = False) -> None:
        """Commit the batch (or the final transaction), then apply it and hand over the sends.

        Output streams are opened, and their sequence numbers taken, before the commit; the
        elements reach readers once the commit is saved (at once when the checkpointer returns
        None, else when the awaitable it returned succeeded). That awaitable is not waited for
        here: the next messages run while it is saved. What is waited for, once the commit is
        handed over, is the save of the oldest commit before it while :data:`UNSAVED_COMMITS`
        of them are not known saved (all of them for the final transaction). (The
        checkpointer applies each commit after the one before it, in the same save or a
        later one.) Before the next message, the processor waits until every output stream
        has room again (back-pressure).

        Raises:
            RunAborted: the commit before it, or this one, failed (the run stopped with the
                error).
        """
        rc, run = self.rc, self.run_
        keys = self.nr.scope.plan.prov_maps[self.nr.index]
        if final:  # streams nobody sent to are published empty, before the node commits
            for key in keys.values():
                if key.stream and key.name not in self.skips and key.name not in rc._skipped:
                    await rc._open_stream(key)
        sends: dict[str, tuple[tuple[int, Any], ...]] = {}
        streams: dict[str, Stream[Any]] = {}
        for name, elements in self.sends.items():
            stream = streams[name] = await rc._open_stream(keys[name])
            sends[name] = tuple((stream.advance(at, True), element) for at, element in elements)
        ready = dict(rc._ready)
        ready.update(self.sets)
        commit = MessageCommit(
            messages=tuple(self.batch),
            state=state,
            values=Values(ready, frozenset(rc._skipped | self.skips)),
            sends=sends,
            stopped=self.stopped,
            final=final,
        )
        saved = await self.commit_call(commit)
        future = None if saved is None else asyncio.ensure_future(saved)
        if future is not None:
            future.add_done_callback(_read_failure)
        unsaved = self.unsaved
        while unsaved and (final or len(unsaved) >= UNSAVED_COMMITS):
            await self.saved()  # the oldest commit before it
        if future is not None and not final:
            unsaved.append(future)  # the next messages run while it is saved (or it failed)
        rc._ready.update(self.sets)
        rc._skipped.update(self.skips)
        self.batch, self.sets, self.skips, self.sends = [], {}, set(), {}
        for name, numbered in sends.items():
            stream = streams[name]
            for sequence, element in numbered:
                stream.push(sequence, element, future, run.abort)
        if not final:
            for stream in streams.values():
                while not stream.writable():
                    await rc._idle(stream.wait_writable())

    async def commit_call(self, commit: MessageCommit) -> Any:
        """``commit_messages`` through the run's guard, without a task of its own when the
        checkpointer answers at once (the durable one only queues the save)."""
        run = self.run_
        if run.noop:
            return None
        call = eager_call(run, run.cp.commit_messages(self.attempt, commit))
        if not call.done():
            try:
                await asyncio.shield(call)
            except asyncio.CancelledError:
                await settle(call)  # a commit under way is never cut off
                raise
            except RunAborted:
                pass  # raised by call.result() below
        return call.result()

    async def saved(self) -> None:
        """Wait until the oldest commit not known saved is saved.

        Raises:
            RunAborted: its save failed; the run is stopped with the save's error.
        """
        future = self.unsaved.popleft()
        if not future.done():
            try:
                await asyncio.shield(future)  # a cancel stops the wait, never the save
            except asyncio.CancelledError:
                if not future.done():
                    raise
            except Exception:
                pass  # its error is read below
        if future.cancelled():
            raise RunAborted
        error = future.exception()
        if error is not None:
            if isinstance(error, RunAborted):
                raise error
            self.run_.abort(error)
            raise RunAborted from error

    async def finish(self, state: Any) -> None:
        p = self.p
        if p.finisher is not None:
            ctx = MessageContext(
                self.rc, None, Values(self.sets, frozenset(self.skips)), self.last_sequence
            )
            try:
                await self.call(p.finisher, ctx, state)
            finally:
                ctx._closed = True
            self.stage(ctx)
        await self.commit(state, final=True)


class _Hop:
    """The outcome of one call in the worker thread: ``done`` is called on the event loop."""

    __slots__ = ("_loop", "_waiter", "finished", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.finished = False
        self._waiter: asyncio.Future[None] | None = None

    def done(self, result: Any, error: BaseException | None) -> None:
        self.finished = True
        future = self.future
        if not future.done():
            if error is None:
                future.set_result(result)
            elif isinstance(error, StopIteration):  # a future cannot carry it
                future.set_exception(RuntimeError(f"{type(error).__name__}: {error}"))
            else:
                future.set_exception(error)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def returned(self) -> None:
        """Wait until the call returned, whatever cancellations arrive meanwhile."""
        if not self.finished:
            self._waiter = self._loop.create_future()
            await settle(self._waiter)


def _read_failure(future: asyncio.Future[Any]) -> None:
    """Mark a failed commit's exception as seen: the failure stops the run on its own path
    (the save's error becomes the run's error), and the future only gates the sends, which may
    be none; left unread, asyncio would report it again as "never retrieved"."""
    if not future.cancelled():
        future.exception()


async def _wait_readable(stream: Stream[Any], group: str, seconds: float) -> None:
    """Wait until ``group`` may have an element, at most ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stream.wait_readable(group)
