"""The core's own plugin: the memory store, the built-in JSON codecs, the thread and process
executors, the local launcher.

Registered by :func:`durable_core.plugins.make_plugin_manager` through the same hooks as any
third-party plugin (and declared as the entry point ``memory`` of ``durable-core``). The
factories import what they build when called, so loading the plugin loads no store or executor.
"""

from __future__ import annotations

from typing import Any

from durable_core.errors import ConfigError
from durable_core.plugins.hookspecs import hookimpl

__all__ = [
    "durable_register_codecs",
    "durable_register_executors",
    "durable_register_launchers",
    "durable_register_stores",
    "memory_url_options",
]


def _memory_store(**options: Any) -> Any:
    from durable_core.store import memory_store_factory

    return memory_store_factory(**options)


def memory_url_options(url: str) -> dict[str, Any]:
    """The memory store's options for ``memory:`` (none).

    Raises:
        ConfigError: the URL gives a location (a memory store has none).
    """
    if url.partition(":")[2].strip("/"):
        raise ConfigError("a memory store takes no location; write 'memory:'")
    return {}


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("memory", _memory_store, url_schemes=["memory"], from_url=memory_url_options)


@hookimpl
def durable_register_executors(register: Any) -> None:
    from durable_core.executors import ProcessExecutor, ThreadExecutor

    register("thread", ThreadExecutor)
    register("process", ProcessExecutor)


@hookimpl
def durable_register_launchers(register: Any) -> None:
    from durable_core.launchers.local import local_launcher

    register("local", local_launcher)


@hookimpl
def durable_register_codecs(codecs: Any) -> None:
    from durable_core.codecs import register_builtin_codecs

    register_builtin_codecs(codecs)
