"""Durable executor plugin: function-form node bodies run on a Dask cluster."""

from durable_executor_dask.executor import DaskExecutor

__all__ = ["DaskExecutor"]
