"""Durable's SQLite store: many runs in one dedicated local database file (B-SQL-1, B-SQL-2).

Public API: :class:`SQLiteStore` and :class:`SQLiteSession`; :data:`SCHEMA_V1` (the exact DDL)
and :data:`SCHEMA_VERSION`. Registered as the backend ``sqlite`` (options ``path``, ``timeout``).
"""

from durable_sqlitestore.store import (
    BUSY_TIMEOUT_MS,
    SCHEMA_V1,
    SCHEMA_VERSION,
    SQLiteSession,
    SQLiteStore,
)

__all__ = ["BUSY_TIMEOUT_MS", "SCHEMA_V1", "SCHEMA_VERSION", "SQLiteSession", "SQLiteStore"]
