"""The file store's inbox: one file per posted message, created exclusively and synced (X-INBOX-1).

Layout, beside the run's record (``<key>`` is the SHA-256 hex of the run id, ``<inbox>`` the
SHA-256 hex of the inbox key's name):

- ``<key>.inbox/<inbox>/``: one inbox of the run;
  - ``name``: the inbox key's name (UTF-8);
  - ``<sequence>.msg`` (20 decimal digits): one message; its first line is a JSON header
    (sequence, idempotency key, post time), the rest is the payload;
  - ``idem-<sha256>``: a second name (a hard link) of the message posted with that
    idempotency key; it stays when the message is dropped, so the key stays known;
  - ``last``: the last sequence posted (a hint; the messages on disk are the truth);
  - ``post.lock``: posters take it (``filelock``) one at a time; the run's owner never does;
- ``<key>.waiting``: the run's waiting note (replaced atomically).

Posters never touch ``<key>.lock`` or the record. One poster at a time holds ``post.lock``: it
finds the next sequence (the ``last`` hint, then the first ``<sequence>.msg`` that does not
exist), writes the message to a temp file created exclusively and syncs it, links it as
``<sequence>.msg`` and ``idem-<sha256>``, and syncs the directory once. A poster killed between
the two links leaves only the newest message without its second name; the next poster repairs
that first, so a repeated idempotency key is always found. The newest message file is never
dropped, so a sequence is never reused.

A reader lists the directory only to find the first and the last message after its cursor, and
reads the messages between them by name: a listing made while a poster links a message may
leave that one out and still show a later one (a directory is not listed in creation order).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time

import filelock

from durable_core.errors import NotFoundError
from durable_core.store import validate_run_id
from durable_core.store.inbox import InboxMessage, check_inbox_key, check_post, check_waiting_note
from durable_core.store.locks import make_private_directory, run_key

__all__ = ["FileInbox"]

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_SYNC_DIRECTORY = os.name != "nt"
_POST_LOCK_TIMEOUT = 60.0


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _message_name(sequence: int) -> str:
    return f"{sequence:020d}.msg"


def _sync_directory(path: str) -> None:
    if not _SYNC_DIRECTORY:
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` exclusively with ``data`` and sync it (FileExistsError when there)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: str, data: bytes, sync: bool) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename."""
    temp = f"{path}-{secrets.randbelow(2**32)}.tmp"
    _write_new(temp, data) if sync else _write_plain(temp, data)
    os.replace(temp, path)


def _write_plain(path: str, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)


def _read_message(path: str, sequence: int) -> InboxMessage | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    header, _, payload = data.partition(b"\n")
    meta = json.loads(header)
    return InboxMessage(sequence, payload, meta.get("idempotency_key"), meta.get("posted_at", 0.0))


class FileInbox:
    """Inbox messages and waiting notes as files (RunInbox); a mixin of FileStore."""

    _directory: str

    def inbox_path(self, run_id: str, key: str) -> str:
        """The directory of ``run_id``'s inbox ``key``."""
        return os.path.join(self._directory, run_key(run_id) + ".inbox", _digest(key))

    def waiting_path(self, run_id: str) -> str:
        """The path of ``run_id``'s waiting note, ``<directory>/<key>.waiting``."""
        return os.path.join(self._directory, run_key(run_id) + ".waiting")

    def _has_record(self, run_id: str) -> bool:
        base = os.path.join(self._directory, run_key(run_id))
        return os.path.lexists(base + ".json") or os.path.lexists(base + ".journal")

    def post_message(
        self, run_id: str, key: str, payload: bytes, idempotency_key: str | None = None
    ) -> int:
        """Keep a posted message as ``<sequence>.msg`` (RunInbox.post_message).

        Raises:
            NotFoundError: the run has no record file.
            ConfigError: an invalid key name or idempotency key.
            OSError: the file could not be written.
        """
        validate_run_id(run_id)
        check_post(key, payload, idempotency_key)
        if not self._has_record(run_id):
            raise NotFoundError(
                f"cannot post to run {run_id!r}: there is no record of it in {self._directory}; "
                "start the run first, or check the run id and the store"
            )
        folder = self.inbox_path(run_id, key)
        if not os.path.isdir(folder):
            make_private_directory(folder)
            _sync_directory(os.path.dirname(folder))
        with filelock.FileLock(os.path.join(folder, "post.lock"), timeout=_POST_LOCK_TIMEOUT):
            if not os.path.exists(os.path.join(folder, "name")):  # the inbox's first post
                _replace(os.path.join(folder, "name"), key.encode("utf-8"), sync=True)
            last = self._repair(folder)
            if idempotency_key is not None:
                known = self._idempotent(folder, idempotency_key)
                if known is not None:
                    return known
            sequence = last + 1
            while os.path.lexists(os.path.join(folder, _message_name(sequence))):
                sequence += 1  # a hint behind a crashed poster's message
            header = json.dumps(
                {
                    "idempotency_key": idempotency_key,
                    "posted_at": time.time(),
                    "sequence": sequence,
                },
                ensure_ascii=True,
            ).encode("ascii")
            temp = os.path.join(folder, f"post-{secrets.randbelow(2**32)}.tmp")
            _write_new(temp, header + b"\n" + payload)  # synced before any name points to it
            try:
                os.link(temp, os.path.join(folder, _message_name(sequence)))
                if idempotency_key is not None:
                    self._link_idempotency(folder, temp, idempotency_key)
            finally:
                os.unlink(temp)
            _sync_directory(folder)  # both names at once
            _replace(os.path.join(folder, "last"), str(sequence).encode("ascii"), sync=False)
            return sequence

    def _link_idempotency(self, folder: str, message: str, idempotency_key: str) -> None:
        """Give the message file a second name, ``idem-<sha256>`` (replacing a stale one)."""
        name = os.path.join(folder, "idem-" + _digest(idempotency_key))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        os.link(message, name)

    def _last(self, folder: str) -> int:
        try:
            with open(os.path.join(folder, "last"), "rb") as f:
                last = int(f.read() or b"0")
        except (FileNotFoundError, ValueError):
            last = 0
        if last == 0:
            with os.scandir(folder) as entries:
                found = [int(e.name[:-4]) for e in entries if e.name.endswith(".msg")]
            last = max(found, default=0)
        while os.path.lexists(os.path.join(folder, _message_name(last + 1))):
            last += 1
        return last

    def _repair(self, folder: str) -> int:
        """The last sequence; the newest message gets its idempotency name if a crash left it
        without one, and temp files of killed posters go (under ``post.lock``)."""
        with os.scandir(folder) as entries:
            stale = [e.path for e in entries if e.name.endswith(".tmp")]
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        last = self._last(folder)
        if last:
            newest = _read_message(os.path.join(folder, _message_name(last)), last)
            if (
                newest is not None
                and newest.idempotency_key is not None
                and self._idempotent(folder, newest.idempotency_key) is None
            ):
                self._link_idempotency(
                    folder, os.path.join(folder, _message_name(last)), newest.idempotency_key
                )
                _sync_directory(folder)
        return last

    def _idempotent(self, folder: str, idempotency_key: str) -> int | None:
        """The sequence of the message posted with ``idempotency_key`` (its second name)."""
        try:
            with open(os.path.join(folder, "idem-" + _digest(idempotency_key)), "rb") as f:
                header = f.readline()
            return int(json.loads(header)["sequence"])
        except (FileNotFoundError, ValueError, KeyError):
            return None

    def read_messages(
        self, run_id: str, key: str, after: int = 0, limit: int | None = None
    ) -> list[InboxMessage]:
        """The kept messages after ``after``, in order (RunInbox.read_messages)."""
        check_inbox_key(key)
        folder = self.inbox_path(run_id, key)
        try:
            with os.scandir(folder) as entries:
                found = [
                    int(e.name[:-4])
                    for e in entries
                    if e.name.endswith(".msg") and e.name[:-4].isdigit()
                ]
        except FileNotFoundError:
            return []
        later = [sequence for sequence in found if sequence > after]
        if not later:
            return []
        # A listing made while a poster links a message may leave it out and still show a
        # later one (a directory is not listed in creation order). Posters link in sequence
        # order, one at a time, so every message below a listed one was linked before it: the
        # messages are read by name, from the first one on disk after ``after`` up to the last
        # one listed. Below that first one, only dropped messages are missing.
        first = min(later)
        while first - 1 > after and os.path.lexists(os.path.join(folder, _message_name(first - 1))):
            first -= 1
        messages = []
        for sequence in range(first, max(later) + 1):
            if limit is not None and len(messages) >= limit:
                break
            message = _read_message(os.path.join(folder, _message_name(sequence)), sequence)
            if message is not None:  # None: dropped meanwhile
                messages.append(message)
        return messages

    def last_sequence(self, run_id: str, key: str) -> int:
        """The last sequence ever posted (RunInbox.last_sequence)."""
        folder = self.inbox_path(run_id, check_inbox_key(key))
        if not os.path.isdir(folder):
            return 0
        return self._last(folder)

    def drop_messages(self, run_id: str, key: str, through: int) -> None:
        """Remove the message files up to ``through``, except the newest one, which keeps the
        sequence going (RunInbox.drop_messages)."""
        folder = self.inbox_path(run_id, check_inbox_key(key))
        if not os.path.isdir(folder):
            return
        last = self._last(folder)
        with os.scandir(folder) as entries:
            names = [e.name for e in entries if e.name.endswith(".msg") and e.name[:-4].isdigit()]
        for name in names:
            sequence = int(name[:-4])
            if sequence <= through and sequence < last:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))

    def inbox_keys(self, run_id: str) -> list[str]:
        """The names of the run's inboxes (RunInbox.inbox_keys)."""
        base = os.path.join(self._directory, run_key(run_id) + ".inbox")
        try:
            with os.scandir(base) as entries:
                folders = [e.path for e in entries if e.is_dir()]
        except FileNotFoundError:
            return []
        names = []
        for folder in folders:
            with (
                contextlib.suppress(FileNotFoundError),
                open(os.path.join(folder, "name"), "rb") as f,
            ):
                names.append(f.read().decode("utf-8"))
        return sorted(names)

    def set_waiting(self, run_id: str, note: str | None) -> None:
        """Replace or remove ``<key>.waiting`` (RunInbox.set_waiting)."""
        validate_run_id(run_id)
        check_waiting_note(note)
        path = self.waiting_path(run_id)
        if note is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        _replace(path, note.encode("utf-8"), sync=True)
        _sync_directory(self._directory)

    def waiting_note(self, run_id: str) -> str | None:
        """``<key>.waiting``'s text, or ``None`` (RunInbox.waiting_note)."""
        try:
            with open(self.waiting_path(run_id), "rb") as f:
                return f.read().decode("utf-8")
        except FileNotFoundError:
            return None

    def waiting_notes(self) -> dict[str, str]:
        """Every waiting note, by run id (read from the note itself) (RunInbox.waiting_notes)."""
        notes: dict[str, str] = {}
        with os.scandir(self._directory) as entries:
            paths = [e.path for e in entries if e.name.endswith(".waiting")]
        for path in paths:
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8")
                run_id = json.loads(text)["run_id"]
                notes[run_id] = text
        return notes

    def _forget_inbox(self, run_id: str) -> None:
        """Remove the run's inboxes and waiting note (its record was deleted)."""
        import shutil

        shutil.rmtree(os.path.join(self._directory, run_key(run_id) + ".inbox"), ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.waiting_path(run_id))
