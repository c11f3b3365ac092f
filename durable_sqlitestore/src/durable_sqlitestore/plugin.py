"""Registers the ``sqlite`` store backend with Durable (entry point group ``durable``).

Options of a config's ``[store]`` table: ``path`` (the database file), ``timeout`` (seconds to
wait for another process initialising the same database). As a ``--store`` URL:
``sqlite:///abs/runs.sqlite`` or ``sqlite:rel/runs.sqlite``.
"""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _factory(**options: Any) -> Any:
    from durable_sqlitestore.store import sqlite_store_factory

    return sqlite_store_factory(**options)


def _from_url(url: str) -> dict[str, Any]:
    """``sqlite:///abs/runs.sqlite`` or ``sqlite:rel/runs.sqlite``: the database file."""
    from durable_core.config import url_path

    return {"path": url_path(url)}


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("sqlite", _factory, url_schemes=["sqlite"], from_url=_from_url)
