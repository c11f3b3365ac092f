"""Per-run OS file locks and private directories (B-FILE-1, B-FILE-2; seed 001 §2).

A :class:`RunLock` is an exclusive, non-blocking operating-system lock on a lock file, held by an
open file descriptor of this process:

- Linux, macOS and the BSDs: ``flock(2)`` on the whole file; Windows: ``LockFileEx`` on byte 0.
  Both come from the ``filelock`` library's descriptor primitives
  (:func:`filelock.lock_descriptor`), so the lock contends with every other open of the file, in
  this process (another session, another store object) or in another process.
- The lock is released by :meth:`RunLock.release`, when the object is garbage-collected, or when
  the process exits in any way (the kernel closes the descriptor), including ``SIGKILL``.
- The lock file is created with mode 0600 and is never deleted: deleting a lock file while it is
  held would let a second owner lock a new file of the same name (two exclusive domains).
- While it holds the lock, the owner writes its pid, host name and the time it took the lock
  (UTC) into the lock file, as one JSON line (:func:`~durable_core.store.owner.owner_to_bytes`);
  an acquirer that finds the lock held reads it and names the owner in its
  :class:`~durable_core.errors.BusyError` (``BusyError.owner``). The content is only a note:
  ownership is the OS lock alone, and a lock file without a readable note (just taken, written
  by an older Durable, unreadable) makes the owner unknown, not the run free.
- A platform or file system without such a lock refuses to lock (:class:`DurableError`); Durable
  never runs a session unlocked.
- A lock file that this process may read but not write (a store made read-only with
  ``chmod -R a-w``, a read-only mount) is locked through a read-only descriptor: the OS lock
  is the same, only the owner's note cannot be written (the owner is then unknown to others).
  That is how ``durable inspect`` reads a run in a directory it cannot write. A lock file that
  does not exist yet must be created, which needs a writable directory.

Why the descriptor primitives and not ``filelock.FileLock``: its Unix class falls back to a
"soft" marker-file lock where ``flock`` is missing (ownership by a file's existence, not by the
kernel), and it counts re-entrant acquisitions per object; run ownership needs exactly one OS
lock per open file, refused outright where none exists, plus a check that the locked file is
still the one at the path.

A process that forks while holding a lock shares the descriptor with its child: the lock is then
released only when both have closed it. Start helper processes with ``spawn`` (or
``subprocess``), which does not inherit descriptors.

The file store locks ``<key>.lock`` beside each record; the SQLite store locks files in its
``.runlocks/`` directory (B-SQL-2).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import threading
import time
import weakref

import filelock

from durable_core.errors import AcquireTimeoutError, BusyError, ConfigError, DurableError
from durable_core.store.checks import validate_run_id
from durable_core.store.owner import RunOwner, current_owner, owner_from_bytes, owner_to_bytes

__all__ = [
    "RunLock",
    "acquire_run_lock",
    "make_private_directory",
    "run_key",
]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)

# errno values meaning "this file system or platform has no such lock", as opposed to contention.
_NO_LOCK_ERRNOS = frozenset(
    code
    for code in (
        getattr(errno, "ENOSYS", None),
        getattr(errno, "ENOLCK", None),
        getattr(errno, "EOPNOTSUPP", None),
        getattr(errno, "ENOTSUP", None),
        getattr(errno, "EINVAL", None),
    )
    if code is not None
)

# How many times a lock file replaced between open and lock is re-opened before giving up.
_REOPEN_ATTEMPTS = 5
_POLL_SECONDS = 0.01
# Reads of a held lock file's owner before it is called unknown, and the most bytes read.
_OWNER_READS = 10
_OWNER_MAX_BYTES = 4096


def run_key(run_id: str) -> str:
    """The SHA-256 hex digest (64 lowercase characters) of ``run_id``'s UTF-8 bytes.

    It names a run's files (``<key>.json``, ``<key>.lock``), so a run id never becomes part of
    a path (B-FILE-2).

    Raises:
        CorruptRecordError: ``run_id`` is not a non-empty string of valid Unicode.
    """
    validate_run_id(run_id)
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()


def make_private_directory(path: str | os.PathLike[str]) -> str:
    """Create ``path`` and its missing parents with mode 0700; return it as an absolute path.

    Directories that already exist keep their permissions (B-FILE-1, B-SQL-1). On Windows the
    mode is ignored and the directory ACLs apply.

    Raises:
        ConfigError: ``path`` or one of its parents exists and is not a directory.
        OSError: a directory could not be created (permissions, read-only file system …).
    """
    absolute = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    current = absolute
    while not os.path.isdir(current):
        if os.path.lexists(current):
            if os.path.isdir(current):  # made by another process or thread in the meantime
                break
            hint = "Choose another path or move the file away"
            if _is_sqlite_database(current):
                url = f"sqlite://{current}" if current.startswith("/") else f"sqlite:{current}"
                hint = (
                    f"It is a SQLite database: open it as the SQLite store (--store {url}, or "
                    'backend = "sqlite" with path = ... in [store])'
                )
            raise ConfigError(
                f"{current} exists and is not a directory; a store needs a directory there. " + hint
            )
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise ConfigError(
                    f"{directory} exists and is not a directory; a store needs a directory there"
                ) from None
    return absolute


def _is_sqlite_database(path: str) -> bool:
    """True when the file at ``path`` starts with the SQLite database header."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _try_lock(fd: int, path: str) -> bool:
    """Try the OS lock on ``fd`` once; False when another open of the file holds it."""
    try:
        return filelock.lock_descriptor(fd, blocking=False)
    except OSError as exc:
        if exc.errno in _NO_LOCK_ERRNOS:
            raise DurableError(
                f"cannot take an OS file lock on {path} ({exc}); this platform or file system "
                "offers no exclusive file lock, and Durable never runs a session unlocked. Use "
                "a local file system with flock (POSIX) or LockFileEx (Windows) support"
            ) from exc
        raise


def _write_owner(fd: int) -> None:
    """Name this process in the lock file it has just locked (best effort: a lock file that
    cannot be written only leaves the owner unknown to others)."""
    data = owner_to_bytes(current_owner())
    # Emptied first, then written in one call: a reader sees nothing, a prefix without the
    # final newline, or the whole owner; never a mix with the previous owner's bytes.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        if hasattr(os, "pwrite"):
            os.pwrite(fd, data, 0)
        else:  # Windows
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, data)


def _read_owner(fd: int) -> RunOwner | None:
    """The owner named in a lock file another open holds, or ``None`` when unknown.

    An owner that has just locked may not have written its name yet, and the content may still
    name an earlier owner that died (its lock went with it): both are read again a few times,
    for at most about 50 ms. On Windows the holder's byte-range lock may make the content
    unreadable; the owner is then unknown.
    """
    owner = None
    for attempt in range(_OWNER_READS):
        if attempt:
            time.sleep(_POLL_SECONDS / 2)
        try:
            if hasattr(os, "pread"):
                data = os.pread(fd, _OWNER_MAX_BYTES, 0)
            else:  # Windows
                os.lseek(fd, 0, os.SEEK_SET)
                data = os.read(fd, _OWNER_MAX_BYTES)
        except OSError:
            return None
        owner = owner_from_bytes(data)
        if owner is not None and _may_be_alive(owner):
            return owner
    return None


def _may_be_alive(owner: RunOwner) -> bool:
    """False only when the owner is a process of this host that no longer exists."""
    if os.name != "posix" or owner.pid is None or owner.host != socket.gethostname():
        return True
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


def _owner_text(owner: RunOwner | None) -> str:
    if owner is None:
        return "an owner whose lock file names no live process (it may have just taken the run)"
    return owner.describe()


# errno values of an open for writing that a read-only open may get past: no write permission,
# a read-only file system.
_READ_ONLY_ERRNOS = frozenset(
    code for code in (errno.EACCES, errno.EPERM, getattr(errno, "EROFS", None)) if code is not None
)


def _open_lock_file(path: str) -> int:
    """Open (creating it 0600 if missing) the lock file for the lock and the owner's note; a
    lock file that exists but may not be written is opened read-only (the lock works the
    same)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_BINARY, 0o600)
    except OSError as exc:
        if exc.errno not in _READ_ONLY_ERRNOS:
            raise
        try:
            return os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_BINARY)
        except OSError:
            raise exc from None


def _close_descriptor(fd: int) -> None:
    # Closing the descriptor releases the OS lock (flock / LockFileEx) held through it.
    with contextlib.suppress(OSError):
        os.close(fd)


class RunLock:
    """An exclusive OS lock on one lock file, held by this process through an open descriptor.

    Create one with :meth:`RunLock.acquire` or :func:`acquire_run_lock`; give it up with
    :meth:`release` (idempotent, thread-safe) or a ``with`` block. See the module docstring for
    the exact semantics.

    Attributes:
        path: the absolute path of the lock file.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._mutex = threading.Lock()
        # Releases the lock if the object is dropped without release(); runs at most once.
        self._finalizer = weakref.finalize(self, _close_descriptor, fd)

    @classmethod
    def acquire(
        cls,
        path: str | os.PathLike[str],
        *,
        description: str = "",
        wait: float | None = 0.0,
    ) -> RunLock:
        """Lock the file at ``path`` (created 0600 if missing).

        Args:
            path: the lock file; its directory must exist. Never deleted.
            description: what the lock protects, for the error message
                (e.g. ``"run 'order-17'"``).
            wait: seconds to wait for another holder to let go. ``0`` (the default, and what
                run ownership always uses) never waits: a held lock raises BusyError at once.
                A positive number or ``None`` (no limit) polls every 10 ms; for short critical
                sections such as a database's initialisation.

        Returns:
            The held lock.

        Raises:
            BusyError: ``wait`` is 0 and another open of the file holds the lock, in this
                process or another one; its ``owner`` is what the lock file names (or
                ``None``).
            AcquireTimeoutError: ``wait`` is positive and the lock stayed held that long.
            DurableError: the platform or file system offers no OS file lock; nothing runs
                unlocked.
            OSError: the lock file cannot be opened or created (permissions, missing
                directory …).
        """
        lock_path = os.path.abspath(os.fspath(path))
        what = description or f"the lock file {lock_path}"
        deadline = None if wait is None else time.monotonic() + wait
        reopened = 0
        while True:
            fd = _open_lock_file(lock_path)
            owner: RunOwner | None = None
            try:
                locked = _try_lock(fd, lock_path)
                if locked:
                    # The lock counts only if the file we locked is still the one at the path:
                    # a lock file deleted or replaced between open and lock is another domain.
                    try:
                        at_path = os.stat(lock_path, follow_symlinks=False)
                    except FileNotFoundError:
                        at_path = None
                    if at_path is not None and os.path.samestat(os.fstat(fd), at_path):
                        _write_owner(fd)
                        return cls(lock_path, fd)
                elif wait == 0:
                    owner = _read_owner(fd)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
            if locked:
                reopened += 1
                if reopened >= _REOPEN_ATTEMPTS:
                    raise DurableError(
                        f"the lock file {lock_path} was deleted or replaced {reopened} times "
                        "while being locked; something removes lock files in this directory. "
                        "Stop it: lock files must stay"
                    )
                continue
            if wait == 0:
                raise BusyError(
                    f"{what} is owned by another session: {_owner_text(owner)}, which holds "
                    f"the OS lock on {lock_path}. Let that process finish or close its "
                    "session; never delete the lock file, that would create a second owner",
                    owner=owner,
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise AcquireTimeoutError(
                    f"{what} was still locked by another process after {wait} s (lock file "
                    f"{lock_path}); try again or allow a longer timeout"
                )
            time.sleep(_POLL_SECONDS)

    @property
    def held(self) -> bool:
        """True until :meth:`release` (or the finalizer) gave the lock up."""
        return self._fd is not None and self._finalizer.alive

    def release(self) -> None:
        """Empty the lock file (the owner's note), release the lock and close the descriptor;
        the lock file stays. Idempotent."""
        with self._mutex:
            fd, self._fd = self._fd, None
            if fd is None or not self._finalizer.alive:
                return
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # the owner's note goes with the ownership
            try:
                filelock.unlock_descriptor(fd)
            except OSError:
                pass  # closing the descriptor below releases the lock anyway
            finally:
                self._finalizer()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<RunLock {self.path} ({'held' if self.held else 'released'})>"


def acquire_run_lock(directory: str | os.PathLike[str], run_id: str) -> RunLock:
    """Lock ``<directory>/<sha256(run_id)>.lock`` exclusively, without waiting (B-FILE-2).

    This is the ownership lock of the file store; the SQLite store uses it for its
    ``.runlocks/`` directory. The directory must exist.

    Args:
        directory: the directory holding the lock files.
        run_id: the run id (non-empty, valid Unicode).

    Returns:
        The held :class:`RunLock`.

    Raises:
        BusyError: the run is owned by another session or process (at once).
        CorruptRecordError: ``run_id`` is not a valid run id.
        DurableError: the platform or file system offers no OS file lock.
        OSError: the lock file cannot be opened or created.
    """
    path = os.path.join(os.fspath(directory), run_key(run_id) + ".lock")
    return RunLock.acquire(path, description=f"run {run_id!r}")
