"""The message loop of a processor node (S-7, S-8): tries under the per-message Retry, batches,
hops of a plain handler to its worker thread, and commits handed over while the next messages
run. :class:`~durable_core.graph.processor.Processor` declares the node; each run of its body
is one :class:`MessageLoop`.
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
from typing import TYPE_CHECKING, Any

from durable_core._words import a
from durable_core.errors import MessageFailedError, RetryExhaustedError, SlotError
from durable_core.graph.bodythreads import BodyThreads
from durable_core.graph.checkpoint import Values
from durable_core.graph.keys import type_name
from durable_core.graph.messages import Managed, MessageAttempt, MessageCommit, MessageContext
from durable_core.graph.signals import RunAborted, direct_call, eager_call, settle
from durable_core.graph.streams import _NOTHING as _NO_ELEMENT
from durable_core.graph.streams import Stream
from durable_core.graph.waits import waiting

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Attempt
    from durable_core.graph.context import RunContext
    from durable_core.graph.processor import Handler, Processor

UNSAVED_COMMITS = 8
"""How many of a processor's commits may be handed over and not saved yet while its next
messages run. The checkpointer saves those queued behind a save in flight together, in the
next save, so the slower the saves, the more messages each one holds."""

HOP_SECONDS = 0.0005
"""How long (seconds) one hop of a plain handler to its worker thread may go on into the
messages of the processor's next commits. A hop runs the delivered messages of the batch being
built, then, while it has run for less than this and fewer than :data:`UNSAVED_COMMITS`
commits would be waiting for their saves, those of the next commits (each still committed on
its own, in order). A handler slower than this runs one commit's messages per hop."""


def _is_async(function: Any) -> bool:
    """Whether calling ``function`` gives a coroutine (an async function, or an object whose
    ``__call__`` is one)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - instances with async __call__
    )


class MessageLoop:
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
        self.deadline = math.inf  # when the batch being built commits anyway (monotonic)
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
        hop = self.submit(function, args)
        try:
            return await hop.future
        except asyncio.CancelledError:
            self.rc._cancel()  # the handler sees rc.canceled while it still runs
            await hop.returned()  # it cannot be interrupted: wait for it
            raise

    def submit(self, function: Callable[..., Any], args: tuple[Any, ...]) -> _Hop:
        """Start ``function(*args)`` in the node's worker thread (made on first use)."""
        loop = asyncio.get_running_loop()
        threads = self.threads
        if threads is None:
            threads = self.threads = BodyThreads(loop, 1, f"durable-processor-{self.p.id}")
        hop = _Hop(loop)
        threads.submit(function, args, hop.done)
        return hop

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
        self.deadline = math.inf
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
                wait = self.deadline - time.monotonic()
                if wait > 0:
                    await rc._idle(_wait_readable(stream, group, wait))
                    continue
                await self.commit(state)
                continue
            if not self.batch:
                self.deadline = time.monotonic() + p.max_delay
            if plain:
                state = await self.process_plain(state, item, stream, group)
            else:
                state = await self.process(state, item, stream, group)
            if self.stopped:
                break  # the stopping batch commits with finish, in the final transaction
            if len(self.batch) >= p.commit_every or time.monotonic() >= self.deadline:
                await self.commit(state)
        return state

    async def process(
        self, state: Any, item: tuple[int, Any], stream: Stream[Any], group: str
    ) -> Any:
        """Run an async handler on ``item`` and on the messages already delivered behind it
        that fit in the batch being built, one after another, staging each into the batch.

        Their first tries are begun together, before the first of them runs, in sequence
        order (one ``begin_messages`` call), as a plain handler's hop begins them. A try that
        fails is saved failed and tried again (under its budget) before the messages behind
        it, which keep the tries they were begun with. When ``max_delay`` has passed before
        the last of them ran, the batch commits there and the rest start the next batch.
        ``rc.stop()`` ends them after its message; the messages behind it are not processed.
        """
        p = self.p
        limit = p.retry.attempts if p.retry is not None else 1
        sequences, elements = _delivered(item, stream, group, p.commit_every - len(self.batch))
        tries = await self.begin_first(sequences, stream.generation, limit)
        last = len(tries) - 1
        values = Values(self.sets, frozenset(self.skips))  # what the batch staged so far
        for i, message in enumerate(tries):
            state, values = await self.process_one(state, message, elements[i], limit, values)
            if self.stopped:
                break
            if i < last and time.monotonic() >= self.deadline:
                await self.commit(state)
                self.deadline = time.monotonic() + p.max_delay
                values = Values(self.sets, frozenset(self.skips))
        return state

    async def process_one(
        self, state: Any, message: MessageAttempt, element: Any, limit: int, values: Values
    ) -> tuple[Any, Values]:
        """Run the begun try ``message`` of an async handler, and the message's next tries
        while they fail (under its Retry budget: ``limit`` tries), staging the successful one
        into the batch; ``values``: what the messages before it staged. Returns the state after
        it, and what is staged then (``values`` itself when it set and skipped nothing)."""
        p = self.p
        self.last_sequence = message.sequence
        while True:
            if message.index > message.limit:
                raise self.exhausted(message)
            ctx = MessageContext(self.rc, message, values, message.sequence)
            given = copy.deepcopy(state) if message.limit > 1 else state
            try:
                new_state = await self.call(p.handler, ctx, given, element)
                self.check_state(new_state, "the handler returned")
            except Exception as error:
                ctx._closed = True
                await self.fail(message, error)
                if message.index >= message.limit:
                    raise self.failed(message, error) from error
                if p.retry is not None and p.retry.delay:
                    await asyncio.sleep(p.retry.delay)
                message = await self.begin(
                    message.sequence, message.generation, message.index + 1, limit
                )
                continue
            finally:
                ctx._closed = True
            self.stage(ctx)
            self.batch.append(message)
            if ctx._stopped:
                self.stopped = True
            if ctx._owned:  # it set or skipped: the next message starts from that
                values = Values(ctx._set, frozenset(ctx._skipped))
            return new_state, values

    async def process_plain(
        self, state: Any, item: tuple[int, Any], stream: Stream[Any], group: str
    ) -> Any:
        """Run a plain handler on ``item`` and on the messages already delivered behind it,
        several per hop to the worker thread; stage them into the batch, committing each batch
        that fills while messages behind it ran in the same hop.

        A hop takes the messages that fit in the batch being built, and, within
        :data:`HOP_SECONDS` of its start, those of the next commits, as long as at most
        :data:`UNSAVED_COMMITS` commits would then wait for their saves. Only elements the
        stream has delivered (saved ones) are taken. Every message is begun (``begin_message``)
        before the hop that runs it, in sequence order; a hop stops at the first failed try,
        which discards only that try's staged work: the messages before it are staged (and
        the full batches among them committed), its message is saved failed and tried again
        (under its budget) before the messages behind it, which keep the tries they were begun
        with. ``rc.stop()`` ends the hop after its message; the messages behind it are not
        processed.
        """
        p = self.p
        limit = p.retry.attempts if p.retry is not None else 1
        unsaved = self.unsaved
        while unsaved and unsaved[0].done():
            await self.saved()  # at once; raises RunAborted when that save failed
        every = p.commit_every
        room = every - len(self.batch)  # the messages of the batch being built
        spare = UNSAVED_COMMITS - 1 - len(unsaved)  # commits that may be made behind it
        take = max(room, min(UNSAVED_COMMITS, room + every * spare))
        sequences, elements = _delivered(item, stream, group, take)
        tries = await self.begin_first(sequences, stream.generation, limit)
        first, count = 0, len(tries)  # tries[first:] are begun and not run yet
        while first < count:
            end = first
            while end < count and tries[end].index <= tries[end].limit:
                end += 1
            if end == first:
                raise self.exhausted(tries[first])
            # The hop may stop for time only at a message of a later commit than the batch
            # being built (the batch's own messages commit together anyway).
            timed = first + every - len(self.batch)
            contexts, states, error, canceled = await self.call_plain(
                tries,
                elements,
                first,
                end,
                timed,
                state,
                Values(self.sets, frozenset(self.skips)),
            )
            for ctx, new_state in zip(contexts, states, strict=True):
                state = new_state
                self.stage(ctx)
                self.batch.append(tries[first])
                first += 1
                self.last_sequence = tries[first - 1].sequence
                if ctx._stopped and canceled is None:
                    self.stopped = True
                    return state
                if len(self.batch) >= every and (
                    first < count or error is not None or canceled is not None
                ):
                    # Full, with more run (or to run) behind it: committed before them, in
                    # order. The read loop commits the last one; on a cancel, this loop.
                    canceled = await self.commit_whole(state, canceled)
                    self.deadline = time.monotonic() + p.max_delay
            if canceled is not None:
                raise canceled
            if error is None:
                if not contexts:  # ended before its first message: the run's token was
                    await _canceled_soon()  # canceled, and the cancel is on its way here
                continue
            message = tries[first]
            self.last_sequence = message.sequence
            await self.fail(message, error)
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
        timed: int,
        state: Any,
        pending: Values,
    ) -> tuple[list[MessageContext], list[Any], Exception | None, BaseException | None]:
        """Run the tries ``tries[first:end]`` on ``elements[first:end]`` in order, in one hop
        to the worker thread: the successful tries' contexts, the state after each of them,
        the error of the first failed try (it is ``tries[first + len(contexts)]``; None when
        none failed), and the ``CancelledError`` to raise once they are staged when the node
        was canceled meanwhile (else None). From ``tries[timed]`` on, the hop ends before a
        try once it has run for :data:`HOP_SECONDS` (the rest are run by the next hop).

        A cancel ends the hop at the message during which it came (or before the next one):
        that message and those behind it are dropped (not committed: processed again on
        resume); the ones before it are returned, to be committed as they would have been
        had they run in hops of their own.
        """
        rc, p = self.rc, self.p
        handler = p.handler
        check = self.check_state
        token = self.run_.token

        def work() -> Any:
            contexts: list[MessageContext] = []
            states: list[Any] = []
            current, given_values = state, pending
            started = time.perf_counter()
            for index in range(first, end):
                if rc.canceled or (token is not None and token.canceled):
                    break
                if contexts and index >= timed and time.perf_counter() - started >= HOP_SECONDS:
                    break
                message = tries[index]
                ctx = MessageContext(rc, message, given_values, message.sequence)
                given = copy.deepcopy(current) if message.limit > 1 else current
                try:
                    new_state = handler(ctx, given, elements[index])
                    check(new_state, "the handler returned")
                except Exception as error:
                    return contexts, states, error
                except asyncio.CancelledError:
                    break  # raised by its context once the node was canceled: dropped
                finally:
                    ctx._closed = True
                if rc.canceled or (token is not None and token.canceled):
                    break  # canceled while it ran: dropped, as a try cut off
                contexts.append(ctx)
                states.append(new_state)
                current = new_state
                if ctx._owned:  # it set or skipped: the next message starts from that
                    given_values = Values(ctx._set, frozenset(ctx._skipped))
                if ctx._stopped:
                    break
            return contexts, states, None

        hop = self.submit(work, ())
        try:
            return (*await hop.future, None)
        except asyncio.CancelledError as canceled:
            rc._cancel()  # the handler sees rc.canceled while it still runs
            await hop.returned()  # it cannot be interrupted: wait for it
            if hop.error is not None:
                raise
            contexts, states, _ = hop.result  # a failed try is dropped: it ended canceled
            return contexts, states, None, canceled

    async def fail(self, message: MessageAttempt, error: Exception) -> None:
        """Save a failed try (``fail_message``), once every commit before it is saved: the
        record never holds a message's failed try without the messages handled before it.

        Raises:
            RunAborted: a save failed (the run stopped with its error).
        """
        while self.unsaved:
            await self.saved()
        await self.seam("fail_message", None, None, message, error)

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

    async def commit(self, state: Any, *, final: bool = False, pressure: bool = True) -> None:
        """Commit the batch (or the final transaction), then apply it and hand over the sends.

        Output streams are opened, and their sequence numbers taken, before the commit; the
        elements reach readers once the commit is saved (at once when the checkpointer returns
        None, else when the awaitable it returned succeeded). That awaitable is not waited for
        here: the next messages run while it is saved. What is waited for, once the commit is
        handed over, is the save of the oldest commit before it while :data:`UNSAVED_COMMITS`
        of them are not known saved (all of them for the final transaction). (The
        checkpointer applies each commit after the one before it, in the same save or a
        later one.) Before the next message, the processor waits until every output stream
        has room again (back-pressure); ``pressure=False`` skips that wait (the node was
        canceled: its readers may be gone).

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
        saved, canceled = await self.commit_call(commit)
        # Made: taken into account before anything else is awaited (a cancel from here on
        # leaves the batch committed, never half).
        future = None if saved is None else asyncio.ensure_future(saved)
        if future is not None:
            future.add_done_callback(_read_failure)
        unsaved = self.unsaved
        if future is not None and not final:
            unsaved.append(future)  # the next messages run while it is saved (or it failed)
        rc._ready.update(self.sets)
        rc._skipped.update(self.skips)
        self.batch, self.sets, self.skips, self.sends = [], {}, set(), {}
        for name, numbered in sends.items():
            stream = streams[name]
            for sequence, element in numbered:
                stream.push(sequence, element, future, run.abort)
        if canceled is not None:
            raise canceled
        while len(unsaved) > (0 if final else UNSAVED_COMMITS):
            await self.saved()  # the oldest commit before it
        if not final and pressure:
            for stream in streams.values():
                while not stream.writable():
                    await rc._idle(stream.wait_writable())

    async def commit_call(self, commit: MessageCommit) -> tuple[Any, BaseException | None]:
        """``commit_messages`` through the run's guard, without a task of its own when the
        checkpointer answers at once (the durable one only queues the save): what it
        returned, and the ``CancelledError`` that arrived while it ran (a commit under way is
        never cut off: the caller raises it once the commit is taken into account)."""
        run = self.run_
        if run.noop:
            return None, None
        call = eager_call(run, run.cp.commit_messages(self.attempt, commit))
        canceled: BaseException | None = None
        if not call.done():
            try:
                await asyncio.shield(call)
            except asyncio.CancelledError as exc:
                canceled = exc
                await settle(call)
            except RunAborted:
                pass  # raised by call.result() below
        return call.result(), canceled

    async def commit_whole(
        self, state: Any, canceled: BaseException | None
    ) -> BaseException | None:
        """Commit the full batch even when the node is canceled meanwhile (its messages ran
        before the cancel); return the ``CancelledError`` to raise afterwards, if any."""
        while True:
            try:
                await self.commit(state, pressure=canceled is None)
                return canceled
            except asyncio.CancelledError as exc:
                canceled = canceled or exc
                if not self.batch:
                    return canceled  # made; the cancel came while it waited

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
                if not future.cancelled():
                    raise  # this task was canceled (even as the save was answered)
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

    __slots__ = ("_loop", "_waiter", "error", "finished", "future", "result")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.finished = False
        self.result: Any = None  # kept when the future was canceled meanwhile
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def done(self, result: Any, error: BaseException | None) -> None:
        self.finished = True
        self.result, self.error = result, error
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


async def _canceled_soon() -> None:
    """Wait for the cancel of a node whose run's token was canceled (from another thread: the
    run cancels its nodes on the event loop's next turns)."""
    while True:
        await asyncio.sleep(0.001)


def _read_failure(future: asyncio.Future[Any]) -> None:
    """Mark a failed commit's exception as seen: the failure stops the run on its own path
    (the save's error becomes the run's error), and the future only gates the sends, which may
    be none; left unread, asyncio would report it again as "never retrieved"."""
    if not future.cancelled():
        future.exception()


def _delivered(
    item: tuple[int, Any], stream: Stream[Any], group: str, take: int
) -> tuple[list[int], list[Any]]:
    """``item`` and the elements already delivered to ``group`` behind it, ``take`` at most:
    their sequences and their elements, as parallel lists (a hop may run hundreds of
    messages). No await between the polls: the stream's generation is the same for all."""
    sequences, elements = [item[0]], [item[1]]
    while len(elements) < take:
        try:
            more = stream.poll(group)
        except StopAsyncIteration:
            break  # the next poll of the read loop sees the end again
        if more is _NO_ELEMENT:
            break
        sequences.append(more[0])
        elements.append(more[1])
    return sequences, elements


async def _wait_readable(stream: Stream[Any], group: str, seconds: float) -> None:
    """Wait until ``group`` may have an element, at most ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stream.wait_readable(group)
