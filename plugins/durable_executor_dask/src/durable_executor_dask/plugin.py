"""Registers the ``dask`` executor with Durable (entry point ``dask`` of group ``durable``)."""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


def _dask_executor(**options: Any) -> Any:
    from durable_executor_dask.executor import DaskExecutor

    return DaskExecutor(**options)


@hookimpl
def durable_register_executors(register: Any) -> None:
    """Add :class:`~durable_executor_dask.executor.DaskExecutor` as ``dask``."""
    register("dask", _dask_executor)
