"""Removing and copying runs: ``durable delete``, ``durable prune`` and ``durable migrate``.

Both go through the run's exclusive session, so that a running run is never touched: its owner
holds the session, and ``acquire`` raises :class:`~durable_core.errors.BusyError` at once.

They need two optional capabilities of a store's sessions (a store without them refuses with a
:class:`~durable_core.errors.ConfigError` saying so; ``durable list`` needs a third,
:class:`~durable_core.store.RunLister`):

- :class:`RunDeleter`: ``session.delete()`` removes the run's record and the run's own lock
  entry while the session still holds the lock, then closes the session;
- :class:`RecordRestorer`: ``session.restore(record)`` writes a run's first record at the
  record's own revision (a migrated run keeps its revisions).

``durable cancel`` needs :class:`CancelRequests`: a way to ask a run's owner, in another process
(with a store shared between hosts, such as PostgreSQL, on another host), to stop; the owner
watches for it while it runs.

``durable prune --older-than`` also needs :class:`SaveTimes` on the store: when each run was
last saved; ``durable list``/``inspect`` show it, and :class:`CreateTimes` (when the run's first
record was written) where the store knows it. ``durable migrate`` carries both to a destination
whose sessions implement :class:`TimesRestorer`. ``durable inspect --peek`` needs
:class:`RecordPeeker`: the last committed record, read without taking the run's session.

:class:`RunHistory` keeps a run's history (its recovery events, with times and failed tries'
errors) in the store beside its record, so that every host sharing the store sees the same
history and a run's history is never another run's (see :mod:`durable_core.history`). A store
without it has its runs' histories kept in local files keyed by the store and the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from durable_core.errors import ConfigError, NotFoundError
from durable_core.records import RunRecord

__all__ = [
    "CancelRequests",
    "CreateTimes",
    "MigratedRun",
    "RecordPeeker",
    "RecordRestorer",
    "RunDeleter",
    "RunHistory",
    "SaveTimes",
    "TimesRestorer",
    "delete_run",
    "migrate_run",
    "parse_age",
    "stored_times",
    "watch_marker_file",
]


@runtime_checkable
class RunDeleter(Protocol):
    """A session that can remove its run (optional capability of a store's sessions)."""

    def delete(self) -> None:
        """Remove the run's record, and the run's own lock entry, while holding the session;
        then close the session.

        Raises:
            NotFoundError: the run has no record (nothing removed).
            SessionClosedError: the session was closed.
            DurableError / OSError: the medium failed; the message says what is left.
        """
        ...


@runtime_checkable
class RecordRestorer(Protocol):
    """A session that can write a copied record at its own revision (optional capability)."""

    def restore(self, record: RunRecord) -> None:
        """Write ``record`` as the run's first record, keeping ``record.revision``.

        Raises:
            ConflictError: the run already has a record (nothing written).
            CorruptRecordError: ``record`` is not a valid record of this run.
            SessionClosedError: the session was closed.
        """
        ...


@runtime_checkable
class RecordPeeker(Protocol):
    """A store that can read a run's last committed record without owning the run (optional
    capability): the file store reads the atomically replaced file, SQL stores a plain SELECT.
    It never writes and never locks; a running run's owner may save a newer revision at once."""

    def peek(self, run_id: str) -> RunRecord:
        """The last committed record of ``run_id``.

        Raises:
            NotFoundError: no record.
            CorruptRecordError: the stored bytes are not a record of this run.
        """
        ...


@runtime_checkable
class CancelRequests(Protocol):
    """A store through which a run's owner can be asked to stop (optional capability).

    The request is not part of the record (nobody but the owner writes the record): the file
    and SQLite stores leave a marker file beside the run's lock file, the PostgreSQL store sends
    a notification that the owner listens for, from any host.
    """

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop cleanly. Does not wait."""
        ...

    def watch_cancel(self, run_id: str, on_request: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_request`` (from another thread) when a stop of ``run_id`` is asked for,
        until the returned function is called. A request left from before is dropped first."""
        ...


def watch_marker_file(path: str, on_request: Callable[[], None]) -> Callable[[], None]:
    """Poll for ``path`` every 0.2 s in a daemon thread; when it appears, remove it and call
    ``on_request``. Returns the function that stops the watching (and waits for the thread).

    A marker already there is removed first: it was left by a request for an earlier run."""
    import contextlib
    import os
    import threading

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            if os.path.exists(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                on_request()

    thread = threading.Thread(target=poll, name="durable-cancel-watch", daemon=True)
    thread.start()

    def stop_watching() -> None:
        stop.set()
        thread.join()

    return stop_watching


def write_marker_file(path: str) -> None:
    """Create ``path`` (0600) as a cancel request; it is fine if it is already there."""
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)


@runtime_checkable
class SaveTimes(Protocol):
    """A store that knows when each run was last saved (optional capability)."""

    def saved_at(self, run_id: str) -> float | None:
        """When ``run_id``'s record was last written (seconds since the epoch), or ``None``
        when it has no record or the time is not known. Never takes the run's session."""
        ...


@runtime_checkable
class CreateTimes(Protocol):
    """A store that knows when each run's first record was written (optional capability)."""

    def created_at(self, run_id: str) -> float | None:
        """When ``run_id``'s first record was written (seconds since the epoch), or ``None``
        when it has no record or the time is not known (a run saved before the store kept
        it). Never takes the run's session."""
        ...


@runtime_checkable
class TimesRestorer(Protocol):
    """A session that can set its run's stored times (optional capability), so that a
    migrated run keeps when it was created and last saved."""

    def restore_times(self, created_at: float | None, saved_at: float | None) -> None:
        """Set when the run was created and last saved (seconds since the epoch), as the
        source store knew them; ``None`` means unknown there. Called right after
        ``restore``, in the same session.

        Raises:
            NotFoundError: the run has no record.
            SessionClosedError: the session was closed.
        """
        ...


@runtime_checkable
class RunHistory(Protocol):
    """A store that keeps each run's history beside its record (optional capability, X-HIST).

    A history is an ordered list of entries, each one JSON object's text on one line (no
    ``"\\n"``, valid Unicode), appended by a background writer (never on the save path, never
    under the run's session) and read back in the order appended. It is keyed by the run id
    **and** the run's root scope (``RunRecord.root_scope``, random per run): a run deleted and
    started again under the same id, or a fork, has a history of its own. Deleting a run
    (:class:`RunDeleter`) removes its history with it. Appending never changes the record, its
    revision or its stored bytes. Appenders in several processes (or hosts) may append to one
    run's history at once: each call's entries stay whole and in order (they may interleave
    with another call's as whole entries).
    """

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append ``entries`` to the history of ``run_id``'s run ``root_scope``.

        Raises:
            ValueError: an entry holds a line break, or ``root_scope`` is empty or holds a
                tab or a line break (nothing appended).
            DurableError / OSError: the medium failed; some entries may be missing.
        """
        ...

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The entries of ``run_id``'s run ``root_scope``, oldest first (empty when none).

        An entry torn by a crash while it was appended is left out. Never takes the run's
        session.
        """
        ...


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str, option: str = "--older-than") -> float:
    """``"7d"`` → seconds. Units: ``s``, ``m``, ``h``, ``d``, ``w``. ``option`` names the
    command-line option in the error.

    Raises:
        ConfigError: not a positive number followed by one of the units.
    """
    number, unit = text[:-1], text[-1:]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value > 0:
        raise ConfigError(
            f"{option} {text!r}: expected a positive number and a unit (s, m, h, d, w), "
            "for example 7d or 12h"
        )
    return value * _UNITS[unit]


def _capable(session: Any, capability: type, what: str, store: str) -> None:
    if not isinstance(session, capability):
        session.close()
        raise ConfigError(
            f"the {store} cannot {what}: its sessions do not implement "
            f"{capability.__name__} (see docs/storage.md, 'Optional capabilities')"
        )


def delete_run(store: Any, run_id: str, *, store_name: str = "store") -> RunRecord:
    """Remove ``run_id`` from ``store`` through an exclusive session.

    The record is loaded first (so that a run without a record is reported, and the caller can
    say what was removed); a corrupt record is removed too (it can only be deleted, never
    repaired).

    Returns:
        The removed record, or ``None`` in place of a record that could not be decoded.

    Raises:
        BusyError: another session owns the run (a running run): nothing removed.
        NotFoundError: no record.
        ConfigError: the store's sessions cannot delete.
    """
    from durable_core.errors import CorruptRecordError

    session = store.acquire(run_id)
    _capable(session, RunDeleter, "delete runs", store_name)
    with session:
        try:
            record = session.load()
        except CorruptRecordError:
            record = None
        session.delete()
    return record  # type: ignore[return-value]


@attrs.frozen
class MigratedRun:
    """One run's outcome in :func:`migrate_run`: ``copied`` or why not."""

    run_id: str
    revision: int
    outcome: str
    error: str | None = None


def migrate_run(
    source: Any,
    destination: Any,
    run_id: str,
    *,
    check: Callable[[RunRecord], None] | None = None,
    destination_name: str = "destination",
) -> MigratedRun:
    """Copy one run from ``source`` to ``destination``, under sessions on both sides.

    The source record is loaded through an exclusive session (so a running run is ``BusyError``),
    checked (``check``, e.g. :func:`~durable_core.runinfo.check_record`), and written at the
    destination at the same revision, only when the destination has no record of the run.
    When the source knows when the run was created and last saved (:class:`CreateTimes`,
    :class:`SaveTimes`) and the destination's session can keep them (:class:`TimesRestorer`),
    those times travel with the record; otherwise the destination's times are those of the
    copy.

    Raises:
        BusyError: the run is owned on either side.
        NotFoundError: the source has no record of the run.
        ConflictError: the destination already has a record of the run (nothing written).
        CorruptRecordError: the source record fails ``check``.
        ConfigError: the destination's sessions cannot restore records.
    """
    with source.acquire(run_id) as src:
        record = src.load()
        if check is not None:
            check(record)
        dst = destination.acquire(run_id)
        _capable(dst, RecordRestorer, "receive migrated runs", destination_name)
        with dst:
            try:
                existing = dst.load()
            except NotFoundError:
                existing = None
            if existing is not None:
                from durable_core.errors import ConflictError

                raise ConflictError(
                    f"run {run_id!r} already exists in the {destination_name} (revision "
                    f"{existing.revision}); migrate never overwrites a run: delete it there "
                    "first if it must go"
                )
            dst.restore(record)
            if isinstance(dst, TimesRestorer):
                created, saved = stored_times(source, run_id)
                if created is not None or saved is not None:
                    dst.restore_times(created, saved)
    return MigratedRun(run_id, record.revision, "copied")


def stored_times(store: Any, run_id: str) -> tuple[float | None, float | None]:
    """(created, last saved) of ``run_id`` as ``store`` knows them (seconds since the epoch),
    ``None`` for what it does not know. Never takes the run's session."""
    created = store.created_at(run_id) if isinstance(store, CreateTimes) else None
    saved = store.saved_at(run_id) if isinstance(store, SaveTimes) else None
    return created, saved


def each(runs: Iterable[str]) -> list[str]:
    """The run ids, without repeats, in order."""
    return list(dict.fromkeys(runs))
