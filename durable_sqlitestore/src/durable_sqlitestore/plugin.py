"""Registers the ``sqlite`` store backend with Durable (entry point group ``durable``).

Options of a config's ``[store]`` table: ``path`` (the database file), ``timeout`` (seconds to
wait for another process initialising the same database).
"""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _factory(**options: Any) -> Any:
    from durable_sqlitestore.store import sqlite_store_factory

    return sqlite_store_factory(**options)


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("sqlite", _factory)
