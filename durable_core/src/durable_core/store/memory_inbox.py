"""The memory store's inbox: posted messages and waiting notes in this process (X-INBOX-1).

:class:`MemoryInbox` is mixed into :class:`~durable_core.store.memory.MemoryStore`; it keeps
each run's messages in lists under the store's records lock (see
:class:`~durable_core.store.inbox.RunInbox`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from durable_core.errors import NotFoundError
from durable_core.store.checks import validate_run_id
from durable_core.store.inbox import InboxMessage, check_inbox_key, check_post, check_waiting_note

__all__ = ["MemoryInbox"]


class _Inbox:
    __slots__ = ("idempotency", "last", "messages")

    def __init__(self) -> None:
        self.messages: list[InboxMessage] = []
        self.last = 0
        self.idempotency: dict[str, int] = {}


class MemoryInbox:
    """Inbox messages and waiting notes kept in memory (RunInbox); a mixin of MemoryStore."""

    _records_lock: threading.Lock
    _records: dict[str, Any]

    def _inboxes(self) -> dict[tuple[str, str], _Inbox]:
        found = self.__dict__.get("_inbox_data")
        if found is None:
            found = self.__dict__["_inbox_data"] = {}
            self.__dict__["_waiting_data"] = {}
        return found  # type: ignore[no-any-return]

    def post_message(
        self, run_id: str, key: str, payload: bytes, idempotency_key: str | None = None
    ) -> int:
        """Keep a posted message (RunInbox.post_message)."""
        validate_run_id(run_id)
        check_post(key, payload, idempotency_key)
        with self._records_lock:
            if run_id not in self._records:
                raise NotFoundError(
                    f"cannot post to run {run_id!r}: this memory store has no record of it; "
                    "start the run first, or check the run id"
                )
            inbox = self._inboxes().setdefault((run_id, key), _Inbox())
            if idempotency_key is not None and idempotency_key in inbox.idempotency:
                return inbox.idempotency[idempotency_key]
            inbox.last += 1
            inbox.messages.append(InboxMessage(inbox.last, payload, idempotency_key, time.time()))
            if idempotency_key is not None:
                inbox.idempotency[idempotency_key] = inbox.last
            return inbox.last

    def read_messages(
        self, run_id: str, key: str, after: int = 0, limit: int | None = None
    ) -> list[InboxMessage]:
        """The kept messages after ``after`` (RunInbox.read_messages)."""
        check_inbox_key(key)
        with self._records_lock:
            inbox = self._inboxes().get((run_id, key))
            found = [] if inbox is None else [m for m in inbox.messages if m.sequence > after]
        return found if limit is None else found[:limit]

    def last_sequence(self, run_id: str, key: str) -> int:
        """The last sequence ever posted (RunInbox.last_sequence)."""
        with self._records_lock:
            inbox = self._inboxes().get((run_id, check_inbox_key(key)))
            return 0 if inbox is None else inbox.last

    def drop_messages(self, run_id: str, key: str, through: int) -> None:
        """Forget the messages up to ``through`` (RunInbox.drop_messages)."""
        with self._records_lock:
            inbox = self._inboxes().get((run_id, check_inbox_key(key)))
            if inbox is not None:
                inbox.messages = [m for m in inbox.messages if m.sequence > through]

    def inbox_keys(self, run_id: str) -> list[str]:
        """The inbox keys posted to (RunInbox.inbox_keys)."""
        with self._records_lock:
            return sorted(key for run, key in self._inboxes() if run == run_id)

    def set_waiting(self, run_id: str, note: str | None) -> None:
        """Keep or remove the run's waiting note (RunInbox.set_waiting)."""
        validate_run_id(run_id)
        check_waiting_note(note)
        with self._records_lock:
            self._inboxes()
            notes = self.__dict__["_waiting_data"]
            if note is None:
                notes.pop(run_id, None)
            else:
                notes[run_id] = note

    def waiting_note(self, run_id: str) -> str | None:
        """The run's waiting note, or ``None`` (RunInbox.waiting_note)."""
        with self._records_lock:
            self._inboxes()
            return self.__dict__["_waiting_data"].get(run_id)  # type: ignore[no-any-return]

    def waiting_notes(self) -> dict[str, str]:
        """Every waiting note, by run id (RunInbox.waiting_notes)."""
        with self._records_lock:
            self._inboxes()
            return dict(self.__dict__["_waiting_data"])

    def _forget_inbox(self, run_id: str) -> None:
        """Drop the run's messages and note (its record was deleted); under the records lock."""
        inboxes = self._inboxes()
        for found in [k for k in inboxes if k[0] == run_id]:
            del inboxes[found]
        self.__dict__["_waiting_data"].pop(run_id, None)
