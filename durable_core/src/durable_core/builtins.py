"""The core's own plugin: the memory store, the built-in JSON codecs, the thread and process
executors, the local launcher.

Registered by :func:`durable_core.plugins.make_plugin_manager` through the same hooks as any
third-party plugin (and declared as the entry point ``memory`` of ``durable-core``).
"""

from __future__ import annotations

from typing import Any

from durable_core.hookspecs import hookimpl


def _memory_store(**options: Any) -> Any:
    from durable_core.store import memory_store_factory

    return memory_store_factory(**options)


def _memory_url(url: str) -> dict[str, Any]:
    from durable_core.config import memory_url_options

    return memory_url_options(url)


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("memory", _memory_store, url_schemes=["memory"], from_url=_memory_url)


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
