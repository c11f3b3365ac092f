"""The checks every store shares, so that all backends refuse the same inputs the same way.

- :func:`validate_run_id`, :func:`validate_timeout`: the arguments of ``Store.acquire``;
- :func:`validate_save`: what ``Session.save`` checks before touching storage;
- :func:`decode_stored`, :func:`validate_loaded`: what a record read back must be;
- :func:`summary_of`: one :class:`~durable_core.store.RunSummary` per stored record, readable
  or not;
- :func:`check_options`: a store factory's options from a config's ``[store]`` table.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping

from durable_core.errors import ConfigError, ConflictError, CorruptRecordError, DurableError
from durable_core.records import RunRecord
from durable_core.records.delta import Folded
from durable_core.records.jsonio import record_from_fold, record_from_json
from durable_core.store.protocol import MAX_REVISION, RunSummary

__all__ = [
    "check_options",
    "check_path",
    "decode_stored",
    "summary_of",
    "validate_loaded",
    "validate_run_id",
    "validate_save",
    "validate_timeout",
]


def validate_run_id(run_id: object) -> str:
    """Check a run id given to ``Store.acquire`` and return it.

    A run id is the record's ``RunID`` (R-REC-2): a non-empty string that is valid Unicode, so
    that it can be stored as UTF-8 (R-REC-4, B-FILE-5).

    Raises:
        CorruptRecordError: ``run_id`` is not a string, is empty, or holds a lone surrogate.
    """
    if not isinstance(run_id, str):
        raise CorruptRecordError(
            f"a run id must be a str, found {type(run_id).__name__} ({run_id!r}); pass the "
            "run's business identity as text"
        )
    if not run_id:
        raise CorruptRecordError(
            "a run id must be a non-empty string, found ''; pass the run's business identity"
        )
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CorruptRecordError(
            f"run id {run_id!r} is not valid Unicode (a lone surrogate at character "
            f"{exc.start}); run ids are stored as UTF-8"
        ) from None
    return run_id


def validate_timeout(timeout: object) -> float | None:
    """Check an ``acquire`` timeout (seconds) and return it as a float, or ``None``.

    Raises:
        ValueError: ``timeout`` is negative, NaN or not a number.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"timeout must be seconds (a number) or None, found {timeout!r}")
    value = float(timeout)
    if math.isnan(value) or value < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, found {timeout!r}")
    return value


def validate_save(run_id: str, record: object, expected_revision: object) -> None:
    """The checks of ``Session.save`` that need no storage (R-STORE-3).

    Call it first in every ``save``; then compare ``expected_revision`` with the stored
    revision under the backend's own atomicity.

    Args:
        run_id: the session's run id.
        record: the proposed record.
        expected_revision: the revision the caller believes is stored (0: no record yet).

    Raises:
        CorruptRecordError: ``record`` is not a :class:`RunRecord`.
        ConflictError: ``expected_revision`` is not an int in ``0 … MAX_REVISION - 1`` (a save
            after ``MAX_REVISION`` would overflow uint64), ``record.revision`` is not
            ``expected_revision + 1``, or ``record.run_id`` is not the session's run id.
    """
    if (
        type(record) is RunRecord
        and type(expected_revision) is int
        and 0 <= expected_revision < MAX_REVISION
        and type(record.revision) is int
        and record.revision == expected_revision + 1
        and record.run_id == run_id
    ):
        return  # every check below passes: the usual save, told in one look
    if not isinstance(record, RunRecord):
        raise CorruptRecordError(
            f"save expects a RunRecord, found {type(record).__name__}; nothing was written"
        )
    if isinstance(expected_revision, bool) or not isinstance(expected_revision, int):
        raise ConflictError(
            f"expected_revision must be an int (0 for the first save), found "
            f"{expected_revision!r}; the stored record is unchanged"
        )
    if expected_revision < 0 or expected_revision > MAX_REVISION:
        raise ConflictError(
            f"expected_revision must be between 0 and {MAX_REVISION} (uint64), found "
            f"{expected_revision}; the stored record is unchanged"
        )
    if expected_revision == MAX_REVISION:
        raise ConflictError(
            f"run {run_id!r} is at revision {MAX_REVISION}, the largest uint64: one more save "
            "would overflow the revision; the stored record is unchanged. Start a "
            "new run id"
        )
    revision = record.revision
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise ConflictError(
            f"record.revision must be an int, found {revision!r}; the stored record is unchanged"
        )
    if revision != expected_revision + 1:
        raise ConflictError(
            f"record.revision must be expected_revision + 1 = {expected_revision + 1}, found "
            f"{revision}; set the record's revision to the stored one plus one. "
            "The stored record is unchanged"
        )
    if record.run_id != run_id:
        raise ConflictError(
            f"record.run_id is {record.run_id!r} but this session owns run {run_id!r}; a "
            "session saves only its own run. The stored record is unchanged"
        )


def validate_loaded(run_id: str, record: RunRecord, location: str) -> RunRecord:
    """Check a record read back from storage belongs to ``run_id`` and has a stored revision.

    Args:
        run_id: the session's run id.
        record: the decoded record.
        location: where it was read from (for the message).

    Returns:
        ``record``.

    Raises:
        CorruptRecordError: the record names another run, or its revision is not in
            ``1 … MAX_REVISION``. Nothing is changed in storage.
    """
    if record.run_id != run_id:
        raise CorruptRecordError(
            f"the record at {location} names run {record.run_id!r}, but it is stored for run "
            f"{run_id!r}; it was copied or edited by hand. Keep the file as evidence and restore "
            "the right record"
        )
    if not 1 <= record.revision <= MAX_REVISION:
        raise CorruptRecordError(
            f"the record of run {run_id!r} at {location} has revision {record.revision}; a "
            f"stored revision is between 1 and {MAX_REVISION}"
        )
    return record


def decode_stored(run_id: str, data: object, location: str, column: int | None = None) -> RunRecord:
    """Decode the bytes stored for ``run_id`` and check they are its record.

    Args:
        run_id: the run the bytes are stored for.
        data: the stored bytes, or a :class:`~durable_core.records.delta.Folded` complete
            record with the deltas saved after it.
        location: where they were read from (for messages): a file path, a database row.
        column: the revision the medium keeps beside the record (a database column), or
            ``None`` when it keeps none.

    Returns:
        The record.

    Raises:
        CorruptRecordError: the bytes are not a valid record, name another run, hold a revision
            outside ``1 … MAX_REVISION``, or disagree with ``column``. Nothing is changed.
    """
    if isinstance(data, Folded):
        record = _from_fold(run_id, data, location)
    else:
        record = _from_bytes(run_id, data, location)
    validate_loaded(run_id, record, location)
    if column is not None and record.revision != column:
        raise CorruptRecordError(
            f"the record of run {run_id!r} at {location} has revision {record.revision}, but "
            f"revision {column} is stored beside it; it was edited outside Durable. It was "
            "left untouched; keep it as evidence"
        )
    return record


def _from_fold(run_id: str, folded: Folded, location: str) -> RunRecord:
    folded.tree()  # a chain that does not fold says so as it is, as the store's fold did
    try:
        return record_from_fold(folded)
    except CorruptRecordError as exc:
        raise _not_a_record(run_id, location, exc) from exc


def _from_bytes(run_id: str, data: object, location: str) -> RunRecord:
    if not isinstance(data, bytes):
        raise CorruptRecordError(
            f"the record of run {run_id!r} at {location} is stored as {type(data).__name__}, "
            "not as JSON bytes; it was left untouched. Keep it as evidence and restore the "
            "right record"
        )
    try:
        return record_from_json(data)
    except CorruptRecordError as exc:
        raise _not_a_record(run_id, location, exc) from exc


def _not_a_record(run_id: str, location: str, exc: CorruptRecordError) -> CorruptRecordError:
    reason = str(exc).rstrip(". ")
    if "keep them as evidence" not in reason:  # the reason may say so already
        reason += ". It was left untouched; keep it as evidence and fix the cause"
    return CorruptRecordError(
        f"the record of run {run_id!r} at {location} is not a valid run record: {reason}"
    )


def summary_of(location: str, read: Callable[[], RunRecord], run_id: str = "") -> RunSummary:
    """Summarize one stored record for ``list_runs``: readable, or with ``error`` set.

    Args:
        location: where the record is kept (for the summary and messages).
        read: reads and decodes the record (e.g. with :func:`decode_stored`).
        run_id: the run id when the medium knows it without the record (a database column).

    Returns:
        The record's summary; a :class:`~durable_core.errors.DurableError` or ``OSError`` from
        ``read`` becomes a summary with ``error`` set, never an exception.
    """
    try:
        record = read()
    except (OSError, DurableError) as exc:
        return RunSummary(
            run_id=run_id,
            format=0,
            revision=0,
            location=location,
            error=f"{type(exc).__name__}: {exc}",
        )
    return RunSummary(
        run_id=record.run_id, format=record.format, revision=record.revision, location=location
    )


def check_options(
    backend: str,
    options: Mapping[str, object],
    accepted: Iterable[str],
    required: Iterable[str] = (),
) -> None:
    """Check a store factory's options (a config's ``[store]`` table without ``backend``).

    Args:
        backend: the backend's name, for the message (``"file"``, ``"sqlite"`` …).
        options: the options given.
        accepted: every option the factory takes.
        required: the options it cannot do without.

    Raises:
        ConfigError: an option is not accepted, or a required one is missing.
    """
    accepted = tuple(accepted)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(repr(name) for name in accepted) or "no options"
        raise ConfigError(
            f"the {backend!r} store does not take the option(s) {', '.join(unknown)} (unknown "
            f"options); it accepts {takes}"
        )
    missing = [name for name in required if name not in options]
    if missing:
        raise ConfigError(
            f"the {backend!r} store needs the option(s) {', '.join(repr(n) for n in missing)}"
        )


def check_path(value: object, owner: str, example: str) -> str:
    """Check a store's path argument (a ``str`` or path-like, not empty) and return it as text.

    Args:
        value: the argument given.
        owner: what takes it, for the message (``"FileStore directory"``).
        example: an example of a good value, for the message.

    Raises:
        ConfigError: ``value`` is bytes, not a path, or empty (an empty path would silently mean
            the current directory).
    """
    if isinstance(value, bytes) or not isinstance(value, str | os.PathLike):
        raise ConfigError(
            f"{owner} must be a str or path-like, found {type(value).__name__} ({value!r})"
        )
    raw = os.fspath(value)
    if not isinstance(raw, str) or raw == "":
        raise ConfigError(
            f"{owner} must be a non-empty path, e.g. {example!r}; an empty one would silently "
            "mean the current directory"
        )
    return raw
