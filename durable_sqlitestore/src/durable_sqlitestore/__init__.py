"""Durable's SQLite store: many runs in one dedicated local database file (B-SQL-1, B-SQL-2).

Public API: :class:`SQLiteStore` and :class:`SQLiteSession`; :data:`RUNS_V3`,
:data:`DELTAS_V3`, :data:`HISTORY_V4` and :data:`HISTORY_INDEX_V4` (the exact DDL of its tables
and index), :data:`SCHEMA_V1` and :data:`DELTAS_V2`
(those of the earlier versions, which are upgraded in place), :data:`SCHEMA_VERSION` (all
from :mod:`durable_sqlitestore.schema`, with the ordered upgrade steps),
:data:`NOW` (the clock of the save times) and :data:`FOLD_RATIO`. Registered as the backend
``sqlite`` (options ``path``, ``timeout``).
"""

from __future__ import annotations

import typing

from durable_core._lazy import bind_lazily

if typing.TYPE_CHECKING:
    from durable_sqlitestore.schema import (
        DELTAS_V2,
        DELTAS_V3,
        HISTORY_INDEX_V4,
        HISTORY_V4,
        RUNS_V3,
        SCHEMA_V1,
        SCHEMA_VERSION,
    )
    from durable_sqlitestore.store import (
        BUSY_TIMEOUT_MS,
        FOLD_RATIO,
        NOW,
        SQLiteSession,
        SQLiteStore,
    )

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "BUSY_TIMEOUT_MS": "durable_sqlitestore.store",
    "DELTAS_V2": "durable_sqlitestore.schema",
    "DELTAS_V3": "durable_sqlitestore.schema",
    "FOLD_RATIO": "durable_sqlitestore.store",
    "HISTORY_INDEX_V4": "durable_sqlitestore.schema",
    "HISTORY_V4": "durable_sqlitestore.schema",
    "NOW": "durable_sqlitestore.store",
    "RUNS_V3": "durable_sqlitestore.schema",
    "SCHEMA_V1": "durable_sqlitestore.schema",
    "SCHEMA_VERSION": "durable_sqlitestore.schema",
    "SQLiteSession": "durable_sqlitestore.store",
    "SQLiteStore": "durable_sqlitestore.store",
}

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

__getattr__, __dir__ = bind_lazily(__name__, _EXPORTS, __all__)
