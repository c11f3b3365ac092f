"""Durable's PostgreSQL store: a shared database, advisory-lock ownership per run (B-PG-1…3).

See ``docs/storage-postgres.md`` for guarantees and operation.
"""

from __future__ import annotations

import typing

from durable_core._lazy import bind_lazily

if typing.TYPE_CHECKING:
    from durable_postgresstore._keepalives import Keepalives
    from durable_postgresstore.errors import ForeignWriteError, PostgresStoreError
    from durable_postgresstore.keys import advisory_key
    from durable_postgresstore.schema import SCHEMA, SCHEMA_VERSION
    from durable_postgresstore.store import (
        CLOSE_TIMEOUT,
        DEFAULT_ACQUIRE_TIMEOUT,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_OPERATION_TIMEOUT,
        PostgresSession,
        PostgresStore,
    )

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "CLOSE_TIMEOUT": "durable_postgresstore.store",
    "DEFAULT_ACQUIRE_TIMEOUT": "durable_postgresstore.store",
    "DEFAULT_MAX_CONNECTIONS": "durable_postgresstore.store",
    "DEFAULT_OPERATION_TIMEOUT": "durable_postgresstore.store",
    "ForeignWriteError": "durable_postgresstore.errors",
    "Keepalives": "durable_postgresstore._keepalives",
    "SCHEMA": "durable_postgresstore.schema",
    "SCHEMA_VERSION": "durable_postgresstore.schema",
    "PostgresSession": "durable_postgresstore.store",
    "PostgresStore": "durable_postgresstore.store",
    "PostgresStoreError": "durable_postgresstore.errors",
    "advisory_key": "durable_postgresstore.keys",
}

__all__ = [
    "CLOSE_TIMEOUT",
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_OPERATION_TIMEOUT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "ForeignWriteError",
    "Keepalives",
    "PostgresSession",
    "PostgresStore",
    "PostgresStoreError",
    "advisory_key",
]

__getattr__, __dir__ = bind_lazily(__name__, _EXPORTS, __all__)
