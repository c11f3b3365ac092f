"""Removing and copying runs: ``durable delete``, ``durable prune`` and ``durable migrate``.

Both go through the run's exclusive session, so that a running run is never touched: its owner
holds the session, and ``acquire`` raises :class:`~durable_core.errors.BusyError` at once.

They need optional capabilities of a store (:mod:`durable_core.store.capabilities`, asked
through :func:`~durable_core.store.capabilities.capabilities`); a store without them refuses with
a :class:`~durable_core.errors.ConfigError` saying so: ``Capability.DELETE`` for delete and
prune, ``Capability.RESTORE`` (and, for the times, ``RESTORE_TIMES``, ``SAVE_TIMES``,
``CREATE_TIMES``) for migrate. The capabilities' protocols (``RunDeleter``, ``RecordRestorer``,
``CancelRequests``, ``SaveTimes``, ``CreateTimes``, ``TimesRestorer``, ``RecordPeeker``,
``RunHistory``) and the marker-file helpers are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from durable_core.errors import ConfigError, ConflictError, CorruptRecordError, NotFoundError
from durable_core.records import RunRecord

# The capabilities' protocols live in durable_core.store.capabilities; imported from here too.
from durable_core.store.capabilities import (
    CAPABILITY_SPECS,
    CancelRequests,
    Capability,
    CreateTimes,
    RecordPeeker,
    RecordRestorer,
    RunDeleter,
    RunHistory,
    SaveTimes,
    TimesRestorer,
    capabilities,
)
from durable_core.store.local import watch_marker_file, write_marker_file

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
    "write_marker_file",
]


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


def _capable(store: Any, session: Any, capability: Capability, name: str) -> None:
    """Close ``session`` and refuse when neither ``store`` nor ``session`` has ``capability``."""
    if capability not in capabilities(store) | capabilities(session):
        session.close()
        spec = CAPABILITY_SPECS[capability]
        raise ConfigError(
            f"the {name} cannot {spec.needs}: it does not declare Capability.{capability.name} "
            f"({getattr(spec.protocol, '__name__', '')}; see docs/storage.md, 'Optional "
            "capabilities')"
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
    session = store.acquire(run_id)
    _capable(store, session, Capability.DELETE, store_name)
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
        _capable(destination, dst, Capability.RESTORE, destination_name)
        with dst:
            try:
                existing = dst.load()
            except NotFoundError:
                existing = None
            if existing is not None:
                raise ConflictError(
                    f"run {run_id!r} already exists in the {destination_name} (revision "
                    f"{existing.revision}); migrate never overwrites a run: delete it there "
                    "first if it must go"
                )
            dst.restore(record)
            if Capability.RESTORE_TIMES in capabilities(destination) | capabilities(dst):
                created, saved = stored_times(source, run_id)
                if created is not None or saved is not None:
                    dst.restore_times(created, saved)
    return MigratedRun(run_id, record.revision, "copied")


def stored_times(store: Any, run_id: str) -> tuple[float | None, float | None]:
    """(created, last saved) of ``run_id`` as ``store`` knows them (seconds since the epoch),
    ``None`` for what it does not know. Never takes the run's session."""
    found = capabilities(store)
    created = store.created_at(run_id) if Capability.CREATE_TIMES in found else None
    saved = store.saved_at(run_id) if Capability.SAVE_TIMES in found else None
    return created, saved


def each(runs: Iterable[str]) -> list[str]:
    """The run ids, without repeats, in order."""
    return list(dict.fromkeys(runs))
