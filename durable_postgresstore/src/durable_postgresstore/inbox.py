"""The PostgreSQL store's inbox: a row per posted message, in one short transaction (X-INBOX-1).

``pulse_durable.inbox`` holds the messages (by ``run_key``, inbox key and ``seq``),
``pulse_durable.inbox_last`` each inbox's last sequence posted and last one dropped,
``pulse_durable.waiting`` the waiting notes (schema version 6, see
:mod:`durable_postgresstore.schema`).

A post is one transaction on a connection of the store's set: raise the inbox's last sequence
with an upsert (its row lock orders concurrent posters of that inbox, on any host), look the
idempotency key up (a repeated key rolls back and returns the first sequence), check that the
run has a row, insert the message. It never takes the run's advisory lock nor touches its row,
so it never waits for the owner, nor the owner for it.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import psycopg

from durable_core.errors import NotFoundError
from durable_core.store import validate_run_id
from durable_core.store.inbox import InboxMessage, check_inbox_key, check_post, check_waiting_note
from durable_postgresstore.schema import SCHEMA

__all__ = ["PostgresInbox"]

BUMP = (
    f"INSERT INTO {SCHEMA}.inbox_last AS l (run_key, inbox, last, dropped) "
    "VALUES (%s, %s, 1, 0) ON CONFLICT (run_key, inbox) DO UPDATE SET last = l.last + 1 "
    "RETURNING l.last"
)
RUN_EXISTS = f"SELECT 1 FROM {SCHEMA}.runs WHERE run_key = %s"
IDEMPOTENT = (
    f"SELECT seq FROM {SCHEMA}.inbox WHERE run_key = %s AND inbox = %s AND idempotency_key = %s"
)
POST = (
    f"INSERT INTO {SCHEMA}.inbox (run_key, inbox, seq, idempotency_key, payload, posted_at) "
    "VALUES (%s, %s, %s, %s, %b, %s)"
)
READ = (
    f"SELECT seq, payload, idempotency_key, posted_at FROM {SCHEMA}.inbox i "
    "WHERE run_key = %s AND inbox = %s AND seq > %s AND seq > coalesce(("
    f"SELECT dropped FROM {SCHEMA}.inbox_last l WHERE l.run_key = i.run_key "
    "AND l.inbox = i.inbox), 0) ORDER BY seq LIMIT %s"
)
LAST = f"SELECT last FROM {SCHEMA}.inbox_last WHERE run_key = %s AND inbox = %s"
DROP = (
    f"DELETE FROM {SCHEMA}.inbox WHERE run_key = %s AND inbox = %s AND seq <= %s "
    "AND idempotency_key IS NULL"
)
EMPTY = (
    f"UPDATE {SCHEMA}.inbox SET payload = ''::bytea WHERE run_key = %s AND inbox = %s "
    "AND seq <= %s AND idempotency_key IS NOT NULL"
)
DROPPED = (
    f"UPDATE {SCHEMA}.inbox_last SET dropped = greatest(dropped, %s) "
    "WHERE run_key = %s AND inbox = %s"
)
KEYS = f"SELECT inbox FROM {SCHEMA}.inbox_last WHERE run_key = %s ORDER BY inbox"
SET_WAITING = (
    f"INSERT INTO {SCHEMA}.waiting (run_key, run_id, note) VALUES (%s, %b, %s) "
    "ON CONFLICT (run_key) DO UPDATE SET note = excluded.note"
)
CLEAR_WAITING = f"DELETE FROM {SCHEMA}.waiting WHERE run_key = %s"
WAITING = f"SELECT convert_from(run_id, 'UTF8'), note FROM {SCHEMA}.waiting"
NOTE = f"SELECT note FROM {SCHEMA}.waiting WHERE run_key = %s"
NOTIFY = "SELECT pg_catalog.pg_notify('durable_inbox', %s)"


def _key(run_id: str) -> bytes:
    return hashlib.sha256(run_id.encode("utf-8")).digest()


class _Repeated(Exception):
    def __init__(self, sequence: int) -> None:
        self.sequence = sequence


class PostgresInbox:
    """Inbox messages and waiting notes as rows (RunInbox); a mixin of PostgresStore."""

    _on_link: Any  # PostgresStore's
    acquire_timeout: float
    _operation_timeout: float | None

    def _inbox_call(self, doing: str, fn: Any) -> Any:
        return self._on_link(
            doing,
            fn,
            capacity_timeout=self.acquire_timeout,
            operation_timeout=self._operation_timeout,
        )

    def post_message(
        self, run_id: str, key: str, payload: bytes, idempotency_key: str | None = None
    ) -> int:
        """Keep a posted message as a row of ``pulse_durable.inbox`` (RunInbox.post_message).

        Raises:
            NotFoundError: the run has no row.
            ConfigError: an invalid key name or idempotency key.
            PostgresStoreError: the transaction failed (nothing kept, unless the commit's
                answer was lost: then post again with the same idempotency key).
        """
        validate_run_id(run_id)
        check_post(key, payload, idempotency_key)
        run_key = _key(run_id)

        def post(conn: psycopg.Connection[Any]) -> int:
            try:
                with conn.transaction():
                    if conn.execute(RUN_EXISTS, [run_key]).fetchone() is None:
                        raise NotFoundError(
                            f"cannot post to run {run_id!r}: the PostgreSQL store has no "
                            "record of it; start the run first, or check the run id and the "
                            "store"
                        )
                    sequence = int(conn.execute(BUMP, [run_key, key]).fetchone()[0])
                    if idempotency_key is not None:
                        row = conn.execute(IDEMPOTENT, [run_key, key, idempotency_key]).fetchone()
                        if row is not None:
                            raise _Repeated(int(row[0]))  # rolls the bump back
                    conn.execute(
                        POST, [run_key, key, sequence, idempotency_key, payload, time.time()]
                    )
                    conn.execute(NOTIFY, [run_key.hex()])
                    return sequence
            except _Repeated as repeated:
                return repeated.sequence

        return int(self._inbox_call("posting to a run's inbox", post))

    def read_messages(
        self, run_id: str, key: str, after: int = 0, limit: int | None = None
    ) -> list[InboxMessage]:
        """The kept messages after ``after``, in order (RunInbox.read_messages)."""
        check_inbox_key(key)
        rows = self._inbox_call(
            "reading a run's inbox",
            lambda conn: conn.execute(READ, [_key(run_id), key, after, limit]).fetchall(),
        )
        return [InboxMessage(int(s), bytes(p), i, float(t)) for s, p, i, t in rows]

    def last_sequence(self, run_id: str, key: str) -> int:
        """The last sequence ever posted (RunInbox.last_sequence)."""
        check_inbox_key(key)
        row = self._inbox_call(
            "reading a run's inbox",
            lambda conn: conn.execute(LAST, [_key(run_id), key]).fetchone(),
        )
        return 0 if row is None else int(row[0])

    def drop_messages(self, run_id: str, key: str, through: int) -> None:
        """Delete the rows up to ``through``; those with an idempotency key keep their row,
        emptied (RunInbox.drop_messages)."""
        check_inbox_key(key)
        run_key = _key(run_id)

        def drop(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(DROP, [run_key, key, through])
                conn.execute(EMPTY, [run_key, key, through])
                conn.execute(DROPPED, [through, run_key, key])

        self._inbox_call("dropping taken-in messages", drop)

    def inbox_keys(self, run_id: str) -> list[str]:
        """The run's inbox keys (RunInbox.inbox_keys)."""
        rows = self._inbox_call(
            "reading a run's inboxes",
            lambda conn: conn.execute(KEYS, [_key(run_id)]).fetchall(),
        )
        return [row[0] for row in rows]

    def set_waiting(self, run_id: str, note: str | None) -> None:
        """Keep or remove the run's waiting note (RunInbox.set_waiting)."""
        validate_run_id(run_id)
        check_waiting_note(note)
        run_key = _key(run_id)
        if note is None:
            self._inbox_call(
                "clearing a waiting note", lambda conn: conn.execute(CLEAR_WAITING, [run_key])
            )
        else:
            self._inbox_call(
                "saving a waiting note",
                lambda conn: conn.execute(SET_WAITING, [run_key, run_id.encode("utf-8"), note]),
            )

    def watch_posts(self, run_id: str, on_post: Any) -> Any:
        """Call ``on_post()`` (from another thread) soon after a message is posted to
        ``run_id``, from any host: ``LISTEN durable_inbox`` on a connection of its own, in a
        daemon thread, until the returned function is called. The owner's intake then takes
        the message in at once instead of at its next poll."""
        import threading

        payload = _key(run_id).hex()
        conn = self._connect()  # type: ignore[attr-defined]
        conn.execute("LISTEN durable_inbox")
        stop = threading.Event()

        def listen() -> None:
            try:
                while not stop.is_set():
                    for note in conn.notifies(timeout=0.2):
                        if note.payload == payload:
                            on_post()
            except psycopg.Error:
                pass  # the intake polls anyway

        thread = threading.Thread(target=listen, name="durable-inbox-listen", daemon=True)
        thread.start()

        def stop_listening() -> None:
            stop.set()
            thread.join()
            conn.close()

        return stop_listening

    def waiting_note(self, run_id: str) -> str | None:
        """The run's waiting note, or ``None`` (RunInbox.waiting_note)."""
        row = self._inbox_call(
            "reading a waiting note",
            lambda conn: conn.execute(NOTE, [_key(run_id)]).fetchone(),
        )
        return None if row is None else str(row[0])

    def waiting_notes(self) -> dict[str, str]:
        """Every waiting note, by run id (RunInbox.waiting_notes)."""
        rows = self._inbox_call(
            "reading waiting notes", lambda conn: conn.execute(WAITING).fetchall()
        )
        return {run_id: note for run_id, note in rows}
