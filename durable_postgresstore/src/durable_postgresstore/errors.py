"""The PostgreSQL store's own errors: a database operation failed (B-PG-3), and a run's row was
rewritten by someone other than the session that owns it (X-HOST).

Every psycopg error crossing the store's public API is wrapped in :class:`PostgresStoreError`
with the DSN's secrets removed from the message; the psycopg exception is not chained, because
its text can quote pieces of the connection string. The SQLSTATE code is kept in
:attr:`PostgresStoreError.sqlstate`. It is a :class:`~durable_core.errors.StoreError`, so
code written for any store catches it as the medium's failure.

:class:`ForeignWriteError` is a :class:`~durable_core.errors.ConflictError`: a save refused
because the row changed under its owner, with nothing written.
"""

from __future__ import annotations

from durable_core.errors import ConflictError, StoreError

__all__ = ["ForeignWriteError", "PostgresStoreError"]


class PostgresStoreError(StoreError):
    """A PostgreSQL operation of the store failed (connection, privilege, I/O …).

    Raised by the store's constructor, ``acquire``, ``list_runs`` and by a session's ``load``
    and ``save``. When a write (``save``, a fold on ``close``, ``delete``) lost its connection
    while the statement ran, it may or may not have been committed (R-RT-2): ``uncertain`` is
    set; load again before deciding anything.

    A session whose connection was lost (server restart, ``pg_terminate_backend``, network
    failure, an operation that ran past ``operation_timeout``) has lost its advisory lock with
    it: that ``load``/``save`` raises this error with ``connection_lost`` set, and every later
    call raises it again. The session never reconnects; close it and acquire the run anew.

    Attributes:
        sqlstate: the PostgreSQL SQLSTATE code when the server sent one (e.g. ``"42501"``).
        connection_lost: the session's connection (and so its ownership) is gone.
        uncertain: the failed write may or may not have been committed (see
            :class:`~durable_core.errors.StoreError`).
    """

    def __init__(
        self,
        message: str,
        *,
        sqlstate: str | None = None,
        connection_lost: bool = False,
        uncertain: bool = False,
    ) -> None:
        super().__init__(message, uncertain=uncertain)
        self.sqlstate = sqlstate
        self.connection_lost = connection_lost


class ForeignWriteError(ConflictError):
    """A save was refused: the run's row was rewritten since this session last loaded or saved
    it, by something other than this session (X-HOST).

    The row still has the revision the session expects, but its row version (PostgreSQL's
    ``xmin``) is not the one the session's last load or save left: an ``UPDATE`` made outside
    Durable, a restore of the table, or a writer that bypassed the run's advisory lock. Nothing
    was written; the row is as that other writer left it.

    Attributes:
        revision: the revision the session expected, still in the row's ``revision`` column.
    """

    def __init__(self, message: str, *, revision: int) -> None:
        super().__init__(message)
        self.revision = revision

    def __reduce__(self) -> tuple[object, ...]:  # keep ``revision`` across processes (pickle)
        return (_rebuild_foreign_write, (str(self), self.revision))


def _rebuild_foreign_write(message: str, revision: int) -> ForeignWriteError:
    return ForeignWriteError(message, revision=revision)
