"""Run configuration: a TOML file parsed strictly into attrs classes (cattrs).

The package's parts:

- :mod:`~durable_core.config.schema`: the tables and keys (``RunConfig``, ``RuntimeConfig``)
  and the strict converter that checks them;
- :mod:`~durable_core.config.loading`: reading the file (:func:`load_config`) and importing the
  graph it names (:func:`load_graph`);
- :mod:`~durable_core.config.stores`: the ``[store]`` table and ``--store`` URLs
  (:class:`StoreConfig`, :func:`parse_store_url`, the default store);
- :mod:`~durable_core.config.inputs`: the ``[inputs]`` forms and their strict type checks;
- :mod:`~durable_core.config.executors`: the ``[executor]`` table (:class:`ExecutorConfig`).

Every problem is a :class:`~durable_core.errors.ConfigError` naming the file, the table and the
key. The reference for users is ``docs/cli.md`` ("Configuration").
"""

from durable_core.config.executors import ExecutorConfig
from durable_core.config.inputs import FileInput, InputSource, LiteralInput, PathInput
from durable_core.config.loading import load_config, load_graph
from durable_core.config.schema import DEFAULT_MAX_RUNNING, RunConfig, RuntimeConfig
from durable_core.config.stores import (
    HOME_ENV,
    StoreConfig,
    default_store_config,
    default_store_directory,
    memory_url_options,
    parse_store_url,
    url_path,
)

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "HOME_ENV",
    "ExecutorConfig",
    "FileInput",
    "InputSource",
    "LiteralInput",
    "PathInput",
    "RunConfig",
    "RuntimeConfig",
    "StoreConfig",
    "default_store_config",
    "default_store_directory",
    "load_config",
    "load_graph",
    "memory_url_options",
    "parse_store_url",
    "url_path",
]
