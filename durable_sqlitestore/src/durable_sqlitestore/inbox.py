"""The SQLite store's inbox: a row per posted message, in one short transaction (X-INBOX-1).

``durable_inbox`` holds the messages (run id, inbox key, sequence, idempotency key, payload,
post time), ``durable_inbox_last`` the last sequence of each inbox (so that a sequence is
never used again after the messages before it were dropped), ``durable_waiting`` the waiting
notes (see :mod:`durable_sqlitestore.schema`, v5).

A post is one ``BEGIN IMMEDIATE`` transaction on a connection of its own, committed with
``synchronous = FULL``: check that the run has a row, look the idempotency key up, raise the
inbox's last sequence, insert the message. It never takes the run's lock; like every writer
of an SQLite database it holds the database's write lock for the length of that transaction
(the owner's save waits at most that long, within the busy timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from typing import Any

from durable_core.errors import NotFoundError
from durable_core.store import validate_run_id
from durable_core.store.inbox import InboxMessage, check_inbox_key, check_post, check_waiting_note
from durable_sqlitestore.schema import INBOX_LAST_TABLE, INBOX_TABLE, RUNS_TABLE, WAITING_TABLE

__all__ = ["SQLiteInbox"]


class SQLiteInbox:
    """Inbox messages and waiting notes as rows (RunInbox); a mixin of SQLiteStore."""

    _path: str
    _connect: Any  # SQLiteStore's
    _check_open: Any  # BaseStore's

    def _inbox_connection(self) -> tuple[threading.Lock, sqlite3.Connection]:
        state: dict[str, Any] = self.__dict__.setdefault("_inbox_state", {})
        lock = state.setdefault("lock", threading.Lock())
        with lock:
            connection = state.get("connection")
            if connection is None:
                connection = self._connect(configure=False)
                connection.execute("PRAGMA synchronous = FULL")
                state["connection"] = connection
        return lock, connection

    def _close_inbox(self) -> None:
        state = self.__dict__.get("_inbox_state")
        if state and state.get("connection") is not None:
            with state["lock"]:
                state["connection"].close()
                state["connection"] = None

    def _transaction(self, work: Any) -> Any:
        self._check_open()
        lock, connection = self._inbox_connection()
        with lock:
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = work(connection)
                connection.execute("COMMIT")
                return result
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise

    def post_message(
        self, run_id: str, key: str, payload: bytes, idempotency_key: str | None = None
    ) -> int:
        """Keep a posted message as a row of ``durable_inbox`` (RunInbox.post_message).

        Raises:
            NotFoundError: the run has no row.
            ConfigError: an invalid key name or idempotency key.
            sqlite3.Error: the transaction failed (rolled back: nothing kept).
        """
        validate_run_id(run_id)
        check_post(key, payload, idempotency_key)

        def post(connection: sqlite3.Connection) -> int:
            if (
                connection.execute(
                    f"SELECT 1 FROM {RUNS_TABLE} WHERE run_id = ?", (run_id,)
                ).fetchone()
                is None
            ):
                raise NotFoundError(
                    f"cannot post to run {run_id!r}: the SQLite database {self._path} has no "
                    "record of it; start the run first, or check the run id and the store"
                )
            if idempotency_key is not None:
                row = connection.execute(
                    f"SELECT sequence FROM {INBOX_TABLE} WHERE run_id = ? AND key = ? "
                    "AND idempotency_key = ?",
                    (run_id, key, idempotency_key),
                ).fetchone()
                if row is not None:
                    return int(row[0])
            row = connection.execute(
                f"SELECT last FROM {INBOX_LAST_TABLE} WHERE run_id = ? AND key = ?",
                (run_id, key),
            ).fetchone()
            sequence = 1 if row is None else int(row[0]) + 1
            if row is None:
                connection.execute(
                    f"INSERT INTO {INBOX_LAST_TABLE} (run_id, key, last) VALUES (?, ?, ?)",
                    (run_id, key, sequence),
                )
            else:
                connection.execute(
                    f"UPDATE {INBOX_LAST_TABLE} SET last = ? WHERE run_id = ? AND key = ?",
                    (sequence, run_id, key),
                )
            connection.execute(
                f"INSERT INTO {INBOX_TABLE} (run_id, key, sequence, idempotency_key, payload, "
                "posted_at) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, key, sequence, idempotency_key, payload, time.time()),
            )
            return sequence

        return int(self._transaction(post))

    def _select(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        self._check_open()
        lock, connection = self._inbox_connection()
        with lock:
            return connection.execute(sql, parameters).fetchall()

    def read_messages(
        self, run_id: str, key: str, after: int = 0, limit: int | None = None
    ) -> list[InboxMessage]:
        """The kept messages after ``after``, in order (RunInbox.read_messages)."""
        check_inbox_key(key)
        rows = self._select(
            f"SELECT sequence, payload, idempotency_key, posted_at FROM {INBOX_TABLE} "
            "WHERE run_id = ? AND key = ? AND sequence > ? AND sequence > coalesce(("
            f"SELECT dropped FROM {INBOX_LAST_TABLE} WHERE run_id = ? AND key = ?), 0) "
            "ORDER BY sequence LIMIT ?",
            (run_id, key, after, run_id, key, -1 if limit is None else limit),
        )
        return [InboxMessage(int(s), bytes(p), i, float(t)) for s, p, i, t in rows]

    def last_sequence(self, run_id: str, key: str) -> int:
        """The last sequence ever posted (RunInbox.last_sequence)."""
        rows = self._select(
            f"SELECT last FROM {INBOX_LAST_TABLE} WHERE run_id = ? AND key = ?",
            (run_id, check_inbox_key(key)),
        )
        return int(rows[0][0]) if rows else 0

    def drop_messages(self, run_id: str, key: str, through: int) -> None:
        """Delete the rows up to ``through``; those with an idempotency key keep their row,
        emptied, so that the key stays known (RunInbox.drop_messages)."""
        check_inbox_key(key)

        def drop(connection: sqlite3.Connection) -> None:
            where = "WHERE run_id = ? AND key = ? AND sequence <= ?"
            connection.execute(
                f"DELETE FROM {INBOX_TABLE} {where} AND idempotency_key IS NULL",
                (run_id, key, through),
            )
            connection.execute(
                f"UPDATE {INBOX_TABLE} SET payload = x'' {where} AND idempotency_key IS NOT NULL",
                (run_id, key, through),
            )
            connection.execute(
                f"UPDATE {INBOX_LAST_TABLE} SET dropped = max(dropped, ?) "
                "WHERE run_id = ? AND key = ?",
                (through, run_id, key),
            )

        self._transaction(drop)

    def inbox_keys(self, run_id: str) -> list[str]:
        """The run's inbox keys (RunInbox.inbox_keys)."""
        rows = self._select(
            f"SELECT key FROM {INBOX_LAST_TABLE} WHERE run_id = ? ORDER BY key", (run_id,)
        )
        return [row[0] for row in rows]

    def set_waiting(self, run_id: str, note: str | None) -> None:
        """Keep or remove the run's waiting note (RunInbox.set_waiting)."""
        validate_run_id(run_id)
        check_waiting_note(note)
        if note is None:
            self._transaction(
                lambda c: c.execute(f"DELETE FROM {WAITING_TABLE} WHERE run_id = ?", (run_id,))
            )
        else:
            self._transaction(
                lambda c: c.execute(
                    f"INSERT OR REPLACE INTO {WAITING_TABLE} (run_id, note) VALUES (?, ?)",
                    (run_id, note),
                )
            )

    def waiting_note(self, run_id: str) -> str | None:
        """The run's waiting note, or ``None`` (RunInbox.waiting_note)."""
        rows = self._select(f"SELECT note FROM {WAITING_TABLE} WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def waiting_notes(self) -> dict[str, str]:
        """Every waiting note, by run id (RunInbox.waiting_notes)."""
        return dict(self._select(f"SELECT run_id, note FROM {WAITING_TABLE}", ()))


def forget_inbox(connection: sqlite3.Connection, run_id: str) -> None:
    """Delete the run's messages, last sequences and waiting note, in the caller's transaction
    (the run's row is being deleted)."""
    for table in (INBOX_TABLE, INBOX_LAST_TABLE, WAITING_TABLE):
        connection.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
