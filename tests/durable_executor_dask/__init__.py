"""Tests of the durable_executor_dask distribution."""
