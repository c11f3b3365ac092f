"""The store kit: the lifecycle every store shares, so that a backend writes only its medium.

:class:`BaseStore` and :class:`BaseSession` own what is the same in every store (SPEC R-STORE-1…4):

- open and closed state; ``close`` idempotent; ``load``/``save`` after ``close`` raise
  :class:`~durable_core.errors.SessionClosedError`; both are context managers;
- the store's live sessions: a second ``acquire`` of a run owned (or being acquired) through the
  same store object raises :class:`~durable_core.errors.BusyError` at once, before the medium is
  asked; ``Store.close`` closes every session, waiting for a load or save in flight;
- the template ``save``: check the record and revisions → read the stored revision → refuse to
  overwrite a stored record that is corrupt or unreadable (the stored bytes stay untouched) →
  write by compare-and-swap.

A backend subclasses both and implements only its medium:

===============================  ==============================================================
``BaseStore._open_session``       lock the run (without waiting) and return its session
``BaseSession._read``             the stored bytes (and the revision kept beside them), or None
``BaseSession._write``            write the record if the stored revision is still the expected
``BaseSession._release``          unlock the run, give back connections
===============================  ==============================================================

Optional hooks: ``BaseSession._stored_revision`` (a cheaper read of the revision alone, for the
conflict message), ``BaseSession._abort`` (break an operation stuck past ``Store.close``'s
deadline), ``BaseStore._closing`` / ``BaseStore._close_medium`` / ``BaseStore._close_deadline``.

A session knows the stored record is good once it has loaded or saved it itself (it owns the run
exclusively), so a save after a load or a save reads nothing before writing; only a save without
that knowledge (e.g. the first one after ``acquire``) decodes the stored bytes first.

Only a session that wrote the run may tidy it when it closes (a store that keeps deltas folds
them then: see :attr:`BaseSession._wrote`). A session that only looked — ``durable inspect``, a
``resume`` refused before its first save — leaves every stored byte, and the time of the last
save, as it found them (R-STORE-4, E-2).
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import attrs

from durable_core.errors import (
    BusyError,
    ConflictError,
    CorruptRecordError,
    DurableError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.records import RunRecord
from durable_core.records.delta import Folded, read_delta
from durable_core.records.jsonio import record_to_json
from durable_core.store.capabilities import Capability
from durable_core.store.checks import (
    decode_stored,
    validate_run_id,
    validate_save,
    validate_timeout,
)
from durable_core.store.deltas import FOLD_RATIO, fold_due
from durable_core.store.owner import current_owner
from durable_core.store.protocol import EncodedRecord

__all__ = ["Acquiring", "BaseSession", "BaseStore", "FoldingSession"]

logger = logging.getLogger("durable_core.store")


class Acquiring:
    """A run id being acquired: holds its place in the store while the medium is asked.

    Attributes:
        cancel: set by a backend while it waits on something that ``Store.close`` should break
            (e.g. cutting a network connection); ``None`` otherwise.
    """

    __slots__ = ("cancel",)

    def __init__(self) -> None:
        self.cancel: Any = None


class BaseStore(abc.ABC):
    """The shared half of a store: the live sessions, ``acquire``'s bookkeeping, ``close``.

    Subclasses call ``super().__init__()`` first and implement :meth:`_open_session` (a
    subclass that does not cannot be instantiated). Thread-safe: any thread may acquire and
    close.
    """

    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.RESTORE})
    """What the store and its sessions can do beyond the contract
    (:mod:`durable_core.store.capabilities`); every kit session restores copied records."""

    def __init__(self) -> None:
        self._state_lock = threading.Lock()
        self._runs: dict[str, BaseSession | Acquiring] = {}
        self._closed = False

    # -- the public half of the Store protocol ---------------------------------------------

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        """Take exclusive ownership of ``run_id`` and return its session (R-STORE-1).

        Args:
            run_id: the run's id (a non-empty string of valid Unicode).
            timeout: seconds to wait at most for capacity, network checks or initialisation
                (``None``: the backend's default); never used to wait for another owner.

        Returns:
            The run's session.

        Raises:
            BusyError: the run is owned or being acquired through this store object (at once,
                before the medium is asked; ``owner`` is this process), or by another store or
                process (as the backend finds it: at once; ``owner`` as the backend knows it).
            SessionClosedError: the store was closed, before or during the call.
            CorruptRecordError: ``run_id`` is not a valid run id.
            ValueError: ``timeout`` is negative or not a number.
            DurableError / OSError: the medium failed; see the backend.
        """
        validate_run_id(run_id)
        wait = validate_timeout(timeout)
        pending = Acquiring()
        with self._state_lock:
            if self._closed:
                raise self._store_closed()
            holder = self._runs.get(run_id)
            if holder is not None:
                state = "being acquired" if isinstance(holder, Acquiring) else "owned"
                owner = current_owner(getattr(holder, "_acquired_at", None))
                since = ""
                if isinstance(holder, Acquiring):
                    owner = attrs.evolve(owner, since=None)
                elif owner.since is not None:
                    since = f" since {owner.since:%Y-%m-%d %H:%M:%S} UTC"
                raise BusyError(
                    f"run {run_id!r} is already {state} by another session of this "
                    f"{type(self).__name__} in this process (pid {owner.pid}){since}; Durable "
                    "never waits for an owner. Close that session first, or let the code that "
                    "runs it finish",
                    owner=owner,
                )
            self._runs[run_id] = pending
        try:
            session = self._open_session(run_id, wait, pending)
        except BaseException:
            self._drop(run_id, pending)
            raise
        with self._state_lock:
            if not self._closed and self._runs.get(run_id) is pending:
                self._runs[run_id] = session
                return session
        session.close()
        self._drop(run_id, pending)
        raise SessionClosedError(
            f"acquiring run {run_id!r}: this {type(self).__name__} was closed meanwhile; "
            "create a new store"
        )

    def close(self) -> None:
        """Close every open session (waiting for a load or save in flight), then the store.

        Later ``acquire`` calls raise :class:`~durable_core.errors.SessionClosedError`; stored
        records are kept. Idempotent.
        """
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            holders = list(self._runs.values())
        self._closing()
        for holder in holders:
            if isinstance(holder, Acquiring) and holder.cancel is not None:
                holder.cancel()
        deadline = self._close_deadline()
        for holder in holders:
            if isinstance(holder, BaseSession):
                holder._close(deadline)
        self._close_medium(deadline)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- for backends ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _check_open(self) -> None:
        """Raise :class:`SessionClosedError` when the store was closed."""
        if self._closed:
            raise self._store_closed()

    def _store_closed(self) -> SessionClosedError:
        return SessionClosedError(f"this {type(self).__name__} was closed; create a new store")

    def _forget(self, session: BaseSession) -> None:
        """Remove a closed (or lost) session from the live ones."""
        self._drop(session.run_id, session)

    def _drop(self, run_id: str, holder: object) -> None:
        with self._state_lock:
            if self._runs.get(run_id) is holder:
                del self._runs[run_id]

    # -- hooks -------------------------------------------------------------------------------

    @abc.abstractmethod
    def _open_session(self, run_id: str, timeout: float | None, pending: Acquiring) -> Any:
        """Lock ``run_id`` in the medium without waiting for an owner; return its session.

        Called outside the store's lock, with ``run_id`` reserved for this call. On failure
        the backend releases what it took and raises (``BusyError`` when another store or
        process owns the run).
        """

    def _closing(self) -> None:
        """Called by :meth:`close` after the store is marked closed, before its sessions close."""
        return None  # optional hook: nothing by default

    def _close_deadline(self) -> float | None:
        """The ``time.monotonic()`` by which closing sessions must be done; ``None``: wait."""
        return None

    def _close_medium(self, deadline: float | None) -> None:
        """Called by :meth:`close` last, after every session was closed."""
        return None  # optional hook: nothing by default


class BaseSession(abc.ABC):
    """The shared half of a session: closed state, the mutex, the template ``load``/``save``.

    One call at a time per session (a mutex serializes them); any thread may call. A subclass
    implements the abstract hooks :meth:`_read`, :meth:`_write` and :meth:`_release`; one that
    misses any cannot be instantiated.

    Args:
        store: the store that made it (its live sessions are updated on close).
        run_id: the run it owns.
        location: where the record is kept, for messages (a file path, a database row).
    """

    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.ENCODED_SAVES})
    """How the runtime may call ``save`` (:mod:`durable_core.store.capabilities`): every kit
    session takes the caller's encoding."""

    def __init__(self, store: BaseStore, run_id: str, location: str) -> None:
        self._store = store
        self._run_id = run_id
        self._location = location
        self._mutex = threading.Lock()
        self._closed = False
        self._acquired_at = time.time()  # names the owner in a BusyError of this store
        # The revision this session last loaded or saved: the stored record is known good.
        self._verified = 0
        # What this session's last save wrote (its revision is ``_verified``), or None: a store
        # that folds deltas on close writes these complete bytes (see :meth:`_saved_bytes`).
        self._saved: EncodedRecord | None = None
        # True once a save (or restore) of this session wrote the run: only then may closing
        # the session write anything (fold deltas). A session that only loaded, or whose saves
        # were all refused, changes no stored byte and no save time.
        self._wrote = False

    @property
    def run_id(self) -> str:
        """The run id this session owns."""
        return self._run_id

    def load(self) -> RunRecord:
        """Read and return the stored record (a fresh copy on every call; R-STORE-2).

        Raises:
            NotFoundError: there is no record for the run (and only then).
            CorruptRecordError: the stored bytes are not a valid record of this run; they are
                left untouched.
            SessionClosedError: the session was closed.
            DurableError / OSError: any other read failure (see the backend).
        """
        with self._mutex:
            self._check_open()
            stored = self._read()
            if stored is None:
                raise self._not_found()
            data, column = stored
            record = decode_stored(self._run_id, data, self._location, column)
            self._decoded(record.revision)
            self._verified = record.revision
            self._saved = None
            return record

    def save(
        self, record: RunRecord, expected_revision: int, encoded: EncodedRecord | None = None
    ) -> None:
        """Replace the record if the stored revision is ``expected_revision`` (R-STORE-3).

        Args:
            record: the new record; its revision is ``expected_revision + 1`` and its run id is
                the session's.
            expected_revision: the revision the caller believes is stored (0: none yet).
            encoded: the caller's encoding of exactly ``record``; when given its bytes are
                written instead of encoding the record again.

        Raises:
            ConflictError: the stored revision is not ``expected_revision``, the record's
                revision or run id is wrong, or the revision would pass 2⁶⁴-1; nothing written.
            CorruptRecordError: the record cannot be encoded (e.g. invalid UTF-8 metadata), or
                the stored record is corrupt or unreadable: it is never overwritten, its bytes
                stay as they are.
            SessionClosedError: the session was closed.
            TypeError: ``encoded`` is not an :class:`~durable_core.store.EncodedRecord`.
            DurableError / OSError: the write failed; the backend's message says whether the
                stored record is known unchanged or the save is uncertain (load again).
        """
        with self._mutex:
            self._check_open()
            validate_save(self._run_id, record, expected_revision)
            if encoded is None:
                # Encoded before storage is touched: a record that cannot be encoded is refused.
                encoded = EncodedRecord(record_to_json(record))
            elif not isinstance(encoded, EncodedRecord):
                raise TypeError(
                    f"encoded must be an EncodedRecord or None, found {type(encoded).__name__}"
                )
            if not (expected_revision and expected_revision == self._verified):
                current = self._checked_revision()
                if current != expected_revision:
                    raise self._conflict(current, expected_revision)
            self._saved = None
            if not self._write(record, expected_revision, encoded):
                raise self._conflict(self._stored_revision(), expected_revision)
            self._wrote = True
            self._verified = record.revision
            self._saved = encoded

    def restore(self, record: RunRecord) -> None:
        """Write a copied record as the run's first record, keeping its revision
        (``RecordRestorer``, for ``durable migrate``).

        Raises:
            ConflictError: the run already has a record, or ``record`` names another run or
                has no valid revision; nothing written.
            CorruptRecordError: the record cannot be encoded, or a stored record is corrupt.
            SessionClosedError: the session was closed.
        """
        with self._mutex:
            self._check_open()
            if not isinstance(record, RunRecord):
                raise TypeError(f"restore expects a RunRecord, found {type(record).__name__}")
            validate_save(self._run_id, record, record.revision - 1)
            self._saved = None
            if self._checked_revision() != 0 or not self._write(
                record, 0, EncodedRecord(record_to_json(record))
            ):
                raise ConflictError(
                    f"run {self._run_id!r} already has a record at {self._location}; a copied "
                    "run never overwrites one"
                )
            self._wrote = True
            self._verified = record.revision

    def close(self) -> None:
        """Release ownership of the run. Idempotent (R-STORE-4).

        Waits for a load or save running in another thread.
        """
        self._close(None)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} of run {self._run_id!r} at {self._location} ({state})>"

    # -- for backends ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                f"the session of run {self._run_id!r} is closed; acquire the run again"
            )

    def _checked_revision(self) -> int:
        """The stored revision (0: none), after decoding the stored record in full.

        Raises:
            CorruptRecordError: the stored record is not a valid record of this run.
        """
        stored = self._read()
        if stored is None:
            return 0
        data, column = stored
        revision = decode_stored(self._run_id, data, self._location, column).revision
        self._decoded(revision)
        return revision

    def _conflict(self, current: int, expected_revision: int) -> ConflictError:
        found = "no record" if current == 0 else f"revision {current}"
        return ConflictError(
            f"run {self._run_id!r}: expected stored revision {expected_revision}, found "
            f"{found}; the stored record is unchanged. Load the record again before deciding "
            "anything"
        )

    def _not_found(self) -> BaseException:
        """The error ``load`` raises when the medium holds no record for the run."""
        return NotFoundError(
            f"no record of run {self._run_id!r} at {self._location}; check the store and the "
            "run id. A missing record never means the run finished"
        )

    def _close(self, deadline: float | None) -> None:
        if deadline is None:
            self._mutex.acquire()
        elif not self._mutex.acquire(timeout=max(0.0, deadline - time.monotonic())):
            # An operation is stuck past the store's deadline: break it; it drops the run.
            self._abort()
            return
        try:
            if self._closed:
                return
            self._closed = True
            try:
                self._release(deadline)
            finally:
                self._saved = None  # the caller's encoder goes with the session
        finally:
            self._mutex.release()
            if self._closed:
                self._store._forget(self)

    # -- hooks (called with the session's mutex held) ----------------------------------------

    @abc.abstractmethod
    def _read(self) -> tuple[bytes | Folded, int | None] | None:
        """The stored record's bytes and the revision kept beside them (``None`` when the
        medium keeps none), or ``None`` when no record is stored. A medium that keeps deltas
        after a complete record may answer a :class:`~durable_core.records.delta.Folded` of
        them instead of the folded bytes: ``decode_stored`` reads it without writing the
        folded record as text first.

        Raises:
            CorruptRecordError: what is stored cannot be read as bytes of a record.
            DurableError / OSError: the medium failed (never reported as "no record").
        """

    @abc.abstractmethod
    def _write(self, record: RunRecord, expected_revision: int, encoded: EncodedRecord) -> bool:
        """Write ``record`` by compare-and-swap: ``encoded.data`` is its complete bytes (made on
        first access), ``encoded.delta`` maybe the change (see :meth:`_delta_of`).

        Returns:
            ``False`` (and nothing written) when the stored revision is not
            ``expected_revision``; ``True`` when written.

        Raises:
            CorruptRecordError: the stored record turned out corrupt; nothing written.
            DurableError / OSError: the write failed (say whether it is uncertain).
        """

    @staticmethod
    def _delta_of(encoded: EncodedRecord, expected_revision: int) -> bytes | None:
        """``encoded.delta`` when it is a delta from ``expected_revision`` to the next
        revision, else ``None`` (then write the complete record).

        Only the delta's revisions are checked here, and cheaply: a canonical delta starts
        with ``{"Base":<expected>,"Revision":<expected + 1>,"Set":[`` (its keys are sorted), so
        that prefix decides without parsing the change; bytes that are not canonical are read
        with :func:`durable_core.records.delta.read_delta`. The change itself is the caller's,
        like ``encoded.data``; a store that keeps deltas applies them with
        :func:`durable_core.records.delta.apply_delta` when it reads.
        """
        delta = encoded.delta
        if delta is None or expected_revision == 0:
            return None
        if delta.startswith(
            b'{"Base":%d,"Revision":%d,"Set":[' % (expected_revision, expected_revision + 1)
        ) and delta.endswith(b"]}"):
            return delta
        try:
            parsed = read_delta(delta)
        except CorruptRecordError:
            return None
        if parsed.base != expected_revision or parsed.revision != expected_revision + 1:
            return None
        return delta

    def _saved_bytes(self, revision: int) -> bytes | None:
        """The complete bytes this session's last save wrote, when that save wrote
        ``revision``; ``None`` when this session did not save it or the bytes can no longer be
        had (the caller's :class:`~durable_core.store.EncodedRecord` computes them on demand,
        and its encoder may have moved on).

        For a store that keeps deltas: folding them on close can write these bytes, equal to
        the deltas applied to the stored record (the save wrote exactly that change), without
        parsing the stored record. Called with the session's mutex held.
        """
        saved = self._saved
        if saved is None or revision != self._verified:
            return None
        try:
            return saved.data
        except Exception:  # gone or unreadable: the store folds what is stored instead
            return None

    def _decoded(self, revision: int) -> None:
        """Called when the bytes just returned by ``_read`` decoded as a good record."""
        return None  # optional hook: nothing by default

    def _stored_revision(self) -> int:
        """The stored revision (0: none), for a conflict's message; may raise like ``_read``."""
        return self._checked_revision()

    @abc.abstractmethod
    def _release(self, deadline: float | None) -> None:
        """Unlock the run and give back what the session holds (called once).

        Writes nothing unless :attr:`_wrote`: a session that did not save leaves the stored
        bytes and the save time untouched when it closes.
        """

    def _abort(self) -> None:
        """Break an operation stuck past ``Store.close``'s deadline (default: nothing)."""
        return None  # optional hook: nothing by default


class FoldingSession(BaseSession):
    """A session of a store that keeps deltas: the fold policy and the fold-on-close template.

    A save keeps its delta (:meth:`_delta_to_keep`, the policy of
    :mod:`durable_core.store.deltas`) while the deltas stay small beside the complete record;
    closing a session that wrote folds them (:meth:`_fold_on_close`), so that at rest a run is
    one complete record (R-STORE-3, R-STORE-4). The template decides when and what to fold; a
    backend implements only how its medium holds deltas:

    =================================  ========================================================
    ``_has_deltas``                     whether deltas are stored after the complete record
    ``_write_folded(data, head)``       write ``data`` as the complete record at ``head``
    ``_let_go(deadline)``               unlock the run, give back connections
    =================================  ========================================================

    Optional: ``_folding`` (a transaction around the fold), ``_may_fold`` (false when the
    medium is gone), ``_stored_for_fold`` (the stored record with its deltas applied),
    ``fold_ratio``, ``fold_errors``.
    """

    fold_ratio: ClassVar[float] = FOLD_RATIO
    """The share of the complete record's size the kept deltas may reach (bytes/bytes)."""

    fold_errors: ClassVar[tuple[type[BaseException], ...]] = (DurableError, OSError)
    """What a failed fold on close may raise: logged, and the deltas kept (nothing is lost)."""

    def _delta_to_keep(
        self,
        encoded: EncodedRecord,
        expected_revision: int,
        record_size: int | None,
        kept: int,
        framing: int = 0,
    ) -> bytes | None:
        """The delta this save keeps, or ``None``: write the complete record.

        Args:
            encoded: the save's encoding.
            expected_revision: the revision the save replaces.
            record_size: bytes of the stored complete record as this session knows it;
                ``None`` when it does not know what is stored (then never a delta).
            kept: bytes of the deltas stored after that record (with their framing).
            framing: bytes the medium adds to each delta it keeps.
        """
        delta = self._delta_of(encoded, expected_revision)
        if delta is None or record_size is None:
            return None
        if fold_due(kept, record_size, len(delta) + framing, self.fold_ratio):
            return None  # the deltas outgrew the complete record: this save folds them
        return delta

    def _release(self, deadline: float | None) -> None:
        """Fold the deltas when this session wrote (a failure is logged, nothing lost), then
        let the run go."""
        try:
            if self._may_fold():
                try:
                    self._fold_on_close()
                except self.fold_errors as exc:
                    # The deltas stay; the next session reads them (and folds them once it saves).
                    logger.warning(
                        "folding the saved deltas of run %r (%s) on close failed (%s: %s); "
                        "they are kept and read as they are",
                        self._run_id,
                        self._location,
                        type(exc).__name__,
                        exc,
                    )
        finally:
            self._let_go(deadline)

    def _fold_on_close(self) -> None:
        """Fold the stored deltas into the complete record; only when this session wrote (a look
        leaves every byte, and the save time, as it found them; E-2)."""
        if not self._wrote or not self._has_deltas():
            return
        with self._folding():
            # The usual case: this session wrote the deltas, and its last save's complete bytes
            # are what they fold into. Writing them costs one copy of the record, where folding
            # what is stored parses it into a tree and decodes the result once more.
            head = self._verified
            data = self._saved_bytes(head)
            if data is not None and self._write_folded(data, head):
                return
            del data
            stored = self._stored_for_fold()
            if stored is None:
                return
            data, column = stored
            revision = decode_stored(self._run_id, data, self._location, column).revision
            self._write_folded(data.data() if isinstance(data, Folded) else data, revision)

    # -- hooks (called with the session's mutex held) ----------------------------------------

    @abc.abstractmethod
    def _has_deltas(self) -> bool:
        """Whether deltas are stored after the run's complete record (as this session knows)."""

    @abc.abstractmethod
    def _write_folded(self, data: bytes, head: int) -> bool:
        """Write ``data`` as the complete record at revision ``head`` and drop the deltas; only
        while ``head`` is the stored head (else ``False``, nothing written). Not a save."""

    @abc.abstractmethod
    def _let_go(self, deadline: float | None) -> None:
        """Unlock the run and give back what the session holds (called once, after the fold)."""

    def _may_fold(self) -> bool:
        """Whether the medium can still be written (default: yes)."""
        return True

    @contextlib.contextmanager
    def _folding(self) -> Iterator[None]:
        """Around the whole fold: a transaction of the medium (default: nothing)."""
        yield

    def _stored_for_fold(self) -> tuple[bytes | Folded, int | None] | None:
        """The stored record with its deltas applied (or to apply: a ``Folded``) and the
        revision kept beside it, or
        ``None`` (default: :meth:`_read`)."""
        return self._read()
