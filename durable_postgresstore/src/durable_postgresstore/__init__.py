"""Durable's PostgreSQL store: a shared database, advisory-lock ownership per run (B-PG-1…3).

See ``docs/storage-postgres.md`` for guarantees and operation.
"""

from durable_postgresstore.errors import PostgresStoreError
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

__all__ = [
    "CLOSE_TIMEOUT",
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_OPERATION_TIMEOUT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "PostgresSession",
    "PostgresStore",
    "PostgresStoreError",
    "advisory_key",
]
