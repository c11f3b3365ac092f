"""The file store: one JSON file per run in a local directory (B-FILE-1…5; seed 001 §1, §2, §5).

Layout of the directory (nothing else is read or written):

- ``<key>.json``: the run's record, canonical UTF-8 JSON (``record_to_json``), mode 0600;
- ``<key>.lock``: the run's ownership lock file (:mod:`durable_filestore.locks`); it stays;
- ``<key>-<n>.tmp``: a save in progress, ``n`` a random uint32 in decimal.

``<key>`` is the SHA-256 hex of the run id's UTF-8 bytes, so a run id never becomes a path.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import threading
from typing import Any

from durable_core.errors import (
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DurableError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.recordjson import record_from_json, record_to_json
from durable_core.records import RunRecord
from durable_core.store import (
    RunSummary,
    sort_summaries,
    validate_loaded,
    validate_run_id,
    validate_save,
    validate_timeout,
)
from durable_filestore.locks import RunLock, make_private_directory, run_key

__all__ = ["FileSession", "FileStore", "file_store_factory"]

_RECORD_NAME = re.compile(r"[0-9a-f]{64}\.json")
_UINT32_MAX = 2**32 - 1
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Windows cannot open a directory to fsync it; its rename is made durable by the file system.
_SYNC_DIRECTORY = os.name != "nt"


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    # No ctime: a rename may change it; the inode number changes with every save anyway.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read_regular_file(path: str) -> tuple[bytes, os.stat_result]:
    """Read a whole regular file; raise FileNotFoundError when it does not exist."""
    fd = os.open(path, os.O_RDONLY | _O_BINARY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DurableError(
                f"{path} is not a regular file; a record file is always one. Move it away "
                "after keeping it as evidence (E-1)"
            )
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FileStore:
    """Runs saved as JSON files in one local directory (B-FILE-1…5; seed 001 §2).

    Exclusivity per run comes from an OS file lock on ``<key>.lock`` (BusyError at once, in
    this process or another); a save writes a temp file in the same directory, syncs it, renames
    it over ``<key>.json`` and syncs the directory. No distributed lease, no fencing, no promise
    across power loss: see ``docs/storage.md``.

    Thread-safe: sessions may be used from any thread (one call at a time per session).

    Args:
        directory: the checkpoint directory (``str`` or path-like). Created with its missing
            parents (mode 0700) when it does not exist; an existing directory's permissions are
            left alone. Made absolute at construction, so a later ``os.chdir`` does not move it.

    Raises:
        ConfigError: ``directory`` is empty, not a path, or exists and is not a directory.
        OSError: the directory cannot be created.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if isinstance(directory, bytes) or not isinstance(directory, str | os.PathLike):
            raise ConfigError(
                f"FileStore directory must be a str or path-like, found "
                f"{type(directory).__name__} ({directory!r})"
            )
        raw = os.fspath(directory)
        if not isinstance(raw, str) or raw == "":
            raise ConfigError(
                "FileStore directory must be a non-empty path; an empty string would silently "
                "mean the current directory. Pass the checkpoint directory, e.g. "
                "'./checkpoints' (B-FILE-1)"
            )
        self._directory = make_private_directory(raw)
        self._lock = threading.Lock()
        self._sessions: set[FileSession] = set()
        self._closed = False

    @property
    def directory(self) -> str:
        """The absolute path of the checkpoint directory."""
        return self._directory

    def record_path(self, run_id: str) -> str:
        """The path of ``run_id``'s record file, ``<directory>/<sha256(run_id)>.json``."""
        return os.path.join(self._directory, run_key(run_id) + ".json")

    def lock_path(self, run_id: str) -> str:
        """The path of ``run_id``'s lock file, ``<directory>/<sha256(run_id)>.lock``."""
        return os.path.join(self._directory, run_key(run_id) + ".lock")

    def acquire(self, run_id: str, timeout: float | None = None) -> FileSession:
        """Take exclusive ownership of ``run_id`` (R-STORE-1, B-FILE-2, B-FILE-4).

        Locks ``<key>.lock`` without waiting, then removes the run's stale temp files (saves
        that never reached their rename): regular files named ``<key>-<n>.tmp``, ``n`` a uint32
        in decimal without leading zeros. Nothing else is touched.

        Args:
            run_id: the run's id (a non-empty string of valid Unicode).
            timeout: accepted for the protocol; the file store never waits.

        Returns:
            The run's :class:`FileSession`.

        Raises:
            BusyError: the run is owned by another session, in this process or another (at
                once).
            SessionClosedError: the store was closed.
            CorruptRecordError: ``run_id`` is not a valid run id.
            DurableError: no OS file lock is available here, or removing stale temp files
                failed (the lock is released again).
            OSError: the directory or lock file cannot be created or opened.
        """
        validate_run_id(run_id)
        validate_timeout(timeout)
        self._check_open()
        make_private_directory(self._directory)
        key = run_key(run_id)
        lock = RunLock.acquire(
            os.path.join(self._directory, key + ".lock"), description=f"run {run_id!r}"
        )
        try:
            self._remove_stale_temp_files(run_id, key)
            session = FileSession(self, run_id, key, lock)
            with self._lock:
                if self._closed:
                    raise SessionClosedError("this FileStore was closed; create a new store")
                self._sessions.add(session)
        except BaseException:
            lock.release()
            raise
        return session

    def close(self) -> None:
        """Close every open session of this store; later ``acquire`` calls raise. Idempotent."""
        with self._lock:
            self._closed = True
            sessions = list(self._sessions)
        for session in sessions:
            session.close()

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every record in the directory, without taking ownership (RunLister).

        Reads each ``<key>.json`` (the run id is inside the record, never taken from a file
        name); lock and temp files are skipped. A record that cannot be read, is corrupt, or is
        stored under another run's file name is listed with ``error`` set, never skipped.
        Records being saved concurrently are seen before or after the save, never half.

        Returns:
            Readable runs sorted by run id, then unreadable files sorted by path.

        Raises:
            OSError: the directory cannot be read.
        """
        summaries = []
        with os.scandir(self._directory) as entries:
            names = sorted(e.name for e in entries if _RECORD_NAME.fullmatch(e.name))
        for name in names:
            path = os.path.join(self._directory, name)
            try:
                data, _ = _read_regular_file(path)
                record = record_from_json(data)
                if run_key(record.run_id) != name[:-5]:
                    raise CorruptRecordError(
                        f"the record names run {record.run_id!r}, whose file would be "
                        f"{run_key(record.run_id)}.json; it was copied or renamed by hand"
                    )
                validate_loaded(record.run_id, record, path)
            except FileNotFoundError:
                continue  # removed between listing and reading: not a stored run any more
            except (OSError, DurableError) as exc:
                summaries.append(
                    RunSummary(
                        run_id="",
                        format=0,
                        revision=0,
                        location=path,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                )
                continue
            summaries.append(
                RunSummary(
                    run_id=record.run_id,
                    format=record.format,
                    revision=record.revision,
                    location=path,
                )
            )
        return sort_summaries(summaries)

    def __enter__(self) -> FileStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileStore({self._directory!r})"

    def _check_open(self) -> None:
        with self._lock:
            if self._closed:
                raise SessionClosedError("this FileStore was closed; create a new store")

    def _forget(self, session: FileSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    def _remove_stale_temp_files(self, run_id: str, key: str) -> None:
        """Remove ``<key>-<uint32>.tmp`` regular files, non-recursively (B-FILE-4)."""
        pattern = re.compile(re.escape(key) + r"-(0|[1-9][0-9]{0,9})\.tmp")
        try:
            with os.scandir(self._directory) as entries:
                stale = [
                    entry.path
                    for entry in entries
                    if (match := pattern.fullmatch(entry.name))
                    and int(match.group(1)) <= _UINT32_MAX
                    and entry.is_file(follow_symlinks=False)
                ]
            for path in stale:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        except OSError as exc:
            raise DurableError(
                f"could not remove the stale temp files of run {run_id!r} in "
                f"{self._directory}: {exc}. The session was not opened and the run's lock was "
                "released; fix the directory's permissions and acquire again (B-FILE-4)"
            ) from exc


class FileSession:
    """Exclusive session of one run of a :class:`FileStore` (R-STORE-2…4, B-FILE-3, B-FILE-5).

    Created by :meth:`FileStore.acquire`; holds the run's OS lock until :meth:`close`.
    """

    def __init__(self, store: FileStore, run_id: str, key: str, lock: RunLock) -> None:
        self._store = store
        self._run_id = run_id
        self._key = key
        self._lock = lock
        self._mutex = threading.Lock()
        self._closed = False
        directory = store.directory
        self._directory = directory
        self._record_path = os.path.join(directory, key + ".json")
        # (stat key, revision) of the record file as last read or written by this session: a
        # save compares the file's stat with it instead of reading the whole record again.
        self._known: tuple[tuple[int, int, int, int], int] | None = None

    @property
    def run_id(self) -> str:
        """The run id this session owns."""
        return self._run_id

    @property
    def record_path(self) -> str:
        """The absolute path of the run's record file."""
        return self._record_path

    def load(self) -> RunRecord:
        """Read the run's record and return it (a fresh copy on every call; R-STORE-2).

        Returns:
            The stored record.

        Raises:
            NotFoundError: ``<key>.json`` does not exist (and only then).
            CorruptRecordError: the file is not valid UTF-8 JSON of a run record, or names
                another run; the file is left untouched.
            SessionClosedError: the session was closed.
            DurableError: the file is not a regular file, or the directory vanished.
            OSError: any other read failure (e.g. PermissionError).
        """
        with self._mutex:
            self._check_open()
            record, _ = self._read_record()
            return record

    def save(self, record: RunRecord, expected_revision: int) -> None:
        """Replace the record if the stored revision is ``expected_revision`` (R-STORE-3).

        The record is encoded first (invalid UTF-8 metadata is refused before anything is
        written, B-FILE-5); then the whole new record goes to ``<key>-<n>.tmp`` (0600), is
        synced, renamed over ``<key>.json``, and the directory is synced (B-FILE-3).

        Raises:
            ConflictError: the stored revision is not ``expected_revision``, or the record's
                revision/run id is wrong, or the revision would overflow uint64; nothing is
                written.
            CorruptRecordError: the record holds invalid UTF-8 metadata, or the stored record
                is corrupt (a corrupt record is never overwritten); nothing is written.
            SessionClosedError: the session was closed.
            DurableError: writing failed. The message says whether the old record is known to
                be intact (failure before the rename) or the result is uncertain (failure after
                it: load again before continuing, R-RT-2).
        """
        with self._mutex:
            self._check_open()
            validate_save(self._run_id, record, expected_revision)
            data = record_to_json(record)
            current = self._stored_revision()
            if current != expected_revision:
                raise ConflictError(
                    f"run {self._run_id!r} is stored at revision {current}, not at the "
                    f"expected revision {expected_revision}; load the record again "
                    "(R-STORE-3). The stored record is unchanged"
                )
            self._write(data, record.revision)

    def close(self) -> None:
        """Release the run's OS lock (the lock file stays). Idempotent (R-STORE-4)."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._lock.release()
        self._store._forget(self)

    def __enter__(self) -> FileSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<FileSession of run {self._run_id!r} in {self._directory} ({state})>"

    # -- internals (called with self._mutex held) ----------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                f"the session of run {self._run_id!r} is closed; acquire the run again"
            )

    def _missing(self) -> NotFoundError:
        if not os.path.isdir(self._directory):
            raise DurableError(
                f"the checkpoint directory {self._directory} no longer exists; it was removed "
                f"while run {self._run_id!r} was owned. Restore it; a missing directory is not "
                "a missing record (R-STORE-2)"
            )
        return NotFoundError(
            f"no record of run {self._run_id!r} in {self._directory} (no file {self._key}.json);"
            " check the directory and the run id — a missing record never means the run "
            "finished (E-1)"
        )

    def _read_record(self) -> tuple[RunRecord, os.stat_result]:
        path = self._record_path
        try:
            data, st = _read_regular_file(path)
        except FileNotFoundError:
            raise self._missing() from None
        try:
            record = record_from_json(data)
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"the record file {path} of run {self._run_id!r} is not a valid run record: "
                f"{exc}. It was left untouched; keep it as evidence and fix the cause (E-1)"
            ) from exc
        validate_loaded(self._run_id, record, path)
        self._known = (_stat_key(st), record.revision)
        return record, st

    def _stored_revision(self) -> int:
        try:
            st = os.stat(self._record_path)
        except FileNotFoundError:
            self._missing()  # raises when the directory itself is gone
            return 0
        if self._known is not None and self._known[0] == _stat_key(st):
            return self._known[1]
        record, _ = self._read_record()
        return record.revision

    def _create_temp(self) -> tuple[int, str]:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY
        while True:
            path = os.path.join(self._directory, f"{self._key}-{secrets.randbelow(2**32)}.tmp")
            try:
                return os.open(path, flags, 0o600), path
            except FileExistsError:
                continue

    def _write(self, data: bytes, revision: int) -> None:
        tmp_path = ""
        try:
            fd, tmp_path = self._create_temp()
            try:
                _write_all(fd, data)
                os.fsync(fd)
                written = os.fstat(fd)
            finally:
                os.close(fd)
            os.replace(tmp_path, self._record_path)
        except BaseException as exc:
            if tmp_path:
                # if this fails too, the next acquire of this run removes it (B-FILE-4)
                with contextlib.suppress(OSError):
                    os.unlink(tmp_path)
            if isinstance(exc, OSError):
                raise DurableError(
                    f"could not save revision {revision} of run {self._run_id!r} in "
                    f"{self._directory}: {exc}. The record file was not replaced: the stored "
                    "record is unchanged"
                ) from exc
            raise
        # The rename kept the temp file's inode: remember it as what is stored now.
        self._known = (_stat_key(written), revision)
        if _SYNC_DIRECTORY:
            try:
                dir_fd = os.open(self._directory, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
            except OSError as exc:
                raise DurableError(
                    f"revision {revision} of run {self._run_id!r} was renamed into place, but "
                    f"syncing the directory {self._directory} failed: {exc}. The save is "
                    "uncertain: it may or may not survive a crash. Stop, fix the cause, and "
                    "load the record again before continuing; never retry with the old "
                    "revision (R-RT-2)"
                ) from exc


def file_store_factory(**options: Any) -> FileStore:
    """Build a :class:`FileStore` from a config's ``[store]`` options (``directory``).

    Raises:
        ConfigError: an option other than ``directory`` is given, or ``directory`` is missing.
    """
    unknown = sorted(set(options) - {"directory"})
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)} for the file store; it accepts only "
            "'directory'"
        )
    if "directory" not in options:
        raise ConfigError("the file store needs the option 'directory' (a checkpoint directory)")
    return FileStore(options["directory"])
