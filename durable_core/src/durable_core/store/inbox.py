"""Run inboxes: messages posted to a run from outside, and runs that wait (X-INBOX-1, X-WAIT).

An optional store capability, :class:`RunInbox`. A store that has it keeps, beside each run's
record and never inside it:

- per run and inbox key, the **posted messages**: opaque bytes (what the runtime encoded), each
  with its **inbox sequence** (1, 2, … per run and key, never reused, not even after the
  messages before it were dropped) and an optional **idempotency key**;
- per run, at most one **waiting note**: the JSON text a run that ended its process to wait
  leaves behind (what it waits for, until when), read by ``durable list`` and by whoever wakes
  waiting runs.

Posting needs no ownership of the run and never waits for its owner: the record, its revision
and its stored bytes stay exactly as they were. A post returns once the message is durable. A
run without a record refuses posts (:class:`~durable_core.errors.NotFoundError`).

The owner takes messages in through the run's record (the inbox source's ``Cursor``, see
:mod:`durable_core.durable.inbox`): the store only keeps and hands out the messages; which
ones were taken in is the record's business, never the store's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from durable_core.errors import ConfigError

__all__ = [
    "MAX_IDEMPOTENCY_KEY",
    "InboxMessage",
    "RunInbox",
    "check_inbox_key",
    "check_post",
    "check_waiting_note",
]

MAX_IDEMPOTENCY_KEY = 512
"""The longest idempotency key a post may carry, in characters."""

_KEY_NAME = re.compile(r"[^\x00-\x1f/\\]+")


@attrs.frozen
class InboxMessage:
    """One posted message, as :meth:`RunInbox.read_messages` returns it.

    Attributes:
        sequence: its inbox sequence (1, 2, … per run and inbox key).
        payload: the bytes posted (the runtime's encoding of the value).
        idempotency_key: the key the poster gave, or ``None``.
        posted_at: when it was posted, seconds since the epoch (the poster's clock).
    """

    sequence: int
    payload: bytes
    idempotency_key: str | None = None
    posted_at: float = 0.0


@runtime_checkable
class RunInbox(Protocol):
    """A store that keeps messages posted to its runs, and their waiting notes (optional).

    Every method may be called from any thread and any process, with or without a session
    of the run, while the run is owned or at rest; none takes the run's ownership or waits
    for it, and none changes the record.
    """

    def post_message(
        self, run_id: str, key: str, payload: bytes, idempotency_key: str | None = None
    ) -> int:
        """Keep ``payload`` as the next message of ``run_id``'s inbox ``key``; return its
        inbox sequence once it is durable.

        With an ``idempotency_key`` already posted to that inbox, nothing is written and the
        first post's sequence is returned. Two posters at once both succeed, with distinct
        sequences.

        Raises:
            NotFoundError: the run has no record (nothing kept).
            ConfigError: ``key`` or ``idempotency_key`` is not a valid name (empty, a control
                character, a slash, too long).
            DurableError / OSError: the medium failed; the message may or may not be kept (a
                post with an idempotency key may be repeated safely).
        """
        ...

    def read_messages(
        self, run_id: str, key: str, after: int = 0, limit: int | None = None
    ) -> list[InboxMessage]:
        """The kept messages of ``run_id``'s inbox ``key`` whose sequence is above ``after``,
        in sequence order, at most ``limit`` of them (all when ``None``)."""
        ...

    def last_sequence(self, run_id: str, key: str) -> int:
        """The sequence of the last message ever posted to the inbox (0: none), counting the
        dropped ones."""
        ...

    def drop_messages(self, run_id: str, key: str, through: int) -> None:
        """Forget the messages with a sequence up to ``through`` (taken in by the run); the
        sequence still goes on from the last one posted."""
        ...

    def inbox_keys(self, run_id: str) -> list[str]:
        """The inbox keys that have ever had a post for ``run_id``, sorted."""
        ...

    def set_waiting(self, run_id: str, note: str | None) -> None:
        """Keep ``note`` (one JSON object's text) as the run's waiting note; ``None`` removes
        it."""
        ...

    def waiting_note(self, run_id: str) -> str | None:
        """The run's waiting note, or ``None``."""
        ...

    def waiting_notes(self) -> dict[str, str]:
        """Every run's waiting note, by run id."""
        ...


def check_inbox_key(key: object) -> str:
    """Return ``key`` when it is a valid inbox key name (the stream key's name).

    Raises:
        ConfigError: not a non-empty string without control characters or slashes.
    """
    if not isinstance(key, str) or not _KEY_NAME.fullmatch(key) or len(key) > 256:
        raise ConfigError(
            f"inbox key {key!r}: expected the name of an inbox stream key (a non-empty "
            "string of at most 256 characters, without slashes or control characters)"
        )
    return key


def check_post(key: object, payload: object, idempotency_key: object) -> None:
    """The checks every store makes before it keeps a post (X-INBOX-1).

    Raises:
        ConfigError: an invalid key name or idempotency key.
        TypeError: ``payload`` is not bytes.
    """
    check_inbox_key(key)
    if not isinstance(payload, bytes):
        raise TypeError(f"an inbox message's payload must be bytes, got {type(payload).__name__}")
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not idempotency_key
        or len(idempotency_key) > MAX_IDEMPOTENCY_KEY
        or "\x00" in idempotency_key
    ):
        raise ConfigError(
            f"idempotency key {idempotency_key!r}: expected a non-empty string of at most "
            f"{MAX_IDEMPOTENCY_KEY} characters without NUL"
        )


def check_waiting_note(note: object) -> None:
    """Refuse a waiting note that is not one JSON object's text (``None`` passes).

    Raises:
        ValueError: not a JSON object's text.
    """
    if note is None:
        return
    if not isinstance(note, str):
        raise ValueError(f"a waiting note must be JSON text, got {type(note).__name__}")
    try:
        parsed = json.loads(note)
    except ValueError as exc:
        raise ValueError(f"a waiting note must be JSON text: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("a waiting note must be one JSON object")


def sequences(messages: Sequence[InboxMessage]) -> list[int]:
    """The sequences of ``messages``, in order (a helper for tests and tools)."""
    return [message.sequence for message in messages]
