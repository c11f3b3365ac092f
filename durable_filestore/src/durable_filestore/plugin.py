"""Registers the ``file`` store backend with Durable (entry point group ``durable``).

Options of a config's ``[store]`` table: ``directory`` (the checkpoint directory).
"""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _factory(**options: Any) -> Any:
    from durable_filestore.store import file_store_factory

    return file_store_factory(**options)


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("file", _factory)
