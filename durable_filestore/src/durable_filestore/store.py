"""The file store: one JSON file per run in a local directory (B-FILE-1…5; seed 001 §1, §2, §5).

Layout of the directory (nothing else is read or written):

- ``<key>.json``: the run's complete record, canonical UTF-8 JSON (``record_to_json``), 0600;
- ``<key>.journal``: the deltas saved since that record, while a session writes (0600);
- ``<key>.lock``: the run's ownership lock file (:mod:`durable_core.store.locks`); it stays;
- ``<key>-<n>.tmp``: a save in progress, ``n`` a random uint32 in decimal;
- ``<key>.history``: the run's history (RunHistory), appended with ``O_APPEND``, one line per
  entry: the run's root scope, a tab, the entry (one JSON object); removed with the run;
- ``<key>.inbox/`` and ``<key>.waiting``: messages posted to the run and its waiting note
  (RunInbox, see :mod:`durable_filestore.inbox`); removed with the run.

``<key>`` is the SHA-256 hex of the run id's UTF-8 bytes, so a run id never becomes a path.

A save that comes with a delta (``EncodedRecord.delta``) appends it to the journal — one entry:
its length and CRC-32 (two big-endian uint32) and the delta's bytes — and syncs the journal.
When the journal outgrows the complete record (:data:`FOLD_RATIO`), or when it is not clean (a
torn last entry after a crash, entries from before the record), the save writes the complete
record instead (temp file, sync, rename, directory sync) and then removes the journal. Closing a
session that saved folds the journal the same way, so that at rest a run is one complete
``<key>.json``; a session that only read (``durable inspect``, a refused ``resume``) writes
nothing, so a journal left by a crash stays until the next session that saves. Reading applies
the journal's entries that follow the record; entries older than the record (a fold that crashed
before removing the journal) are skipped, and a torn last entry is a save that was never
confirmed. A journal without its ``<key>.json`` is no run Durable leaves behind (a run's first
save writes ``<key>.json``; deleting a run removes the journal first): it is refused as corrupt,
never read as "no record" and never removed by a new run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from durable_core.errors import CorruptRecordError, DurableError, NotFoundError
from durable_core.records import RunRecord
from durable_core.records.delta import apply_tree, canonical_json, load_tree, read_delta
from durable_core.records.jsonio import record_from_json
from durable_core.store import (
    Acquiring,
    BaseStore,
    Capability,
    EncodedRecord,
    FoldingSession,
    RunSummary,
    check_options,
    check_path,
    decode_stored,
    sort_summaries,
    summary_of,
    validate_run_id,
)
from durable_core.store.deltas import FOLD_RATIO  # the kit's one fold policy; named here too
from durable_core.store.history import check_entries, complete_lines
from durable_core.store.local import watch_marker_file, write_marker_file
from durable_core.store.locks import RunLock, make_private_directory, run_key
from durable_filestore.inbox import FileInbox

__all__ = ["FOLD_RATIO", "FileSession", "FileStore", "file_store_factory"]

logger = logging.getLogger("durable_filestore")

_ENTRY = struct.Struct(">II")  # length, CRC-32 of the delta bytes

_RECORD_NAME = re.compile(r"[0-9a-f]{64}\.json")
_JOURNAL_NAME = re.compile(r"[0-9a-f]{64}\.journal")
_UINT32_MAX = 2**32 - 1
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A FIFO opened for reading would block until a writer comes: never wait for one.
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Windows cannot open a directory to fsync it; its rename is made durable by the file system.
_SYNC_DIRECTORY = os.name != "nt"


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    # No ctime: a rename may change it; the inode number changes with every save anyway.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _not_regular(path: str, st: os.stat_result | None) -> DurableError:
    if st is None or stat.S_ISLNK(st.st_mode):
        what = "a symbolic link"
    elif stat.S_ISFIFO(st.st_mode):
        what = "a FIFO (named pipe)"
    elif stat.S_ISDIR(st.st_mode):
        what = "a directory"
    else:
        what = "a special file"
    return DurableError(
        f"{path} is {what}, not a regular file; Durable writes every record as a regular file "
        "and never reads or replaces anything else there. Keep it as evidence, move it away, "
        "and restore the run's record file"
    )


def _lstat(path: str) -> os.stat_result | None:
    """``lstat`` of ``path``, ``None`` when nothing is there."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _read_regular_file(path: str) -> tuple[bytes, os.stat_result]:
    """Read a whole regular file at once; raise FileNotFoundError when nothing is there.

    Raises:
        DurableError: a symbolic link (even a dangling one), a FIFO, a directory or any other
            non-regular file is there; found without blocking.
    """
    if not _O_NOFOLLOW:
        st = _lstat(path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_NOFOLLOW | _O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        st = _lstat(path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st) from None
        raise exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _journal_entries(data: bytes, path: str) -> tuple[list[bytes], bool]:
    """The entries of a journal's bytes, and whether its last entry is torn (never confirmed).

    Raises:
        CorruptRecordError: an entry other than the last fails its checksum.
    """
    entries = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < _ENTRY.size:
            return entries, True
        length, crc = _ENTRY.unpack_from(data, pos)
        end = pos + _ENTRY.size + length
        if end > len(data):
            return entries, True
        payload = data[pos + _ENTRY.size : end]
        if zlib.crc32(payload) != crc:
            if end == len(data):
                return entries, True
            raise CorruptRecordError(
                f"entry {len(entries) + 1} of the journal {path} fails its checksum, and entries "
                "follow it: the journal was damaged. It was left untouched; keep it as evidence"
            )
        entries.append(payload)
        pos = end
    return entries, False


class _Stored:
    """A run's files as read: the complete record they make and what is known about them."""

    __slots__ = ("base_size", "clean", "data", "journal_size", "live_bytes", "record_key")

    def __init__(
        self,
        data: bytes,
        record_key: tuple[int, int, int, int],
        journal_size: int,
        base_size: int,
        live_bytes: int,
        clean: bool,
    ) -> None:
        self.data = data
        self.record_key = record_key
        self.journal_size = journal_size
        self.base_size = base_size
        self.live_bytes = live_bytes
        self.clean = clean


def _read_run(record_path: str, journal_path: str) -> _Stored | None:
    """Read ``<key>.json`` and apply its journal; ``None`` when there is neither file.

    Raises:
        CorruptRecordError: the journal is damaged, its deltas do not follow the record, or
            there is a journal but no record file.
        DurableError: a non-regular file is in the place of either file.
        OSError: a read failed.
    """
    try:
        data, st = _read_regular_file(record_path)
    except FileNotFoundError:
        if _lstat(journal_path) is not None:
            raise _journal_without_record(record_path, journal_path) from None
        return None
    try:
        journal, _ = _read_regular_file(journal_path)
    except FileNotFoundError:
        journal = b""
    if not journal:
        return _Stored(data, _stat_key(st), 0, len(data), 0, True)
    entries, torn = _journal_entries(journal, journal_path)
    try:
        tree = load_tree(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        tree = None
    if not isinstance(tree, dict):
        # Not a record at all: let the caller's decoding say what is wrong with it.
        return _Stored(data, _stat_key(st), len(journal), len(data), 0, False)
    stale = 0
    live = 0
    for entry in entries:
        delta = read_delta(entry)
        if isinstance(tree.get("Revision"), int) and delta.base < tree["Revision"] and not live:
            stale += 1  # saved before the record was last written whole: already in it
            continue
        apply_tree(tree, delta)
        live += len(entry) + _ENTRY.size
    journal_size = len(journal)
    del journal, entries  # applied: let them go before the record is encoded again
    complete = canonical_json(tree) if live else data
    return _Stored(complete, _stat_key(st), journal_size, len(data), live, not (torn or stale))


def _journal_without_record(record_path: str, journal_path: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{journal_path} holds saved deltas but their record file {os.path.basename(record_path)}"
        " is missing: the record was removed or moved by hand (Durable never leaves a journal "
        "without its record). The run cannot be read, and a new run under this id is refused "
        "so that nothing saved is replaced. Both files were left untouched: restore the record "
        "file from a backup, or, if the run is meant to be gone, delete it with 'durable delete'"
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FileStore(FileInbox, BaseStore):
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

    capabilities = frozenset(
        {
            Capability.LIST_RUNS,
            Capability.PEEK,
            Capability.SAVE_TIMES,
            Capability.CANCEL_REQUESTS,
            Capability.RUN_HISTORY,
            Capability.INBOX,
            Capability.DELETE,
            Capability.RESTORE,
            Capability.RESTORE_TIMES,
        }
    )
    """What the store and its sessions can do beyond the contract (store.capabilities)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        raw = check_path(directory, "FileStore directory", "./checkpoints")
        super().__init__()
        self._directory = make_private_directory(raw)

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
        session: FileSession = super().acquire(run_id, timeout)
        return session

    def list_runs(self) -> list[RunSummary]:
        """Summaries of every record in the directory, without taking ownership (RunLister).

        Reads each ``<key>.json`` (the run id is inside the record, never taken from a file
        name); lock and temp files are skipped. A record that cannot be read, is corrupt, is not
        a regular file (never waited on: a FIFO is reported at once), or is stored under another
        run's file name is listed with ``error`` set, never skipped; so is a journal without its
        record file (at the journal's path). Records being saved concurrently are seen before or
        after the save, never half.

        Returns:
            Readable runs sorted by run id, then unreadable files sorted by path.

        Raises:
            OSError: the directory cannot be read.
        """
        with os.scandir(self._directory) as entries:
            found = {e.name for e in entries}
        names = [(name, name) for name in found if _RECORD_NAME.fullmatch(name)]
        names += [  # a journal without its record: listed as what it is, never skipped
            (name[: -len(".journal")] + ".json", name)
            for name in found
            if _JOURNAL_NAME.fullmatch(name) and name[: -len(".journal")] + ".json" not in found
        ]
        summaries = []
        for name, shown in sorted(names):
            path = os.path.join(self._directory, name)

            def read(path: str = path, key: str = name[:-5]) -> RunRecord:
                stored = _read_run(path, path[: -len(".json")] + ".journal")
                if stored is None:
                    raise FileNotFoundError(path)
                data = stored.data
                record = record_from_json(data)
                if run_key(record.run_id) != key:
                    raise CorruptRecordError(
                        f"the record names run {record.run_id!r}, whose file would be "
                        f"{run_key(record.run_id)}.json; it was copied or renamed by hand"
                    )
                return decode_stored(record.run_id, data, path)

            try:
                summaries.append(summary_of(os.path.join(self._directory, shown), read))
            except FileNotFoundError:
                continue  # removed between listing and reading: not a stored run any more
        return sort_summaries(summaries)

    def peek(self, run_id: str) -> RunRecord:
        """The last committed record of ``run_id``, read without the run's lock (RecordPeeker).

        Saves replace ``<key>.json`` atomically, so this sees one whole revision; a running
        run's owner may have saved a newer one by the time it is shown. Never writes.

        Raises:
            NotFoundError: no record file.
            CorruptRecordError: the file is not a record of this run.
            DurableError: something other than a regular file is there.
        """
        validate_run_id(run_id)
        path = self.record_path(run_id)
        stored = _read_run(path, path[: -len(".json")] + ".journal")
        if stored is None:
            raise NotFoundError(
                f"no record of run {run_id!r} in {self._directory} (no file {run_key(run_id)}.json)"
            )
        return decode_stored(run_id, stored.data, path)

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop: a ``<key>.cancel`` marker file beside the lock
        file, which the owner's watcher removes (CancelRequests)."""
        validate_run_id(run_id)
        write_marker_file(os.path.join(self._directory, run_key(run_id) + ".cancel"))

    def watch_cancel(self, run_id: str, on_request: Any) -> Any:
        """Watch for ``<key>.cancel`` while the run executes (CancelRequests)."""
        return watch_marker_file(
            os.path.join(self._directory, run_key(run_id) + ".cancel"), on_request
        )

    def saved_at(self, run_id: str) -> float | None:
        """When ``<key>.json`` was last replaced (its mtime, seconds since the epoch), or
        ``None`` when there is no record file (SaveTimes)."""
        path = self.record_path(run_id)
        st = _lstat(path)
        if st is None:
            return None
        journal = _lstat(path[: -len(".json")] + ".journal")
        return st.st_mtime if journal is None else max(st.st_mtime, journal.st_mtime)

    def history_path(self, run_id: str) -> str:
        """The path of ``run_id``'s history file, ``<directory>/<sha256(run_id)>.history``."""
        return os.path.join(self._directory, run_key(run_id) + ".history")

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append ``entries`` to ``<key>.history`` as lines ``<root scope>\t<entry>``, in one
        ``O_APPEND`` write (so concurrent appenders, in any process, never interleave a line);
        never touches the record, nor takes the run's lock (RunHistory). Not synced: a history
        may lose its last entries in a power loss, never a record.

        Raises:
            ValueError: an entry is not one line, or ``root_scope`` is not a non-empty line.
            OSError: the file cannot be written (nothing or part of the entries appended).
        """
        validate_run_id(run_id)
        check_entries(root_scope, entries)
        if not entries:
            return
        prefix = root_scope + "\t"
        data = "".join(prefix + entry + "\n" for entry in entries).encode("utf-8", "replace")
        fd = os.open(
            self.history_path(run_id),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_BINARY,
            0o600,
        )
        try:
            written = os.write(fd, data)
            if written < len(data):  # a short write (a full disk): the rest follows
                _write_all(fd, data[written:])
        finally:
            os.close(fd)

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The entries of ``<key>.history`` for the run ``root_scope``, oldest first; a torn
        last line (a crash while appending) is left out (RunHistory).

        Raises:
            OSError: the file exists but cannot be read.
        """
        validate_run_id(run_id)
        try:
            with open(self.history_path(run_id), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        return complete_lines(data, (root_scope + "\t").encode("utf-8", "replace"))

    def __repr__(self) -> str:
        return f"FileStore({self._directory!r})"

    def _open_session(self, run_id: str, timeout: float | None, pending: Acquiring) -> FileSession:
        make_private_directory(self._directory)
        key = run_key(run_id)
        lock = RunLock.acquire(
            os.path.join(self._directory, key + ".lock"), description=f"run {run_id!r}"
        )
        try:
            self._remove_stale_temp_files(run_id, key)
            return FileSession(self, run_id, key, lock)
        except BaseException:
            lock.release()
            raise

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
                "released; fix the directory's permissions and acquire again"
            ) from exc


class FileSession(FoldingSession):
    """Exclusive session of one run of a :class:`FileStore` (R-STORE-2…4, B-FILE-3, B-FILE-5).

    Created by :meth:`FileStore.acquire`; holds the run's OS lock until ``close``. ``load``
    raises ``NotFoundError`` only when ``<key>.json`` does not exist, and ``DurableError`` when
    something other than a regular file is there or the directory vanished. ``save`` appends
    the save's delta to the journal beside ``<key>.json`` and syncs it (a failure there leaves
    the save uncertain: load again, R-RT-2). With no delta known, or once the deltas outgrow
    the record, it writes the whole new record to ``<key>-<n>.tmp`` (0600), syncs it, renames
    it over ``<key>.json`` and syncs the directory (B-FILE-3); a failure before the rename
    leaves the stored record unchanged, a failure syncing the directory leaves the save
    uncertain. ``close`` folds the journal when this session saved, so that the run rests as
    one complete record; a session that only loaded writes nothing when it closes.
    """

    capabilities = FoldingSession.capabilities | {Capability.IDLE_SAVES}
    """A save never uses an event loop: the runtime may call it on its event loop's thread
    while no body runs (it then waits for the save anyway)."""

    def __init__(self, store: FileStore, run_id: str, key: str, lock: RunLock) -> None:
        directory = store.directory
        record_path = os.path.join(directory, key + ".json")
        super().__init__(store, run_id, record_path)
        self._key = key
        self._lock = lock
        self._directory = directory
        self._record_path = record_path
        self._journal_path = os.path.join(directory, key + ".journal")
        self._history_path = os.path.join(directory, key + ".history")
        # The run's files as this session last read (and decoded) or wrote them, and the
        # revision they hold: a save compares the files' stat with it instead of reading again.
        self._known: _Stored | None = None
        self._known_revision = 0
        self._read_state: _Stored | None = None

    @property
    def record_path(self) -> str:
        """The absolute path of the run's record file."""
        return self._record_path

    @property
    def journal_path(self) -> str:
        """The absolute path of the run's journal of deltas (present only while in use)."""
        return self._journal_path

    def delete(self) -> None:
        """Remove the run's journal and record file, then its history file and its lock file,
        while holding the lock; then close the session (RunDeleter).

        The journal goes first: a delete interrupted half-way leaves a record file (a run that
        is still there: delete it again), never a journal without its record. A journal left
        without its record (removed by hand) is deleted too.

        How the lock file goes safely: it is unlinked while this session still holds its OS
        lock, after the record file is gone (and the directory synced). A process that had
        opened the old lock file and gets its lock after this session lets go finds that the
        file at the path is not the one it locked (or that there is none), and opens the path
        again: every acquirer checks this, so two owners never exist.

        Raises:
            NotFoundError: the run has neither a record file nor a journal (nothing removed).
            SessionClosedError: the session was closed.
            DurableError: removing failed; the message says what is left.
        """
        with self._mutex:
            self._check_open()
            st = _lstat(self._record_path)
            journal = _lstat(self._journal_path)
            if st is None and journal is None:
                self._check_directory()
                raise self._not_found()
            for path, found in ((self._record_path, st), (self._journal_path, journal)):
                if found is not None and not stat.S_ISREG(found.st_mode):
                    raise _not_regular(path, found)
            try:
                self._known = None
                if journal is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self._journal_path)
                if st is not None:
                    os.unlink(self._record_path)
                self._sync_directory()
            except OSError as exc:
                raise DurableError(
                    f"could not delete run {self._run_id!r} in {self._directory}: {exc}; its "
                    "record file may still be there: look, and delete again"
                ) from exc
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._history_path)  # the run's history goes with it
            self._store._forget_inbox(self._run_id)  # and its inbox
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock.path)
        self.close()

    def restore_times(self, created_at: float | None, saved_at: float | None) -> None:
        """Give a copied run's record file the source's last save time as its modification
        time (TimesRestorer; the file store keeps no creation time). ``None``: left as is.

        Raises:
            NotFoundError: the run has no record file.
            SessionClosedError: the session was closed.
        """
        with self._mutex:
            self._check_open()
            if _lstat(self._record_path) is None:
                raise self._not_found()
            if saved_at is not None:
                os.utime(self._record_path, (saved_at, saved_at), follow_symlinks=False)

    # -- the medium (called with the session's mutex held) ------------------------------------

    def _read(self) -> tuple[bytes, int | None] | None:
        self._known = None  # set again once what is read now decodes
        self._read_state = stored = _read_run(self._record_path, self._journal_path)
        if stored is None:
            self._check_directory()
            return None
        return stored.data, None

    def _decoded(self, revision: int) -> None:
        self._known = self._read_state
        self._known_revision = revision

    def _unchanged(self, expected_revision: int, st: os.stat_result) -> bool:
        """Whether the files (``st``: the record file's ``lstat``) are still what this session
        knows at ``expected_revision``."""
        known = self._known
        if known is None or self._known_revision != expected_revision:
            return False
        journal = _lstat(self._journal_path)
        if journal is not None and not stat.S_ISREG(journal.st_mode):
            raise _not_regular(self._journal_path, journal)
        return (
            stat.S_ISREG(st.st_mode)
            and _stat_key(st) == known.record_key
            and (0 if journal is None else journal.st_size) == known.journal_size
        )

    def _write(self, record: RunRecord, expected_revision: int, encoded: EncodedRecord) -> bool:
        st = _lstat(self._record_path)
        if st is None:
            self._check_directory()
            if expected_revision != 0:
                return False
        elif not stat.S_ISREG(st.st_mode):
            raise _not_regular(self._record_path, st)
        elif (
            not self._unchanged(expected_revision, st)
            and self._checked_revision() != expected_revision
        ):
            # Not what this session last read or wrote at that revision, and the record there
            # (decoded: a corrupt one raises and stays) is at another revision.
            return False
        known = self._known if st is not None else None
        usable = known is not None and known.clean
        delta = self._delta_to_keep(
            encoded,
            expected_revision,
            known.base_size if known is not None and usable else None,
            known.live_bytes if known is not None else 0,
            _ENTRY.size,
        )
        if delta is not None and known is not None:
            self._append(delta, record.revision, known)
        else:
            self._write_whole(encoded.data, record.revision)
        return True

    def _append(self, delta: bytes, revision: int, known: _Stored) -> None:
        entry = _ENTRY.pack(len(delta), zlib.crc32(delta)) + delta
        created = known.journal_size == 0
        self._known = None  # unknown until the append is synced
        try:
            fd = os.open(
                self._journal_path,
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_BINARY,
                0o600,
            )
            try:
                _write_all(fd, entry)
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                self._sync_directory()
        except OSError as exc:
            raise DurableError(
                f"appending revision {revision} of run {self._run_id!r} to {self._journal_path} "
                f"failed: {exc}. The save is uncertain: it may or may not survive. Stop, fix "
                "the cause, and load the record again before continuing; never retry with the "
                "old revision"
            ) from exc
        self._known = _Stored(
            b"",
            known.record_key,
            known.journal_size + len(entry),
            known.base_size,
            known.live_bytes + len(entry),
            True,
        )
        self._known_revision = revision

    def _write_whole(self, data: bytes, revision: int) -> None:
        """Write the complete record, then drop the journal it makes obsolete."""
        written = self._replace(data, revision)
        journal = _lstat(self._journal_path)
        if journal is not None:
            try:
                os.unlink(self._journal_path)
                self._sync_directory()
            except OSError as exc:
                # The record is saved; the journal's entries are older than it and are skipped.
                logger.warning("could not remove %s: %s", self._journal_path, exc)
                self._known = None
                return
        self._known = _Stored(b"", written, 0, len(data), 0, True)
        self._known_revision = revision

    def _stored_revision(self) -> int:
        return self._checked_revision()

    def _has_deltas(self) -> bool:
        return _lstat(self._journal_path) is not None

    def _write_folded(self, data: bytes, head: int) -> bool:
        # The session holds the run's OS lock: the stored head is the one it last wrote or read.
        self._write_whole(data, head)
        return True

    def _stored_for_fold(self) -> tuple[bytes, int | None] | None:
        stored = _read_run(self._record_path, self._journal_path)
        return None if stored is None else (stored.data, None)

    def _let_go(self, deadline: float | None) -> None:
        self._lock.release()

    def _not_found(self) -> BaseException:
        return NotFoundError(
            f"no record of run {self._run_id!r} in {self._directory} (no file {self._key}.json);"
            " check the directory and the run id — a missing record never means the run "
            "finished"
        )

    def _check_directory(self) -> None:
        if not os.path.isdir(self._directory):
            raise DurableError(
                f"the checkpoint directory {self._directory} no longer exists; it was removed "
                f"while run {self._run_id!r} was owned. Restore it; a missing directory is not "
                "a missing record"
            )

    def _create_temp(self) -> tuple[int, str]:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY
        while True:
            path = os.path.join(self._directory, f"{self._key}-{secrets.randbelow(2**32)}.tmp")
            try:
                return os.open(path, flags, 0o600), path
            except FileExistsError:
                continue

    def _replace(self, data: bytes, revision: int) -> tuple[int, int, int, int]:
        """Replace ``<key>.json`` atomically with ``data``; return the new file's stat key."""
        self._known = None
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
        try:
            self._sync_directory()
        except OSError as exc:
            raise DurableError(
                f"revision {revision} of run {self._run_id!r} was renamed into place, but "
                f"syncing the directory {self._directory} failed: {exc}. The save is "
                "uncertain: it may or may not survive a crash. Stop, fix the cause, and "
                "load the record again before continuing; never retry with the old "
                "revision"
            ) from exc
        # The rename kept the temp file's inode: it is what is stored now.
        return _stat_key(written)

    def _sync_directory(self) -> None:
        """Make the directory's entries (a rename, a new or removed journal) durable."""
        if _SYNC_DIRECTORY:
            dir_fd = os.open(self._directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def file_store_factory(**options: Any) -> FileStore:
    """Build a :class:`FileStore` from a config's ``[store]`` options (``directory``).

    Raises:
        ConfigError: an option other than ``directory`` is given, or ``directory`` is missing.
    """
    check_options("file", options, ("directory",), required=("directory",))
    return FileStore(options["directory"])
