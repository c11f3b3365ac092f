"""What one invocation of the ``durable`` command shares on click's ``ctx.obj``: its plugin
manager, built once per invocation (the CLI is the only place below which no manager is built).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = ["PLUGINS_KEY", "plugin_manager"]

PLUGINS_KEY = "plugins"
"""The key of the invocation's plugin manager in the root context's ``obj``."""


def plugin_manager(ctx: click.Context | None = None) -> DurablePluginManager:
    """The plugin manager of this invocation (of ``ctx``, by default the current context),
    built on first use with :func:`~durable_core.plugins.make_plugin_manager`.

    Raises:
        PluginError: a plugin implements a hook Durable does not define.
    """
    from durable_core.plugins import make_plugin_manager  # the command starts without plugins

    root = (ctx or click.get_current_context()).find_root()
    obj = root.ensure_object(dict)
    pm = obj.get(PLUGINS_KEY)
    if pm is None:
        pm = obj[PLUGINS_KEY] = make_plugin_manager()
    return pm
