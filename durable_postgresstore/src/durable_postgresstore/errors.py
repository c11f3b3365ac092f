"""The PostgreSQL store's own error: a database operation failed (B-PG-3).

Every psycopg error crossing the store's public API is wrapped in :class:`PostgresStoreError`
with the DSN's secrets removed from the message; the psycopg exception is not chained, because
its text can quote pieces of the connection string. The SQLSTATE code is kept in
:attr:`PostgresStoreError.sqlstate`. It is a :class:`~durable_core.errors.StoreError`, so
code written for any store catches it as the medium's failure.
"""

from __future__ import annotations

from durable_core.errors import StoreError

__all__ = ["PostgresStoreError"]


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
