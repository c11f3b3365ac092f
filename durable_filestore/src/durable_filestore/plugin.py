"""Registers the ``file`` store backend with Durable (entry point group ``durable``).

Options of a config's ``[store]`` table: ``directory`` (the checkpoint directory). As a
``--store`` URL: ``file:///abs/dir`` or ``file:rel/dir``.
"""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _factory(**options: Any) -> Any:
    from durable_filestore.store import file_store_factory

    return file_store_factory(**options)


def _from_url(url: str) -> dict[str, Any]:
    """``file:///abs/dir`` or ``file:rel/dir``: the store's directory."""
    from durable_core.config import url_path

    return {"directory": url_path(url)}


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("file", _factory, url_schemes=["file"], from_url=_from_url)
