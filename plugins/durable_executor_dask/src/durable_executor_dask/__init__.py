"""Durable executor plugin: function-form node bodies run on a Dask cluster."""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from durable_executor_dask.executor import DaskExecutor

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "DaskExecutor": "durable_executor_dask.executor",
}

__all__ = [
    "DaskExecutor",
]


def __getattr__(name: str) -> typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
