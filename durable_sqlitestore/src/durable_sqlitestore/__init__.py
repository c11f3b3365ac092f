"""Durable's SQLite store: many runs in one dedicated local database file (B-SQL-1, B-SQL-2).

Public API: :class:`SQLiteStore` and :class:`SQLiteSession`; :data:`RUNS_V3`,
:data:`DELTAS_V3`, :data:`HISTORY_V4` and :data:`HISTORY_INDEX_V4` (the exact DDL of its tables
and index), :data:`SCHEMA_V1` and :data:`DELTAS_V2`
(those of the earlier versions, which are upgraded in place), :data:`SCHEMA_VERSION`,
:data:`NOW` (the clock of the save times) and :data:`FOLD_RATIO`. Registered as the backend
``sqlite`` (options ``path``, ``timeout``).
"""

from durable_sqlitestore.store import (
    BUSY_TIMEOUT_MS,
    DELTAS_V2,
    DELTAS_V3,
    FOLD_RATIO,
    HISTORY_INDEX_V4,
    HISTORY_V4,
    NOW,
    RUNS_V3,
    SCHEMA_V1,
    SCHEMA_VERSION,
    SQLiteSession,
    SQLiteStore,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DELTAS_V2",
    "DELTAS_V3",
    "FOLD_RATIO",
    "HISTORY_INDEX_V4",
    "HISTORY_V4",
    "NOW",
    "RUNS_V3",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "SQLiteSession",
    "SQLiteStore",
]
