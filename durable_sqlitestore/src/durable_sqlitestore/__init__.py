"""Durable's SQLite store: many runs in one dedicated local database file (B-SQL-1, B-SQL-2).

Public API: :class:`SQLiteStore` and :class:`SQLiteSession`; :data:`SCHEMA_V1` and
:data:`DELTAS_V2` (the exact DDL of its two tables), :data:`SCHEMA_VERSION` and
:data:`FOLD_RATIO`. Registered as the backend ``sqlite`` (options ``path``, ``timeout``).
"""

from durable_sqlitestore.store import (
    BUSY_TIMEOUT_MS,
    DELTAS_V2,
    FOLD_RATIO,
    SCHEMA_V1,
    SCHEMA_VERSION,
    SQLiteSession,
    SQLiteStore,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DELTAS_V2",
    "FOLD_RATIO",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "SQLiteSession",
    "SQLiteStore",
]
