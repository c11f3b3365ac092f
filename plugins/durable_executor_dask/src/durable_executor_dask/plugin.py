"""Registers the ``dask`` executor and launcher with Durable (entry point ``dask``, group
``durable``)."""

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


def _dask_launcher(address: str) -> Any:
    from durable_executor_dask.launcher import dask_launcher

    return dask_launcher(address)


@hookimpl
def durable_register_launchers(register: Any) -> None:
    """Add :class:`~durable_executor_dask.launcher.DaskLauncher` as ``dask``
    (``--on dask://HOST:PORT``)."""
    register("dask", _dask_launcher)
