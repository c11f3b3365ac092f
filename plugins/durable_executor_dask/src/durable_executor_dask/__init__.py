"""Durable plugin for Dask: function-form node bodies (the ``dask`` executor) and whole runs
(the ``dask`` launcher) run on a Dask cluster."""

from __future__ import annotations

import typing

from durable_core._lazy import bind_lazily

if typing.TYPE_CHECKING:
    from durable_executor_dask.executor import DaskExecutor
    from durable_executor_dask.launcher import DaskLauncher

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "DaskExecutor": "durable_executor_dask.executor",
    "DaskLauncher": "durable_executor_dask.launcher",
}

__all__ = [
    "DaskExecutor",
    "DaskLauncher",
]

__getattr__, __dir__ = bind_lazily(__name__, _EXPORTS, __all__)
