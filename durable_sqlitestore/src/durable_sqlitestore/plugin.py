"""Registers the ``sqlite`` store backend with Durable (entry point group ``durable``)."""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _factory(**options: Any) -> Any:
    from durable_core.errors import PluginError

    raise PluginError("the sqlite store backend is not available yet in this version")


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("sqlite", _factory)
