"""The run's committed record and its one commit path (SPEC R-RT-1, R-RT-2).

:class:`Ledger` owns a session and the last record that the store confirmed. Every change is a
*mutation*: a function applied to a copy of the committed record (the proposed record). The copy
is saved with the committed revision as the expected revision; only when the save succeeds does
the copy become the committed record (R-RT-1).

Mutations that arrive while a save is in flight are applied together to the next proposed record
and saved once (group commit): confirmations of nodes finishing together share one save, and no
caller is answered before the save that contains its change has succeeded.

Any save error stops the ledger for good (R-RT-2): the record may or may not have been written,
so nothing is retried, rolled back or overwritten from the old snapshot. Every later commit
raises the same :class:`~durable_core.errors.CheckpointError`; the next ``resume`` loads again.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable
from typing import Any, TypeVar

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
)
from durable_core.store import MAX_REVISION, Session

__all__ = [
    "Ledger",
    "begin_attempt",
    "confirm_node",
    "fail_attempt",
    "new_id",
    "open_scope",
]

T = TypeVar("T")
Mutation = Callable[[RunRecord], Any]


def new_id() -> str:
    """A fresh identity: 16 random bytes as 32 lowercase hex characters (R-REC-3)."""
    return secrets.token_hex(16)


def _copy(record: RunRecord) -> RunRecord:
    from durable_core import recordjson

    copy_record = getattr(recordjson, "copy_record", None)
    if copy_record is not None:
        return copy_record(record)
    return recordjson.record_from_json(recordjson.record_to_json(record))


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
        self._lock = threading.Lock()
        self._error: CheckpointError | None = None
        self._pending: list[tuple[Mutation, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._deferred: list[Mutation] = []
        self.saves = 0
        """Number of successful saves made through this ledger."""

    @property
    def record(self) -> RunRecord:
        """The committed record. Callers must not mutate it."""
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

        Raises:
            CheckpointError: the save failed (a ``ConflictError`` inside when a record already
                exists); the result may be uncertain and must be resolved by loading.
        """
        with self._lock:
            self._raise_if_stopped()
            proposed = _copy(record)
            proposed.format = RECORD_FORMAT
            proposed.revision = 1
            self._save(proposed, 0)

    def defer(self, mutation: Mutation) -> None:
        """Apply ``mutation`` first in the next save, without saving now.

        For changes that only matter together with a later one (a new Sub scope is saved with
        the first attempt inside it), so that they cost no save of their own.
        """
        with self._lock:
            self._deferred.append(mutation)

    def commit(self, *mutations: Mutation) -> list[Any]:
        """Apply deferred mutations, then ``mutations`` in order, to a copy of the record, and
        save it once. Format-1 records are written back as format 2 (R-REC-1).

        Returns:
            The mutations' return values, in order.

        Raises:
            CheckpointError: this save or an earlier one failed; the ledger is stopped.
        """
        with self._lock:
            self._raise_if_stopped()
            proposed = _copy(self.record)
            proposed.format = RECORD_FORMAT
            for mutation in self._deferred:
                mutation(proposed)
            results = [mutation(proposed) for mutation in mutations]
            self._save(proposed, self.record.revision)
            self._deferred.clear()
            return results

    async def commit_async(self, mutation: Mutation) -> Any:
        """Commit ``mutation`` from the event loop, sharing a save with concurrent commits.

        Returns when the save containing the mutation has succeeded, with the mutation's result.

        Raises:
            CheckpointError: the save failed, or the ledger was already stopped.
        """
        self._raise_if_stopped()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((mutation, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            mutations = [m for m, _ in batch]
            try:
                results = await asyncio.to_thread(self.commit, *mutations)
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                for _, future in self._pending:
                    if not future.done():
                        future.set_exception(exc)
                self._pending = []
                if not isinstance(exc, Exception):
                    raise
                return
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def _raise_if_stopped(self) -> None:
        if self._error is not None:
            raise self._error

    def _save(self, proposed: RunRecord, expected: int) -> None:
        if expected >= MAX_REVISION:
            self._stop(
                ConflictError(f"revision {expected} cannot grow: it is the uint64 maximum"),
                proposed,
            )
        proposed.revision = expected + 1
        try:
            self._session.save(proposed, expected)
        except Exception as exc:
            self._stop(exc, proposed)
        self._record = proposed
        self.saves += 1

    def _stop(self, exc: BaseException, proposed: RunRecord) -> None:
        what = "the first record" if proposed.revision <= 1 else f"revision {proposed.revision}"
        hint = (
            " A record for this run already exists: use resume."
            if isinstance(exc, ConflictError) and proposed.revision <= 1
            else ""
        )
        error = CheckpointError(
            f"saving {what} of run {proposed.run_id!r} failed ({type(exc).__name__}: {exc}); "
            f"the run stopped and the save may or may not have been written.{hint} "
            "Fix the cause, then resume: the record is loaded again (R-RT-2)."
        )
        error.__cause__ = exc
        self._error = error
        raise error


# -- Record mutations: pure functions on a proposed record -----------------------------------


def open_scope(
    record: RunRecord, scope_id: str, *, graph: str, path: str, inputs: str, bindings: bool
) -> None:
    """Add the scope ``scope_id`` unless it exists (R-SCOPE-1, R-SCOPE-2)."""
    if scope_id not in record.scopes:
        record.scopes[scope_id] = ScopeRecord(
            graph=graph, path=path, inputs=inputs, nodes={}, bindings=bindings
        )


def begin_attempt(
    record: RunRecord,
    attempt_id: str,
    *,
    parent: str,
    node_id: str,
    boundary: str = "",
    index: int = 1,
    limit: int = 1,
) -> None:
    """Record a new active attempt (R-ATT-1…3)."""
    record.attempts[attempt_id] = AttemptRecord(
        parent=parent,
        node_id=node_id,
        boundary=boundary,
        index=index,
        limit=limit,
        state=AttemptState.ACTIVE,
    )


def fail_attempt(record: RunRecord, attempt_id: str) -> None:
    """Mark an attempt failed (R-ATT-4). Failing an already failed attempt changes nothing."""
    attempt = record.attempts[attempt_id]
    if attempt.state is AttemptState.CONFIRMED:
        raise DurableError(f"attempt {attempt_id} is confirmed and cannot fail")
    attempt.state = AttemptState.FAILED


def confirm_node(
    record: RunRecord,
    scope_id: str,
    *,
    node_id: str,
    attempt_id: str,
    reason: NodeReason,
    outputs: list[ValueRecord],
) -> None:
    """Confirm a node's root attempt together with its complete NodeRecord (R-ATT-2, R-NODE-1)."""
    attempt = record.attempts[attempt_id]
    if attempt.state is not AttemptState.ACTIVE or attempt.boundary or attempt.parent != scope_id:
        raise DurableError(
            f"attempt {attempt_id} of node {node_id!r} is not an active root attempt of scope "
            f"{scope_id}; it cannot be confirmed"
        )
    attempt.state = AttemptState.CONFIRMED
    record.scopes[scope_id].nodes[node_id] = NodeRecord(
        node_id=node_id, attempt=attempt_id, reason=reason, outputs=list(outputs)
    )
