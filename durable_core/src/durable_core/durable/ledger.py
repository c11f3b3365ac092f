"""The run's committed record and its one commit path (SPEC R-RT-1, R-RT-2).

:class:`Ledger` owns a session and the last record that the store confirmed. Every change is a
*mutation*: a function applied to a :class:`~durable_core.durable.proposal.Proposal`, the
committed record's changes-to-be (never a copy of it). To save, the ledger writes the
proposal's changes into the committed record (logging each step), encodes only what changed
(:class:`~durable_core.records.encoder.RecordEncoder`: the save's delta, and the complete bytes on
demand) and hands them to ``Session.save`` as its ``encoded`` argument
(:class:`~durable_core.store.EncodedRecord`; a store that does not take it gets the record
alone). When the save fails, the logged steps are undone: the committed record is exactly as
it was (R-RT-1). A change costs time in proportion to what it changes, not to the size of the
record.

Mutations that arrive while a save is in flight are applied together to the next proposal and
saved once (group commit): confirmations of nodes finishing together share one save, and no
caller is answered before the save that contains its change has succeeded. A change may also be
held back behind an earlier one (``commit_soon(..., after=)``): it is never applied before that
one, and never at all when that one raised or its save failed. The changes held back behind a
save in flight, and behind each other, are made together in the next save, in order, each one
only if the one before it was (a processor's next commits, queued while the one before them is
being saved); the save thread makes that save right after the one in flight.

Any save error stops the ledger for good (R-RT-2): the record may or may not have been written,
so nothing is retried, rolled back or overwritten from the old snapshot. Every later commit
raises the same :class:`~durable_core.errors.CheckpointError`; the next ``resume`` loads again.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from durable_core._quickinit import quick_init
from durable_core.durable.identities import new_id
from durable_core.durable.proposal import Proposal, adopt, rollback
from durable_core.errors import CheckpointError, ConflictError, DurableError
from durable_core.records import (
    RECORD_FORMAT,
    AttemptRecord,
    AttemptState,
    NodeReason,
    NodeRecord,
    RunRecord,
    ScopeRecord,
    ValueRecord,
    copy_record,
)
from durable_core.records.encoder import RecordEncoder
from durable_core.store import MAX_REVISION, EncodedRecord, Session
from durable_core.store.capabilities import Capability, capabilities

__all__ = [
    "Committed",
    "Ledger",
    "Proposal",
    "begin_attempt",
    "confirm_node",
    "fail_attempt",
    "new_id",
    "open_scope",
]

Mutation = Callable[["Proposal"], Any]

_new_node = quick_init(NodeRecord, "node_id", "attempt", "reason", "outputs")
"""``NodeRecord(node_id=…, attempt=…, reason=…, outputs=…)``: one per confirmed node."""
_new_attempt = quick_init(AttemptRecord, "parent", "node_id", "boundary", "index", "limit", "state")
"""``AttemptRecord(parent=…, …, state=…)``: one per attempt begun."""


class Committed(NamedTuple):
    """What :meth:`Ledger.commit_async` returns once the save holding a mutation succeeded."""

    value: Any
    """The mutation's return value."""
    revision: int
    """The revision written by that save."""


class _Failed:
    """A mutation's exception, kept in the results of :meth:`Ledger.commit_each`."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _SaveThread:
    """One thread running a ledger's saves one after another.

    Handing a save to it costs a queue put (no executor future to wrap). The thread is started
    on the first save and ends after :data:`_IDLE_SECONDS` without one (it starts again when
    needed), so a ledger that is dropped leaves no thread behind.
    """

    __slots__ = ("_jobs", "_lock", "_running")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], Any, Callable[..., None]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._running = False

    def submit(
        self,
        save: Callable[[Any], Any],
        argument: Any,
        done: Callable[[Any, BaseException | None], None],
    ) -> None:
        """Run ``save(argument)`` in the thread, then ``done(result, None)`` or
        ``done(None, error)`` there."""
        with self._lock:
            self._jobs.put((save, argument, done))
            if not self._running:
                self._running = True
                threading.Thread(target=self._work, name="durable-save", daemon=True).start()

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            try:
                save, argument, done = jobs.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if jobs.empty():
                        self._running = False
                        return
                continue
            try:
                result = save(argument)
            except BaseException as exc:  # handed to the callers, never lost in this thread
                done(None, exc)
            else:
                done(result, None)


_IDLE_SECONDS = 1.0

_SAVE_WEIGHT = 0.25
"""The weight of the latest save in :attr:`Ledger._save_seconds` (an exponential moving average:
a store that turns slow hands its element saves back to the save thread after a few saves)."""


class Ledger:
    """The committed record of one run and the serialized path that changes it.

    Args:
        session: the session owning the run (the ledger never closes it).
        record: the committed record as loaded, or ``None`` before the first save.

    Thread-safety: :meth:`commit` may be called from any thread; saves are serialized.
    :meth:`commit_async` batches mutations arriving while a save is in flight (group commit).
    """

    def __init__(self, session: Session, record: RunRecord | None) -> None:
        self._session = session
        self._record = record
        self._lock = threading.RLock()
        self._error: CheckpointError | None = None
        self._pending: list[tuple[Mutation, asyncio.Future[Any]]] = []
        # Changes held back until the save of an earlier change succeeded, by its future
        # (commit_soon's ``after``).
        self._behind: dict[asyncio.Future[Any], list[tuple[Mutation, asyncio.Future[Any]]]] = {}
        # A held change taken into the save of the change it was held behind (by its future):
        # the future of that change, whose mutation must succeed first in the same save.
        self._gated: dict[asyncio.Future[Any], asyncio.Future[Any]] = {}
        self._behind_lock = threading.Lock()  # the save thread takes them out too
        self._inflight: asyncio.Future[None] | None = None
        self._starting = False
        self._deferred: list[Mutation] = []
        self._deferred_lock = threading.Lock()
        self._encoder = RecordEncoder()
        # How the session lets its saves be called: declared on its class (store.capabilities).
        declared = capabilities(session)
        self._pass_encoded = Capability.ENCODED_SAVES in declared
        self._inline = Capability.QUICK_SAVES in declared
        self._idle_saves = Capability.IDLE_SAVES in declared
        self._idle: Callable[[], bool] | None = None
        self._alone: Callable[[], bool] | None = None
        self._readers_wait = False
        """A change queued since the last batch was taken carries stream elements (see
        :meth:`commit_soon`)."""
        self._save_seconds = 0.0
        """The recent saves' duration, seconds: a moving average (:data:`_SAVE_WEIGHT`)."""
        self._saver = _SaveThread()
        self.saves = 0
        """Number of successful saves made through this ledger."""
        self.changes = 0
        """Number of mutations saved through this ledger (``changes - saves`` were grouped)."""
        self.batches = 0
        """Number of batches taken from the queue so far (on the event loop). While it has not
        moved, a mutation queued by :meth:`commit_soon` has not been applied yet: its caller
        may still add to what it will write (acks coalescing into one)."""

    @property
    def record(self) -> RunRecord:
        """The committed record. Callers must not change it."""
        if self._record is None:
            raise DurableError("the run has no committed record yet")
        return self._record

    @property
    def revision(self) -> int:
        """The committed revision (0 before the first save)."""
        return 0 if self._record is None else self._record.revision

    @property
    def error(self) -> CheckpointError | None:
        """The error that stopped the ledger, if any."""
        return self._error

    def create(self, record: RunRecord) -> None:
        """Save the first record of a run (expected revision 0, written as revision 1; R-RT-3).

        Args:
            record: the new record; it is not modified (a copy is saved).

        Raises:
            CheckpointError: the save failed (a ``ConflictError`` inside when a record already
                exists); the result may be uncertain and must be resolved by loading.
        """
        with self._lock:
            self._raise_if_stopped()
            proposed = copy_record(record)
            proposed.format = RECORD_FORMAT
            proposed.revision = 1
            try:
                encoded = EncodedRecord(self._encoder.encode(proposed))
                self._store(proposed, 0, encoded)
            except Exception as exc:
                self._stop(exc, proposed.run_id, 1)
            self._record = proposed
            self.saves += 1

    def defer(self, mutation: Mutation) -> None:
        """Apply ``mutation`` first in the next save, without saving now.

        For changes that only matter together with a later one (a new Sub scope is saved with
        the first attempt inside it), so that they cost no save of their own. A deferred
        mutation must not raise.
        """
        with self._deferred_lock:  # never waits for a save in flight
            self._deferred.append(mutation)

    def commit(self, *mutations: Mutation) -> list[Any]:
        """Apply the deferred mutations, then ``mutations`` in order, to one proposal, and save
        it once. Format-1 records are written back as format 2 (R-REC-1).

        Returns:
            The mutations' return values, in order.

        Raises:
            CheckpointError: this save or an earlier one failed; the ledger is stopped.
            Exception: the first mutation that raised (it changed nothing; the other mutations
                were saved).
        """
        results = self.commit_each(mutations)
        for result in results:
            if isinstance(result, _Failed):
                raise result.error
        return results

    def commit_each(
        self,
        mutations: tuple[Mutation, ...] | list[Mutation],
        after: list[int] | None = None,
    ) -> list[Any]:
        """Like :meth:`commit`, but a mutation that raises is left out on its own: its
        exception takes its place in the results (wrapped), and the others are saved.

        A mutation must check before it changes anything, so that one that raises has changed
        nothing. When every mutation raised (and nothing is deferred), nothing is saved.
        ``after[i]``, when given and not negative, is the index of an earlier mutation that
        must have succeeded for mutation ``i`` to be applied; when it raised, mutation ``i``
        is left out with the same exception.

        Raises:
            CheckpointError: the save failed, or an earlier one did; the ledger is stopped.
        """
        with self._lock:
            if self._error is not None:
                raise self._error
            with self._deferred_lock:
                deferred, self._deferred = self._deferred, []
            proposal = Proposal(self.record)
            for mutation in deferred:
                mutation(proposal)
            results: list[Any] = []
            applied = 0
            for i, mutation in enumerate(mutations):
                if after is not None and after[i] >= 0:
                    before = results[after[i]]
                    if isinstance(before, _Failed):  # never applied without the one before it
                        results.append(before)
                        continue
                try:
                    results.append(mutation(proposal))
                    applied += 1
                except Exception as exc:
                    results.append(_Failed(exc))
            if applied or deferred:
                self._save(proposal)
                self.changes += applied
            return results

    def save_when(self, idle: Callable[[], bool]) -> None:
        """Let :meth:`commit_async` save on the event loop while ``idle()`` is true.

        Only for a session that says its saves may run there (``Capability.IDLE_SAVES``: its
        ``save`` never uses an event loop); otherwise this does nothing. ``idle`` is asked on
        the event loop before each save; it should be true only when nothing else could use
        the loop during the save (no body running, or each running body waits for a save or a
        stream), since the loop waits for the save.
        """
        if self._idle_saves:
            self._idle = idle

    def start_when(self, alone: Callable[[], bool]) -> None:
        """Let :meth:`commit_async` start a save at once, without the turn of the event loop
        that gathers the commits made meanwhile, while ``alone()`` is true.

        ``alone`` is asked on the event loop by the commit that would start a save; it should
        be true only when nothing else is ready to run on the loop before its next turn (see
        :func:`durable_core.graph.turns.alone_in_turn`), so that no other commit could have
        joined that save.
        """
        self._alone = alone

    async def commit_async(self, mutation: Mutation) -> Committed:
        """Commit ``mutation`` from the event loop, sharing a save with concurrent commits.

        The save runs in the ledger's save thread, or on the event loop itself (which spares
        two thread hops) when the session says its saves are quick (``Capability.QUICK_SAVES``),
        or when it allows it (``Capability.IDLE_SAVES``) and no body runs (:meth:`save_when`);
        its outcome is handed to every caller of its batch by the caller that started the
        batch (a save on the loop, made once that caller's turn is over) or by a callback of
        the event loop (a save in the save thread), never by a background task: canceling a
        caller (or every task of the loop) cancels only that caller's wait. The change is
        still saved, the other callers still get their answer, and a mutation whose save
        succeeded is never reported as failed.

        Returns:
            When the save containing the mutation has succeeded: the mutation's result and the
            revision that save wrote.

        Raises:
            CheckpointError: the save failed, or the ledger was already stopped.
            Exception: the mutation itself raised (nothing of it was saved).
        """
        if self._error is not None:
            raise self._error
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Committed] = loop.create_future()
        self._pending.append((mutation, future))
        if self._inflight is None and not self._starting:
            alone = self._alone
            if alone is not None and alone():
                # Nothing else is ready to run before the loop's next turn, so no other commit
                # could join: the save starts now (made on the loop, it has answered already).
                self._start_batch(loop)
                return await future
            # This caller starts the save after one turn of the loop, so that commits made in
            # this turn (nodes finishing together) share it. A save made on the loop answers
            # every caller before this one goes on, so it needs no turn to learn its outcome.
            self._starting = True
            try:
                await asyncio.sleep(0)
            except BaseException:  # canceled meanwhile: the batch is saved all the same
                loop.call_soon(self._start_batch, loop)
                raise
            self._start_batch(loop)
        return await future

    def commit_soon(
        self,
        mutation: Mutation,
        *,
        after: asyncio.Future[Any] | None = None,
        readers_wait: bool = False,
    ) -> asyncio.Future[Committed]:
        """:meth:`commit_async` without a coroutine: queue ``mutation`` and return the future
        its save answers (for the per-element calls of streams, which would otherwise cost a
        task each). The save starts after two turns of the loop, as it would from a task;
        a stopped ledger answers with its error.

        Args:
            mutation: the change.
            after: the future of a change queued before by this method and not answered
                yet (None: no such change). ``mutation`` is then held back: it is applied
                after that change, in the same save or a later one, never before it. Held
                back behind a save in flight, it is made in the save right after that one,
                together with every change held back behind the same save and behind each
                other (in the order they were queued); the save thread makes that save at
                once, without a turn of the loop. When that change raised or its save failed,
                ``mutation`` is never applied and its future fails with the same error (and
                so, in turn, does every change held back behind it).
            readers_wait: the change carries a stream's elements, which no reader sees before
                it is saved. A save holding such a change is made on the event loop when the
                session allows it (``Capability.IDLE_SAVES``) and the recent saves took less
                than the interpreter's switch interval (``sys.getswitchinterval()``, 5 ms by
                default), whether bodies run or not: handed to the save thread, it would first
                wait for the interpreter lock while the loop runs Python, up to that interval
                at each step, and the readers wait for it all along.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Committed] = loop.create_future()
        if self._error is not None:
            future.set_exception(self._error)
            return future
        if after is not None and not after.done():
            with self._behind_lock:
                self._behind.setdefault(after, []).append((mutation, future))
            return future
        self._pending.append((mutation, future))
        if readers_wait:
            self._readers_wait = True
        if self._inflight is None and not self._starting:
            # Two turns, as a task calling commit_async would take: commits made meanwhile (a
            # processor's, a reader's acks) share the save.
            self._starting = True
            loop.call_soon(loop.call_soon, self._start_batch, loop)
        return future

    def last_queued(self, future: asyncio.Future[Any]) -> bool:
        """True when ``future`` is that of the last change queued and its batch was not taken
        yet: a change added to that change's mutation is applied right after it, in the
        same save, as if queued on its own."""
        pending = self._pending
        return bool(pending) and pending[-1][1] is future

    async def settle(self) -> None:
        """Wait until no save started by :meth:`commit_async` is in flight.

        Call it before closing the session, so that a save running in a worker thread is never
        cut off by the close. Waiting can be canceled; the save still completes.
        """
        while self._inflight is not None or self._starting:
            if self._inflight is None:
                await asyncio.sleep(0)
            else:
                await asyncio.wait([self._inflight])

    def _start_batch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._starting = False
        self.batches += 1
        batch, self._pending = self._pending, []
        readers_wait, self._readers_wait = self._readers_wait, False
        if (
            self._inline
            or (self._idle is not None and self._idle())
            or (readers_wait and self._idle_saves and self._save_seconds < sys.getswitchinterval())
        ):
            # The store's saves never block for long (QUICK_SAVES), or nothing else could use
            # the loop meanwhile (no body runs), or readers wait for the elements it carries
            # and saves are quick (see commit_soon): save right here, which spares two thread
            # hops per save.
            try:
                outcome = self._commit_batch(batch)
            except Exception as exc:
                self._answer(loop, batch, None, exc)
            else:
                self._answer(loop, batch, outcome, None)
            return
        inflight: asyncio.Future[None] = loop.create_future()
        self._inflight = inflight

        def done(outcome: tuple[list[Any], int] | None, error: BaseException | None) -> None:
            # In the save thread: hand the outcome to the event loop; then save right here
            # the changes held back behind this batch (commit_soon's ``after``), one batch
            # after another, while they come: no hop to the loop and back between the saves.
            current, result, failure = batch, outcome, error
            while True:
                held = self._held_behind(current, result, failure)
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(
                        self._saved, loop, current, inflight, result, failure, not held
                    )
                if not held:
                    return
                current, result, failure = held, None, None
                try:
                    result = self._commit_batch(held)
                except BaseException as exc:  # handed to its callers on the loop
                    failure = exc

        self._saver.submit(self._commit_batch, batch, done)

    def _held_behind(
        self,
        batch: list[tuple[Mutation, asyncio.Future[Any]]],
        outcome: tuple[list[Any], int] | None,
        error: BaseException | None,
    ) -> list[tuple[Mutation, asyncio.Future[Any]]]:
        """In the save thread, after ``batch`` was saved: the changes held back behind its
        changes that succeeded, and behind those in turn (taken out of the queue, each gated on
        the one it was held behind), to be saved together next; none after a failed save."""
        if error is not None or outcome is None or self._error is not None:
            return []
        held: list[tuple[Mutation, asyncio.Future[Any]]] = []
        with self._behind_lock:
            behind = self._behind
            if not behind:
                return held
            for (_, future), result in zip(batch, outcome[0], strict=True):
                if not isinstance(result, _Failed):
                    held.extend(behind.pop(future, ()))
            self._take_chained(held)
        return held

    def _take_chained(self, held: list[tuple[Mutation, asyncio.Future[Any]]]) -> None:
        """Append to ``held`` the changes held back behind its changes, in turn, each gated on
        the one it was held behind (made in the same save only if that one is). Called with
        ``_behind_lock`` held."""
        behind, gated = self._behind, self._gated
        i = 0
        while behind and i < len(held):
            future = held[i][1]
            chained = behind.pop(future, None)
            if chained:
                for _, later in chained:
                    gated[later] = future
                held.extend(chained)
            i += 1

    def _saved(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[Mutation, asyncio.Future[Any]]],
        inflight: asyncio.Future[None],
        outcome: tuple[list[Any], int] | None,
        error: BaseException | None,
        last: bool = True,
    ) -> None:
        """On the loop: answer ``batch``; ``last`` when no save follows it in the save thread
        (the ledger has no save in flight any more)."""
        if last:
            self._inflight = None
            inflight.set_result(None)
        self._answer(loop, batch, outcome, error)

    def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[Mutation, asyncio.Future[Any]]],
        outcome: tuple[list[Any], int] | None,
        error: BaseException | None,
    ) -> None:
        """Hand each caller of ``batch`` its outcome; start the next batch if one waits."""
        if error is not None or outcome is None:
            if error is None:
                error = CheckpointError("the save ended without an outcome")
            waiting, self._pending = batch + self._pending, []
            with self._behind_lock:
                for behind in self._behind.values():
                    waiting.extend(behind)
                self._behind.clear()
                self._gated.clear()
            for _, future in waiting:
                if not future.done():
                    future.set_exception(error)
            return
        results, revision = outcome
        behind = self._behind
        for (_, future), result in zip(batch, results, strict=True):
            if behind:  # held back behind this batch, not taken by the save thread
                with self._behind_lock:
                    held = behind.pop(future, None)
                    if held is not None:
                        self._take_chained(held)
                if held is not None and isinstance(result, _Failed):
                    with self._behind_lock:
                        for _, later in held:
                            self._gated.pop(later, None)
                    for _, later in held:  # held back behind a change that was not made
                        if not later.done():
                            later.set_exception(result.error)
                elif held is not None:
                    self._pending.extend(held)
            if future.done():  # its caller stopped waiting; the change is saved all the same
                continue
            if isinstance(result, _Failed):
                future.set_exception(result.error)
            else:
                future.set_result(Committed(result, revision))
        if self._pending and not self._starting and self._inflight is None:
            if self._inline:
                # Not at once: the callers answered now get a turn of the loop first, so
                # that what they commit next shares the save.
                self._starting = True
                loop.call_soon(self._start_batch, loop)
            else:
                self._start_batch(loop)

    def _commit_batch(
        self, batch: list[tuple[Mutation, asyncio.Future[Any]]]
    ) -> tuple[list[Any], int]:
        mutations = [mutation for mutation, _ in batch]
        after = None
        if self._gated:
            with self._behind_lock:
                gated = self._gated
                if gated:
                    place = {id(future): i for i, (_, future) in enumerate(batch)}
                    after = [-1] * len(batch)
                    for i, (_, future) in enumerate(batch):
                        before = gated.pop(future, None)
                        if before is not None:
                            after[i] = place.get(id(before), -1)
        with self._lock:
            started = time.perf_counter()
            results = self.commit_each(mutations, after)
            spent = time.perf_counter() - started
            self._save_seconds += (spent - self._save_seconds) * _SAVE_WEIGHT
            return results, self._record.revision  # commit_each read the record

    def _raise_if_stopped(self) -> None:
        if self._error is not None:
            raise self._error

    def _save(self, proposal: Proposal) -> None:
        """Adopt ``proposal`` into the committed record, save it, and undo the adoption when
        the save fails (R-RT-1: a failed save leaves the committed record as it was)."""
        committed = self._record  # the proposal was made over it
        expected = committed.revision
        if expected >= MAX_REVISION:
            self._stop(
                ConflictError(f"revision {expected} cannot grow: it is the uint64 maximum"),
                committed.run_id,
                expected,
            )
        proposal.record.revision = expected + 1
        change, undo = adopt(proposal, committed)
        try:
            delta, data = self._encoder.encode_change(committed, change, expected)
            encoded = EncodedRecord(data, delta)
            self._store(committed, expected, encoded)
        except BaseException as exc:
            rollback(undo)
            self._encoder = RecordEncoder()  # what it remembers is of the undone change
            if not isinstance(exc, Exception):
                # KeyboardInterrupt (a second Ctrl-C on the event loop's thread) and the
                # like: the save may or may not be written; nothing more is saved, and the
                # exception goes on as it is.
                with contextlib.suppress(CheckpointError):
                    self._stop(exc, committed.run_id, expected + 1)
                raise
            self._stop(exc, committed.run_id, expected + 1)
        self.saves += 1

    def _store(self, record: RunRecord, expected: int, encoded: EncodedRecord) -> None:
        if self._pass_encoded:
            self._session.save(record, expected, encoded=encoded)
        else:
            self._session.save(record, expected)

    def _stop(self, exc: BaseException, run_id: str, revision: int) -> NoReturn:
        first = revision <= 1
        what = "the first record" if first else f"revision {revision}"
        hint = (
            " A record for this run already exists: use resume."
            if isinstance(exc, ConflictError) and first
            else ""
        )
        error = CheckpointError(
            f"saving {what} of run {run_id!r} failed ({type(exc).__name__}: {exc}); "
            f"the run stopped and the save may or may not have been written.{hint} "
            "Fix the cause, then resume: the record is loaded again."
        )
        error.__cause__ = exc
        self._error = error
        raise error


# -- Record mutations: functions of a proposal; each checks before it changes anything --------


def open_scope(
    proposal: Proposal,
    scope_id: str,
    *,
    graph: str,
    path: str,
    inputs: str,
    bindings: bool,
) -> None:
    """Add the scope ``scope_id`` unless it exists (R-SCOPE-1, R-SCOPE-2)."""
    if scope_id not in proposal.record.scopes:
        proposal.add_scope(
            scope_id,
            ScopeRecord(graph=graph, path=path, inputs=inputs, nodes={}, bindings=bindings),
        )


def begin_attempt(
    proposal: Proposal,
    attempt_id: str,
    *,
    parent: str,
    node_id: str,
    boundary: str = "",
    index: int = 1,
    limit: int = 1,
    if_new: bool = False,
) -> None:
    """Record a new active attempt (R-ATT-1…3).

    ``if_new``: when the attempt is in the record already, change nothing (a root attempt
    written with the first change that needs it) instead of raising.

    Raises:
        DurableError: ``attempt_id`` is taken (and ``if_new`` is False).
    """
    if attempt_id in proposal.record.attempts:
        if if_new:
            return
        raise DurableError(f"attempt id {attempt_id} is already in the record")
    proposal.add_attempt(
        attempt_id, _new_attempt(parent, node_id, boundary, index, limit, AttemptState.ACTIVE)
    )


def fail_attempt(proposal: Proposal, attempt_id: str) -> None:
    """Mark an attempt failed (R-ATT-4). Failing an already failed attempt changes nothing.

    Raises:
        DurableError: the attempt is confirmed.
    """
    state = proposal.record.attempts[attempt_id].state
    if state is AttemptState.FAILED:
        return
    if state is AttemptState.CONFIRMED:
        raise DurableError(f"attempt {attempt_id} is confirmed and cannot fail")
    proposal.attempt(attempt_id).state = AttemptState.FAILED


def confirm_node(
    proposal: Proposal,
    scope_id: str,
    *,
    node_id: str,
    attempt_id: str,
    reason: NodeReason,
    outputs: list[ValueRecord],
    tries: tuple[str, ...] = (),
) -> None:
    """Confirm a node's root attempt together with its complete NodeRecord (R-ATT-2, R-NODE-1).

    Args:
        proposal: the proposal to change.
        scope_id: the node's scope.
        node_id: the node.
        attempt_id: its active root attempt.
        reason: completed or skipped.
        outputs: one value record per provided key.
        tries: the Retry tries that led to this success (the last try of each Retry level);
            those still active are confirmed with the root (R-ATT-2: they are not confirmed on
            their own).

    Raises:
        DurableError: the attempt is not an active root attempt of the scope.
    """
    record = proposal.record
    attempt = record.attempts.get(attempt_id)
    if (
        attempt is None
        or attempt.state is not AttemptState.ACTIVE
        or attempt.boundary
        or attempt.parent != scope_id
        or attempt.node_id != node_id
        or scope_id not in record.scopes
    ):
        raise DurableError(
            f"attempt {attempt_id} of node {node_id!r} is not an active root attempt of scope "
            f"{scope_id}; it cannot be confirmed"
        )
    proposal.attempt(attempt_id).state = AttemptState.CONFIRMED
    for try_id in tries:
        stored = record.attempts.get(try_id)
        if stored is not None and stored.state is AttemptState.ACTIVE:
            proposal.attempt(try_id).state = AttemptState.CONFIRMED
    proposal.scope(scope_id).nodes[node_id] = _new_node(node_id, attempt_id, reason, list(outputs))
