"""The plugin wing: the hooks, the plugin manager and its registries, and the core's own
plugins (``memory``, ``runlog``); entry-point group ``durable``.

It is the composition root below the durable layer: it knows the codecs, stores and executors
and fills their registries from the plugins; nothing below it builds a manager or names a hook.

- :mod:`~durable_core.plugins.hookspecs`: every hook, and ``hookimpl`` (pluggy alone);
- :mod:`~durable_core.plugins.manager`: the manager and its typed facade, one method per hook;
  :func:`make_plugin_manager` and the process-wide :func:`default_plugins`;
- :mod:`~durable_core.plugins.registries`: the store, executor and launcher registries;
- :mod:`~durable_core.plugins.builtins`, :mod:`~durable_core.plugins.runlog`: the core's plugins.

The names below load on first use (PEP 562), so that importing the hook specs (every plugin
module does, through ``from durable_core import hookimpl``) loads nothing else.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from durable_core.plugins.manager import (
        DurablePluginManager,
        PluginInfo,
        default_plugins,
        each_implementation,
        make_plugin_manager,
    )
    from durable_core.plugins.registries import (
        ENTRY_POINT_GROUP,
        KNOWN_EXECUTORS,
        KNOWN_LAUNCHERS,
        KNOWN_STORE_SCHEMES,
        KNOWN_STORES,
        ExecutorRegistry,
        LauncherRegistry,
        StoreRegistry,
    )

_WHERE = {
    "DurablePluginManager": "manager",
    "PluginInfo": "manager",
    "default_plugins": "manager",
    "each_implementation": "manager",
    "make_plugin_manager": "manager",
    "ENTRY_POINT_GROUP": "registries",
    "KNOWN_EXECUTORS": "registries",
    "KNOWN_LAUNCHERS": "registries",
    "KNOWN_STORES": "registries",
    "KNOWN_STORE_SCHEMES": "registries",
    "ExecutorRegistry": "registries",
    "LauncherRegistry": "registries",
    "StoreRegistry": "registries",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_EXECUTORS",
    "KNOWN_LAUNCHERS",
    "KNOWN_STORES",
    "KNOWN_STORE_SCHEMES",
    "DurablePluginManager",
    "ExecutorRegistry",
    "LauncherRegistry",
    "PluginInfo",
    "StoreRegistry",
    "default_plugins",
    "each_implementation",
    "make_plugin_manager",
]


def __getattr__(name: str) -> typing.Any:
    """Load a name of the manager or the registries on first use."""
    module = _WHERE.get(name)
    if module is None:  # a submodule not imported yet, or a typo
        raise AttributeError(f"module 'durable_core.plugins' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"durable_core.plugins.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
